// kareus plan: search, compose, solve and compare every method; write plans, summary and report.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/file_lock.h"
#include "kareus/plan/plan_job.h"
#include "kareus/report/report.h"
#include "space_flags.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct PlanOptions {
  WorkloadFlags workload;
  GpuFlags gpu;
  SpaceFlags space;
  std::vector<std::string> methods = plan::kMethods;
  std::uint64_t seed = 0;
  double search_budget = 0.1;
  bool exhaustive = false;
  double unit_time_s = 0;
  int max_plans = 10;
  std::string out;
};

std::string percent(const std::optional<double>& value) {
  return value ? fmt::format("{:+.1f}%", *value) : std::string("-");
}

// What the job would otherwise refuse only after minutes of work: the output directory, a second
// run writing into it, and each method's preconditions.
void check_before_work(const PlanOptions& options, const workload::Workload& workload) {
  ensure_writable_directory(options.out, "--out");
  for (const std::string& method : options.methods) {
    if ((method == "nanobatch_perseus" || method == "kareus") && workload.parallel.nanobatches != 2) {
      throw InputError(
          fmt::format("--methods {} needs --nanobatches 2, found {} (with 1, run --methods "
                      "megatron,perseus)",
                      method, workload.parallel.nanobatches));
    }
  }
}

void run_plan(const PlanOptions& options) {
  const device::GpuSpec gpu = options.gpu.resolve();
  const workload::Workload workload = options.workload.resolve();
  check_before_work(options, workload);
  // Held until the summary, plans and report are written: two runs never mix files in one DIR.
  const FileLock lock(std::filesystem::path(options.out) / ".kareus.lock", "--out " + options.out);
  plan::PlanJobOptions job;
  job.methods = options.methods;
  job.clocks_mhz = options.space.resolve_clocks(gpu);
  job.space = options.space.resolve_space();
  job.unit_time_s = options.unit_time_s;
  job.seed = options.seed;
  job.search_budget_fraction = options.exhaustive ? 0 : options.search_budget;
  job.max_plans = options.max_plans;
  job.progress = [](const std::string& line) { fmt::print(stderr, "kareus plan: {}\n", line); };
  const plan::PlanJobResult result = plan::run_plan_job(gpu, workload, job);
  plan::write_plan_job(options.out, workload, result);
  report::write_report(options.out, gpu, workload, result);

  fmt::print("{:<18} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10}\n", "method", "fastest s", "energy J", "thr time",
             "thr energy", "iso-time E", "iso-E time");
  for (const plan::MethodResult& method : result.methods) {
    const plan::Comparison* metrics = nullptr;
    for (const auto& [name, comparison] : result.comparison) {
      if (name == method.name) metrics = &comparison;
    }
    const plan::MethodPoint& fastest = method.frontier.front();
    fmt::print("{:<18} {:>10.3f} {:>12.0f} {:>10} {:>10} {:>10} {:>10}\n", method.name, fastest.time_s,
               fastest.energy_j, percent(metrics->max_throughput_time_reduction_pct),
               percent(metrics->max_throughput_energy_reduction_pct), percent(metrics->iso_time_energy_reduction_pct),
               percent(metrics->iso_energy_time_reduction_pct));
  }
  fmt::print("wrote {}/summary.json, {}/report.html and the plans\n", options.out, options.out);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* command = app.add_subcommand("plan", "time-energy frontier of execution plans, with the baselines");
  add_workload_flags(command, options->workload);
  add_gpu_flags(command, options->gpu);
  add_space_flags(command, options->space);
  command->add_option("--methods", options->methods, "methods to run (comma separated)")->delimiter(',');
  command->add_option("--seed", options->seed, "seed of the search and measurement noise");
  command
      ->add_option("--search-budget", options->search_budget,
                   "per-partition search budget, a fraction of each space (default 0.1)")
      ->check(CLI::Range(0.0, 1.0));
  command->add_flag("--exhaustive", options->exhaustive, "measure every config of every partition instead");
  command
      ->add_option("--unit-time", options->unit_time_s,
                   "solver time unit in seconds (default: 1 ms, coarser for long iterations)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--max-plans", options->max_plans, "frontier plans written per method")
      ->check(CLI::Range(2, 1000));
  command->add_option("--out", options->out, "output directory")->required();
  command->callback([options] { run_plan(*options); });
}

}  // namespace kareus::cli
