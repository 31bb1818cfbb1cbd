// kareus plan: search, compose, solve and compare every method; write plans, summary and report.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <memory>

#include "commands.h"
#include "kareus/common/output_folder.h"
#include "kareus/planner/job_devices.h"
#include "kareus/planner/plan_job.h"
#include "kareus/planner/summary_writer.h"
#include "kareus/report/report.h"
#include "space_flags.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct PlanOptions {
  WorkloadFlags workload;
  GpuFlags gpu;
  SpaceFlags space;
  std::vector<std::string> methods = {"megatron", "perseus", "nanobatch_perseus", "kareus"};
  planner::PlanJobOptions job;  ///< what the flags set directly; run_plan fills in the rest
  bool exhaustive = false;
  bool always_nanobatch = false;
  planner::DeviceChoice device;
  std::string out;
};

void print_warning(const std::string& message) { fmt::print(stderr, "kareus plan: warning: {}\n", message); }

/// kareus's least-energy plan within `time_s` (summary.json's "within"), and its file.
void print_plan_within(const planner::PlanJobResult& result, const std::string& out, double time_s) {
  const planner::MethodResult* kareus = planner::find_method(result.methods, planner::Method::kKareus);
  if (kareus == nullptr) return;  // --within needs the kareus method (check_plan_job)
  const std::optional<std::size_t> within = planner::position_within(*kareus, time_s);
  if (!within) {
    fmt::print("kareus within {:.3f} s: no plan runs that fast (its fastest: {:.3f} s)\n", time_s,
               kareus->frontier.front().time_s);
    return;
  }
  const planner::MethodPoint& point = kareus->frontier[*within];
  fmt::print("kareus within {:.3f} s: {}/{} ({:.3f} s, {:.0f} J)\n", time_s, out,
             planner::plan_file(kareus->method, *within), point.time_s, point.energy_j);
}

std::string percent(const std::optional<double>& value) {
  return value ? fmt::format("{:+.1f}%", *value) : std::string("-");
}

// What the job would otherwise refuse only after minutes of work: the output directory, a second
// run writing into it, and each method's preconditions.
void run_plan(const PlanOptions& options) {
  const device::GpuSpec gpu = options.gpu.resolve();
  const workload::Workload workload = options.workload.resolve();
  // Locked (two runs never mix files in one DIR) and written aside until the summary, plans and
  // report are all there; then DIR is replaced whole.
  OutputFolder out(options.out, "--out", "kareus plan");
  for (const std::string& log : options.device.measurements) out.check_input_outside(log, "--measurements");
  if (!options.device.log.empty()) out.check_input_outside(options.device.log, "--log");
  planner::PlanJobOptions job = options.job;  // checked (check_plan_job) before any measurement
  job.methods.clear();
  for (const std::string& name : options.methods) job.methods.push_back(planner::parse_method(name));
  job.clocks_mhz = options.space.resolve_clocks(gpu);
  job.space = options.space.resolve_space();
  if (options.exhaustive) job.search_budget_fraction = 0;
  job.overlap_per_instruction = !options.always_nanobatch;
  job.progress = [](const std::string& line) { fmt::print(stderr, "kareus plan: {}\n", line); };
  job.recost_compositions = options.device.backend != "cuda";
  planner::check_plan_job(gpu, workload, job);
  planner::DeviceChoice device = options.device;
  device.seed = job.seed;
  const planner::JobDevices devices(device, gpu, workload, print_warning);
  const planner::PlanJobResult result = planner::run_plan_job(devices.devices(), workload, job);
  planner::write_plan_job(out.staging(), workload, result);
  report::write_report(out.staging(), gpu, workload, result);
  out.commit();

  fmt::print("{:<18} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10}\n", "method", "fastest s", "energy J", "thr time",
             "thr energy", "iso-time E", "iso-E time");
  for (const planner::MethodResult& method : result.methods) {
    const planner::Comparison* metrics = nullptr;
    for (const auto& [name, comparison] : result.comparison) {
      if (name == method.method) metrics = &comparison;
    }
    const planner::MethodPoint& fastest = method.frontier.front();
    fmt::print("{:<18} {:>10.3f} {:>12.0f} {:>10} {:>10} {:>10} {:>10}\n", planner::to_string(method.method),
               fastest.time_s, fastest.energy_j, percent(metrics->max_throughput_time_reduction_pct),
               percent(metrics->max_throughput_energy_reduction_pct), percent(metrics->iso_time_energy_reduction_pct),
               percent(metrics->iso_energy_time_reduction_pct));
  }
  for (const double time_s : job.within_times_s) print_plan_within(result, options.out, time_s);
  fmt::print("wrote {}/summary.json, {}/report.html and the plans\n", options.out, options.out);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* command = app.add_subcommand("plan", "time-energy frontier of execution plans, with the baselines");
  add_job_flags(command, options->workload, options->gpu, options->space);
  command->add_option("--methods", options->methods, "methods to run (comma separated)")->delimiter(',');
  command->add_option("--seed", options->job.seed, "seed of the search and measurement noise");
  command
      ->add_option("--search-budget", options->job.search_budget_fraction,
                   "per-partition search budget, a fraction of each space (default 0.1)")
      ->check(CLI::Range(0.0, 1.0));
  command->add_flag("--exhaustive", options->exhaustive, "measure every config of every partition instead");
  command
      ->add_option("--unit-time", options->job.unit_time_s,
                   "solver time unit in seconds (default: 1 ms, coarser for long iterations); refined up to 16x "
                   "where options would share one")
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--exact-unit", options->job.exact_unit, "solve at exactly the unit, never finer");
  command->add_option("--max-plans", options->job.max_plans, "frontier plans written per method")
      ->check(CLI::Range(2, 1000));
  command
      ->add_option("--front-repeats", options->job.front_repeats,
                   "measurements of each config on a partition's front before composing (1 = no repeats)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  command->add_flag("--always-nanobatch", options->always_nanobatch,
                    "kareus nanobatches every instruction (the artifact's method) instead of choosing per "
                    "instruction whether to");
  command->add_option("--measurements", options->device.measurements,
                      "plan from these `kareus profile --all` logs alone (no new measurement)");
  command->add_option("--backend", options->device.backend, "emulator, or cuda: search the partitions live on the GPU")
      ->capture_default_str();
  command->add_option("--log", options->device.log, "with --backend cuda: JSONL log of every measurement (resumes)");
  command->add_option("--gpu-index", options->device.cuda.gpu_index, "with --backend cuda: CUDA/NVML index of the GPU");
  command->add_option(
      "--within", options->job.within_times_s,
      "also kareus's least-energy plan within this iteration time, s (your job's own, say; repeatable)");
  command->add_option("--out", options->out, "output directory")->required();
  command->callback([options] { run_plan(*options); });
}

}  // namespace kareus::cli
