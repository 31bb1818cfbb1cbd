// kareus/plan/frontier.h - frontier files: the plans of a time-energy frontier.
//
// A frontier file lists the Pareto-optimal (iteration time, energy) points of a solve, sorted
// by time ascending, each with the plan that achieves it:
//   {"schema": "kareus.frontier/1",
//    "points": [{"time_s": T, "energy_j": E, "plan": "plans/plan_0000.json"}, ...]}
// Plan paths are relative to the frontier file's folder. `kareus solve` (planner/solve_job.h)
// and `kareus import` write them, the runtime (runtime/deadline.h) and `kareus serve` read them.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::plan {

inline constexpr std::string_view kFrontierSchema = "kareus.frontier/1";
/// The plan job's summary.json (planner/summary_writer.h writes it; read_summary_frontier below
/// reads one method's frontier back, for `kareus serve`).
inline constexpr std::string_view kSummarySchema = "kareus.summary/1";

/// A point of a frontier file. read_frontier reads it back with `plan` prefixed by the file's
/// folder.
struct FrontierPoint {
  double time_s = 0;
  double energy_j = 0;
  std::string plan;                 ///< relative to the frontier file's folder
  double lower_bound_energy_j = 0;  ///< `kareus solve --bound`: no plan within time_s uses less

  friend bool operator==(const FrontierPoint&, const FrontierPoint&) = default;
};

/// The frontier file's JSON text (schema and points; lower bounds are not part of it).
[[nodiscard]] std::string frontier_to_json(std::span<const FrontierPoint> points);

/// Reads a kareus.frontier/1 file; plan paths are made relative to the file's folder. Throws
/// InputError naming the file and point on a bad schema or field.
[[nodiscard]] std::vector<FrontierPoint> read_frontier(const std::filesystem::path& path);
/// read_frontier on text already read from `path` (named in messages; relative plans resolve
/// against its folder).
[[nodiscard]] std::vector<FrontierPoint> parse_frontier(std::string_view text, const std::filesystem::path& path);

/// The points of methods.<method>.frontier of a kareus.summary/1 file (the emulated or measured
/// time and energy planner/summary_writer.h wrote), plan paths made relative to the file's folder.
/// Throws InputError naming the file and the bad field, or the method and the methods it has.
[[nodiscard]] std::vector<FrontierPoint> read_summary_frontier(const std::filesystem::path& path,
                                                               const std::string& method);

}  // namespace kareus::plan
