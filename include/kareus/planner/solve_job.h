// kareus/planner/solve_job.h - `kareus solve`: the frontier of a pipeline from a Perseus profile.
//
// Reads a Perseus profile CSV (plan/perseus_csv.h), builds the synchronous 1F1B DAG, runs
// pipeline::PhillipsDessouky and writes OUT/frontier.json (plan/frontier.h), one plan per
// frontier point in OUT/plans/ (every instruction at the clock of its chosen option) and the
// solve's statistics in OUT/solve.json ("kareus.solve/1": stop_reason, iterations,
// unit_time_s, static_power_w, solver_s, and the points again, each with
// "lower_bound_energy_j" under --bound: no plan finishing within time_s uses less,
// pipeline::relaxation_lower_bound). Energy is lowtime's convention: sum of effective energies
// + static power x makespan x stages, for one iteration of the whole pipeline (J). Each file is
// written to a temporary beside it and renamed (common/file_io.h), frontier.json last.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/plan/frontier.h"

namespace kareus::planner {

inline constexpr std::string_view kSolveSchema = "kareus.solve/1";
/// The most --deadline values one solve polishes at (each costs up to about 0.2 s at scale).
inline constexpr std::size_t kMaxDeadlines = 64;

/// What `kareus solve` does, for the CLI and for Python.
struct SolveRequest {
  std::filesystem::path profile;  ///< Perseus CSV
  int stages = 0;
  int microbatches = 0;
  double unit_time_s = 0.001;  ///< the coarsest unit (planner/solver_unit.h)
  bool refine_unit = true;     ///< false: solve at exactly unit_time_s (--exact-unit)
  double static_power_w = 0;
  int max_points = 0;  ///< 0 = every frontier point; else at most this many, evenly spread in time
  bool bound = false;  ///< also compute pipeline::relaxation_lower_bound (a second solve)
  /// Makespans (seconds) the user asks plans for (--deadline): the solver polishes its plan at
  /// each (PhillipsDessoukyOptions::polish_deadlines_s) and the points written keep it.
  std::vector<double> deadlines_s;
  std::filesystem::path out;
  std::function<void(const pipeline::IterationResult&)> progress;
};

struct SolveSummary {
  std::vector<plan::FrontierPoint> points;
  pipeline::StopReason stop_reason = pipeline::StopReason::kMinimumTime;
  int iterations = 0;
  double unit_time_s = 0;   ///< the unit the solver used (solver_unit_time_s)
  double solver_s = 0;      ///< wall time of PhillipsDessouky::run alone
  double solver_cpu_s = 0;  ///< its CPU time (robust when the machine is shared)
  bool bound = false;       ///< points carry lower_bound_energy_j
};

/// Runs the solve and writes OUT/frontier.json, OUT/solve.json and OUT/plans/plan_NNNN.json. A
/// stale OUT/frontier.json is removed first, so a failed run never leaves a frontier that looks
/// complete. Throws InputError naming the flag or file:line for bad input (including an
/// unwritable --out and a --unit-time so small that the solve would take more than 50 million
/// operation-iterations), Error when writing fails.
SolveSummary solve_perseus_profile(const SolveRequest& request);

/// solve.json's text: the solve's statistics and, with bounds, each point's lower bound.
[[nodiscard]] std::string solve_report_to_json(const SolveSummary& summary, double unit_time_s, double static_power_w);

}  // namespace kareus::planner
