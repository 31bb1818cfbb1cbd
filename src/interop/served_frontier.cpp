// load_served_frontier (pfo_service.h): kept apart from the service so that the request fuzzer
// links the service without the plan reader.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/interop/artifact_schedule.h"
#include "kareus/interop/pfo_service.h"
#include "kareus/runtime/deadline.h"

namespace kareus::interop {

std::vector<ServedPlan> load_served_frontier(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw InputError(fmt::format("--frontier {}: no such file or folder", path.string()));
  }
  std::vector<ServedPlan> frontier;
  const bool folder = std::filesystem::is_directory(path, error);
  const std::filesystem::path frontier_file = folder ? path / "frontier.json" : path;
  if (!folder || std::filesystem::exists(frontier_file, error)) {
    for (const runtime::FrontierPoint& point : runtime::read_frontier(frontier_file)) {
      frontier.push_back({point.time_s, point.energy_j, point.plan, plan::read_plan(point.plan)});
    }
  } else {
    for (const ExportedPlan& entry : plans_in_directory(path)) {
      plan::Plan plan = plan::read_plan(entry.plan);
      if (!(plan.predicted_time_s > 0)) {
        throw InputError(fmt::format("{}: the plan has no predicted time (predicted.time_s), so it has no place on a "
                                     "frontier; give a kareus.frontier/1 file instead",
                                     entry.plan.string()));
      }
      frontier.push_back({plan.predicted_time_s, plan.predicted_energy_j, entry.plan.string(), std::move(plan)});
    }
  }
  std::stable_sort(frontier.begin(), frontier.end(), [](const ServedPlan& a, const ServedPlan& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : a.energy_j < b.energy_j;
  });
  if (folder && !std::filesystem::exists(frontier_file, error)) {
    // Plans of a folder: keep the Pareto points (each slower point must use less energy).
    std::vector<ServedPlan> pareto;
    for (ServedPlan& point : frontier) {
      if (pareto.empty() || point.energy_j < pareto.back().energy_j) pareto.push_back(std::move(point));
    }
    frontier = std::move(pareto);
  }
  const plan::Plan& first = frontier.front().plan;
  for (const ServedPlan& point : frontier) {
    if (point.plan.stages.size() != first.stages.size() ||
        plan::microbatch_count(point.plan) != plan::microbatch_count(first)) {
      throw InputError(fmt::format("{}: {} stages and {} microbatches, but {} has {} and {}", point.path,
                                   point.plan.stages.size(), plan::microbatch_count(point.plan),
                                   frontier.front().path, first.stages.size(), plan::microbatch_count(first)));
    }
  }
  return frontier;
}

}  // namespace kareus::interop
