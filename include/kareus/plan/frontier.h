// kareus/plan/frontier.h - frontier files: the plans of a time-energy frontier.
//
// A frontier file lists the Pareto-optimal (iteration time, energy) points of a solve, sorted
// by time ascending, each with the plan that achieves it:
//   {"schema": "kareus.frontier/1",
//    "points": [{"time_s": T, "energy_j": E, "plan": "plans/plan_0000.json"}, ...]}
// Plan paths are relative to the frontier file's folder. `kareus solve` (planner/solve_job.h)
// and `kareus import` write them; the runtime reads them (runtime/deadline.h).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kareus::plan {

inline constexpr std::string_view kFrontierSchema = "kareus.frontier/1";

/// A point of a frontier file. runtime::read_frontier reads it back with `plan` prefixed by the
/// file's folder.
struct FrontierPoint {
  double time_s = 0;
  double energy_j = 0;
  std::string plan;                 ///< relative to the frontier file's folder
  double lower_bound_energy_j = 0;  ///< `kareus solve --bound`: no plan within time_s uses less

  friend bool operator==(const FrontierPoint&, const FrontierPoint&) = default;
};

/// The frontier file's JSON text (schema and points; lower bounds are not part of it).
[[nodiscard]] std::string frontier_to_json(std::span<const FrontierPoint> points);

}  // namespace kareus::plan
