// kareus solve: the time-energy frontier of a pipeline from a Perseus profile CSV.
#include <algorithm>
#include <memory>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/output_folder.h"
#include "kareus/planner/solve_job.h"

namespace kareus::cli {
namespace {

// The flags fill the request itself; only --out (staged) and --exact-unit (negated) are apart.
struct SolveOptions {
  planner::SolveRequest request;
  bool exact_unit = false;
  std::string out;
};

void run_solve(const SolveOptions& options) {
  OutputFolder out(options.out, "--out", "kareus solve");
  out.check_input_outside(options.request.profile, "--profile");
  planner::SolveRequest request = options.request;
  request.refine_unit = !options.exact_unit;
  request.out = out.staging();
  request.progress = [](const pipeline::IterationResult& iteration) {
    if (iteration.iteration == 0 || iteration.iteration % 2000 != 0) return;
    fmt::print(stderr, "kareus solve: iteration {}, this plan {:.3f} s, {:.1f} J\n", iteration.iteration,
               iteration.time_s, iteration.energy_j);
  };
  const planner::SolveSummary summary = planner::solve_perseus_profile(request);
  out.commit();
  fmt::print("{} iterations ({}) in {:.6f} s ({:.6f} s cpu), {} frontier points, unit {:g} s\n", summary.iterations,
             pipeline::to_string(summary.stop_reason), summary.solver_s, summary.solver_cpu_s, summary.points.size(),
             summary.unit_time_s);
  if (!summary.points.empty()) {
    fmt::print("fastest:      {:.6f} s  {:.3f} J\n", summary.points.front().time_s, summary.points.front().energy_j);
    fmt::print("least energy: {:.6f} s  {:.3f} J\n", summary.points.back().time_s, summary.points.back().energy_j);
  }
  if (summary.bound && !summary.points.empty()) {
    double max_gap = 0;
    for (const plan::FrontierPoint& point : summary.points) {
      max_gap = std::max(max_gap, point.energy_j / point.lower_bound_energy_j - 1);
    }
    fmt::print("every point is within {:.3f}% of the lower bound at its time\n", 100 * max_gap);
  }
  fmt::print("wrote {}/frontier.json\n", options.out);
}

}  // namespace

void add_solve_command(CLI::App& app) {
  auto options = std::make_shared<SolveOptions>();
  CLI::App* command = app.add_subcommand("solve", "time-energy frontier of a 1F1B pipeline from a Perseus profile CSV");
  command->add_option("--profile", options->request.profile, "CSV: stage,instruction,frequency,time,energy")
      ->required();
  command->add_option("--stages", options->request.stages, "pipeline stages")->required()->check(CLI::PositiveNumber);
  command->add_option("--microbatches", options->request.microbatches, "microbatches per iteration")
      ->required()
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--unit-time", options->request.unit_time_s,
                   "time quantum of the solver, seconds (default 0.001); refined up to 16x where options would share "
                   "one (solve.json says the unit used)")
      ->check(CLI::PositiveNumber);
  command->add_flag("--exact-unit", options->exact_unit, "solve at exactly --unit-time, never finer");
  command
      ->add_option("--static-power", options->request.static_power_w,
                   "static power per GPU, watts (default 0; A100: 85); energy = effective + static x makespan x stages")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--max-points", options->request.max_points,
                   "write at most N frontier points, evenly spread (default: all)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--deadline", options->request.deadlines_s,
                   "a makespan (seconds) to polish the plan at: a local search there from the frontier's plan and "
                   "from the relaxation's, whose plan is kept in --max-points; repeatable")
      ->check(CLI::PositiveNumber);
  command->add_flag("--bound", options->request.bound,
                    "also solve the convex relaxation: a certified lower bound per point, in OUT/solve.json");
  command->add_option("--out", options->out, "output folder for frontier.json and plans/")->required();
  command->callback([options] { run_solve(*options); });
}

}  // namespace kareus::cli
