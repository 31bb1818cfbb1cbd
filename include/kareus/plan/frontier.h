// kareus/plan/frontier.h - frontier files and the Perseus-profile solve behind `kareus solve`.
//
// A frontier file lists the Pareto-optimal (iteration time, energy) points of a solve, sorted
// by time ascending, each with the plan that achieves it:
//   {"schema": "kareus.frontier/1",
//    "points": [{"time_s": T, "energy_j": E, "plan": "plans/plan_0000.json"}, ...]}
// Plan paths are relative to the frontier file's folder. The solve's statistics go to
// solve.json ("kareus.solve/1": stop_reason, iterations, unit_time_s, static_power_w,
// solver_s, and the points again, each with "lower_bound_energy_j" under --bound: no plan
// finishing within time_s uses less, pipeline::relaxation_lower_bound). Energy is lowtime's
// convention: sum of effective energies + static power x makespan x stages, for one iteration
// of the whole pipeline (J). Files are written PATH.tmp then renamed, frontier.json last.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/plan/plan.h"

namespace kareus::plan {

inline constexpr std::string_view kFrontierSchema = "kareus.frontier/1";
inline constexpr std::string_view kSolveSchema = "kareus.solve/1";

/// A point of a frontier file. runtime::read_frontier reads it back with `plan` prefixed by the
/// file's folder.
struct FrontierPoint {
  double time_s = 0;
  double energy_j = 0;
  std::string plan;                 ///< relative to the frontier file's folder
  double lower_bound_energy_j = 0;  ///< with SolveRequest::bound: no plan within time_s uses less

  friend bool operator==(const FrontierPoint&, const FrontierPoint&) = default;
};

/// The plan of one iteration: every instruction at the knob (freq_mhz) of its chosen option,
/// no partitions; predicted = the iteration's real time and energy.
[[nodiscard]] Plan plan_from_iteration(const pipeline::PipelineDag& dag, const pipeline::IterationResult& iteration,
                                       std::string workload_json);

/// What `kareus solve` does, for the CLI and for Python.
struct SolveRequest {
  std::filesystem::path profile;  ///< Perseus CSV
  int stages = 0;
  int microbatches = 0;
  double unit_time_s = 0.001;
  double static_power_w = 0;
  int max_points = 0;  ///< 0 = every frontier point; else at most this many, evenly spread in time
  bool bound = false;  ///< also compute pipeline::relaxation_lower_bound (a second solve)
  std::filesystem::path out;
  std::function<void(const pipeline::IterationResult&)> progress;
};

struct SolveSummary {
  std::vector<FrontierPoint> points;
  pipeline::StopReason stop_reason = pipeline::StopReason::kMinimumTime;
  int iterations = 0;
  double solver_s = 0;      ///< wall time of PhillipsDessouky::run alone
  double solver_cpu_s = 0;  ///< its CPU time (robust when the machine is shared)
  bool bound = false;       ///< points carry lower_bound_energy_j
};

/// Reads the profile, builds the 1F1B DAG, runs PhillipsDessouky and writes OUT/frontier.json,
/// OUT/solve.json and OUT/plans/plan_NNNN.json. A stale OUT/frontier.json is removed first, so a failed run
/// never leaves a frontier that looks complete. Throws InputError naming the flag or file:line
/// for bad input (including an unwritable --out and a --unit-time so small that the solve
/// would take more than 50 million operation-iterations), Error when writing fails.
SolveSummary solve_perseus_profile(const SolveRequest& request);

/// The frontier file's JSON text (schema and points only).
[[nodiscard]] std::string frontier_to_json(const SolveSummary& summary);

/// solve.json's text: the solve's statistics and, with bounds, each point's lower bound.
[[nodiscard]] std::string solve_report_to_json(const SolveSummary& summary, double unit_time_s, double static_power_w);

}  // namespace kareus::plan
