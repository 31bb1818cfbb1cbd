// kareus simulate: one whole training iteration on the emulator, at a locked clock or as a plan says.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/plan/plan_simulator.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct SimulateOptions {
  WorkloadFlags workload;
  GpuFlags gpu;
  int clock_mhz = 0;
  std::string plan;
  std::string overlap = "none";
  bool json = false;
};

void run_simulate(const SimulateOptions& options) {
  const device::GpuSpec gpu = options.gpu.resolve();
  const workload::Workload workload = options.workload.resolve();
  const device::OverlapMode overlap = device::parse_overlap_mode(options.overlap);
  if ((options.clock_mhz == 0) == options.plan.empty()) {
    throw InputError("give either --clock MHZ (every instruction at one clock) or --plan FILE");
  }
  pipeline::IterationRun run;
  if (options.plan.empty()) {
    device::require_supported_clock(gpu, options.clock_mhz, "--clock");
    run = pipeline::simulate_locked_clock(gpu, workload, options.clock_mhz, overlap);
  } else {
    const plan::Plan plan = plan::read_plan(options.plan);
    plan::check_plan_workload(plan, workload::workload_to_json(workload), options.plan);
    plan::check_plan_fits(plan, workload, gpu, options.plan);
    run = plan::simulate_plan(gpu, workload, plan, overlap);
  }
  if (options.json) {
    fmt::print("{}\n", pipeline::iteration_to_json(run));
    return;
  }
  const workload::Parallelism& p = workload.parallel;
  const std::string clocks = options.plan.empty() ? fmt::format("{} MHz", options.clock_mhz) : "plan " + options.plan;
  fmt::print("{} on {} GPUs {} (TP {} CP {} PP {} DP {}), {}, overlap {}\n", workload.model.name, workload.gpus(),
             gpu.name, p.tp, p.cp, p.pp, p.dp, clocks, options.overlap);
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
  add_workload_flags(command, options->workload);
  add_gpu_flags(command, options->gpu);
  command->add_option("--clock", options->clock_mhz, "every instruction at this locked SM clock (MHz)");
  command->add_option("--plan", options->plan, "run this plan file (kareus.plan/1) instead");
  command->add_option("--overlap", options->overlap, "none (Megatron) or nanobatch (default collective resources)");
  command->add_flag("--json", options->json, "print JSON");
  command->callback([options] { run_simulate(*options); });
}

}  // namespace kareus::cli
