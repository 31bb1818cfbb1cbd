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

struct SolveOptions {
  std::string profile;
  int stages = 0;
  int microbatches = 0;
  double unit_time_s = 0.001;
  bool exact_unit = false;
  double static_power_w = 0;
  int max_points = 0;
  bool bound = false;
  std::string out;
};

void run_solve(const SolveOptions& options) {
  OutputFolder out(options.out, "--out", "kareus solve");
  out.check_input_outside(options.profile, "--profile");
  planner::SolveRequest request;
  request.profile = options.profile;
  request.stages = options.stages;
  request.microbatches = options.microbatches;
  request.unit_time_s = options.unit_time_s;
  request.refine_unit = !options.exact_unit;
  request.static_power_w = options.static_power_w;
  request.max_points = options.max_points;
  request.bound = options.bound;
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
  command->add_option("--profile", options->profile, "CSV: stage,instruction,frequency,time,energy")->required();
  command->add_option("--stages", options->stages, "pipeline stages")->required()->check(CLI::PositiveNumber);
  command->add_option("--microbatches", options->microbatches, "microbatches per iteration")
      ->required()
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--unit-time", options->unit_time_s,
                   "time quantum of the solver, seconds (default 0.001); refined up to 16x where options would share "
                   "one (solve.json says the unit used)")
      ->check(CLI::PositiveNumber);
  command->add_flag("--exact-unit", options->exact_unit, "solve at exactly --unit-time, never finer");
  command
      ->add_option("--static-power", options->static_power_w,
                   "static power per GPU, watts (default 0; A100: 85); energy = effective + static x makespan x stages")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--max-points", options->max_points, "write at most N frontier points, evenly spread (default: all)")
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--bound", options->bound,
                    "also solve the convex relaxation: a certified lower bound per point, in OUT/solve.json");
  command->add_option("--out", options->out, "output folder for frontier.json and plans/")->required();
  command->callback([options] { run_solve(*options); });
}

}  // namespace kareus::cli
