// load_served_frontier (pfo_service.h): kept apart from the service so that the request fuzzer
// links the service without the plan reader.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/pareto.h"
#include "kareus/interop/artifact_schedule.h"
#include "kareus/interop/pfo_service.h"
#include "kareus/plan/frontier.h"

namespace kareus::interop {
namespace {

/// The plans of a frontier file's or a summary's points.
std::vector<ServedPlan> read_plans_of(const std::vector<plan::FrontierPoint>& points) {
  std::vector<ServedPlan> frontier;
  for (const plan::FrontierPoint& point : points) {
    frontier.push_back({point.time_s, point.energy_j, point.plan, plan::read_plan(point.plan)});
  }
  return frontier;
}

}  // namespace

std::vector<ServedPlan> load_served_frontier(const std::filesystem::path& path, const std::string& method) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw InputError(fmt::format("--frontier {}: no such file or folder", path.string()));
  }
  std::vector<ServedPlan> frontier;
  const bool folder = std::filesystem::is_directory(path, error);
  const std::filesystem::path frontier_file = folder ? path / "frontier.json" : path;
  // OUT/plans/<method>/ of `kareus plan`: its summary two levels up has the emulated figures.
  std::filesystem::path absolute = std::filesystem::absolute(path, error).lexically_normal();
  if (!absolute.has_filename()) absolute = absolute.parent_path();  // "OUT/plans/kareus/"
  const std::filesystem::path plans_of_summary = absolute.parent_path().parent_path() / "summary.json";
  if (folder && std::filesystem::exists(path / "summary.json", error)) {
    frontier = read_plans_of(plan::read_summary_frontier(path / "summary.json", method));
  } else if (!folder && path.filename() == "summary.json") {
    frontier = read_plans_of(plan::read_summary_frontier(path, method));
  } else if (folder && !std::filesystem::exists(frontier_file, error) && absolute.parent_path().filename() == "plans" &&
             std::filesystem::exists(plans_of_summary, error)) {
    frontier = read_plans_of(plan::read_summary_frontier(plans_of_summary, absolute.filename().string()));
  } else if (!folder || std::filesystem::exists(frontier_file, error)) {
    frontier = read_plans_of(plan::read_frontier(frontier_file));
  } else {
    for (const ExportedPlan& entry : plans_in_directory(path)) {
      plan::Plan plan = plan::read_plan(entry.plan);
      if (!(plan.predicted_time_s > 0)) {
        throw InputError(
            fmt::format("{}: the plan has no predicted time (predicted.time_s), so it has no place on a "
                        "frontier; give a kareus.frontier/1 file instead",
                        entry.plan.string()));
      }
      frontier.push_back({plan.predicted_time_s, plan.predicted_energy_j, entry.plan.string(), std::move(plan)});
    }
  }
  // Keep the Pareto points: each slower point must use less energy.
  frontier = pareto_filter(
      std::move(frontier), [](const ServedPlan& point) { return point.time_s; },
      [](const ServedPlan& point) { return point.energy_j; });
  const plan::Plan& first = frontier.front().plan;
  for (const ServedPlan& point : frontier) {
    // Zeus's PFO protocol names an instruction by stage and microbatch only: no model chunk.
    const nlohmann::json block = nlohmann::json::parse(point.plan.workload_json);
    if (const auto vpp = block.find("vpp"); vpp != block.end() && *vpp != 1) {
      throw InputError(
          fmt::format("{}: made for --vpp {}; Zeus's PFO protocol has no model chunk, so serve takes "
                      "only plans with --vpp 1",
                      point.path, vpp->dump()));
    }
    if (point.plan.stages.size() != first.stages.size() ||
        plan::microbatch_count(point.plan) != plan::microbatch_count(first)) {
      throw InputError(fmt::format("{}: {} stages and {} microbatches, but {} has {} and {}", point.path,
                                   point.plan.stages.size(), plan::microbatch_count(point.plan), frontier.front().path,
                                   first.stages.size(), plan::microbatch_count(first)));
    }
  }
  return frontier;
}

}  // namespace kareus::interop
