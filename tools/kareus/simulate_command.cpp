// kareus simulate: one whole training iteration on the emulator, at a locked clock or as a plan says.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <optional>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/device/emulator.h"
#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/planner/plan_simulator.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct SimulateOptions {
  WorkloadFlags workload;
  GpuFlags gpu;
  int clock_mhz = 0;
  std::string plan;
  std::string overlap;
  bool json = false;
};

void run_simulate(const SimulateOptions& options) {
  if ((options.clock_mhz == 0) == options.plan.empty()) {
    throw InputError("give either --clock MHZ (every instruction at one clock) or --plan FILE");
  }
  // A plan brings its workload and GPU; the flags then only have to agree with them.
  const std::optional<plan::Plan> plan =
      options.plan.empty() ? std::nullopt : std::optional<plan::Plan>(plan::read_plan(options.plan));
  const device::GpuSpec gpu = plan ? options.gpu.resolve_for_plan(*plan, options.plan) : options.gpu.resolve();
  const workload::Workload workload =
      plan ? options.workload.resolve_for_plan(*plan, options.plan) : options.workload.resolve();
  // With a plan, each instruction's recorded overlap decides; --overlap only speaks for plans
  // written before that field existed.
  std::optional<workload::OverlapMode> overlap;
  if (!options.overlap.empty()) overlap = workload::parse_overlap_mode(options.overlap);
  device::EmulatedDevice emulator = device::exact_emulator(gpu);
  pipeline::IterationRun run;
  if (!plan) {
    device::require_supported_clock(gpu, options.clock_mhz, "--clock");
    run = planner::simulate_locked_clock(emulator, workload, options.clock_mhz,
                                         overlap.value_or(workload::OverlapMode::kNone));
  } else {
    planner::check_plan_fits(*plan, workload, gpu, options.plan);
    run = planner::simulate_plan(emulator, workload, *plan, overlap);
  }
  if (options.json) {
    fmt::print("{}\n", pipeline::iteration_to_json(run));
    return;
  }
  const workload::Parallelism& p = workload.parallel;
  const std::string clocks = options.plan.empty() ? fmt::format("{} MHz", options.clock_mhz) : "plan " + options.plan;
  const std::string overlap_text =
      options.overlap.empty() ? (options.plan.empty() ? "none" : "as planned") : options.overlap;
  fmt::print("{} on {} GPUs {} (TP {} CP {} PP {} DP {}), {}, overlap {}\n", workload.model.name, workload.gpus(),
             gpu.name, p.tp, p.cp, p.pp, p.dp, clocks, overlap_text);
  fmt::print("iteration time {:.3f} s, job energy {:.0f} J, average power {:.1f} W per GPU\n", run.time_s, run.energy_j,
             run.avg_power_w);
  for (const pipeline::StageRun& stage : run.stages) {
    fmt::print("  stage {}: busy {:.3f} s, idle {:.3f} s, {:.0f} J per GPU\n", stage.stage, stage.busy_s,
               run.time_s - stage.busy_s, stage.energy_j);
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* command =
      app.add_subcommand("simulate", "simulate one training iteration (1F1B) at a locked clock or following a plan");
  add_job_flags(command, options->workload, options->gpu);
  command->add_option("--clock", options->clock_mhz, "every instruction at this locked SM clock (MHz)");
  command->add_option(
      "--plan", options->plan,
      "run this plan file (kareus.plan/2 or /1) instead; its workload and GPU are the defaults, and the "
      "workload flags given must agree with them");
  command->add_option(
      "--overlap", options->overlap,
      "none (Megatron, the default with --clock) or nanobatch (default collective resources); with --plan only "
      "for plans without per-instruction overlap");
  command->add_flag("--json", options->json, "print JSON");
  command->callback([options] { run_simulate(*options); });
}

}  // namespace kareus::cli
