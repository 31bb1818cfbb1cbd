#include "kareus/planner/summary_writer.h"

#include <string>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/file_io.h"
#include "kareus/plan/frontier.h"
#include "kareus/plan/plan.h"

namespace kareus::planner {
namespace {

nlohmann::ordered_json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

}  // namespace

std::string plan_file(Method method, std::size_t index) {
  return fmt::format("plans/{}/plan_{:02}.json", to_string(method), index);
}

std::optional<std::size_t> position_within(const MethodResult& method, double time_s) {
  std::optional<std::size_t> within;
  for (std::size_t index = 0; index < method.frontier.size(); ++index) {
    if (method.frontier[index].time_s <= time_s) within = index;
  }
  return within;
}

void write_plan_job(const std::filesystem::path& dir, const workload::Workload& workload, const PlanJobResult& result) {
  ensure_writable_directory(dir, "--out");
  const std::filesystem::path summary_path = dir / "summary.json";
  std::error_code ignored;
  std::filesystem::remove(summary_path, ignored);  // a stale summary must not look current
  nlohmann::ordered_json methods = nlohmann::ordered_json::object();
  for (const MethodResult& method : result.methods) {
    const std::string name(to_string(method.method));
    ensure_writable_directory(dir / "plans" / name, "--out");
    nlohmann::ordered_json frontier = nlohmann::ordered_json::array();
    for (std::size_t index = 0; index < method.frontier.size(); ++index) {
      const MethodPoint& point = method.frontier[index];
      const std::string relative = plan_file(method.method, index);
      plan::write_plan(dir / relative, point.plan);
      frontier.push_back({{"time_s", point.time_s},
                          {"energy_j", point.energy_j},
                          {"plan", relative},
                          {"predicted_time_s", point.predicted_time_s},
                          {"predicted_energy_j", point.predicted_energy_j},
                          {"solved_by", to_string(point.origin.value_or(method.method))}});
    }
    // Plan files of an earlier run with more points must not sit beside this run's.
    for (std::size_t index = method.frontier.size();; ++index) {
      if (!std::filesystem::remove(dir / plan_file(method.method, index), ignored)) break;
    }
    methods[name] = {{"frontier", std::move(frontier)},
                     {"solver_iterations", method.solver_iterations},
                     {"solver_s", method.solver_s},
                     {"unit_time_s", method.unit_time_s},
                     {"composition_pruned_points", method.pruned_points}};
  }
  nlohmann::ordered_json comparison = nlohmann::ordered_json::object();
  for (const auto& [name, metrics] : result.comparison) {
    comparison[std::string(to_string(name))] = {
        {"max_throughput_time_reduction_pct", optional_number(metrics.max_throughput_time_reduction_pct)},
        {"max_throughput_energy_reduction_pct", optional_number(metrics.max_throughput_energy_reduction_pct)},
        {"iso_time_energy_reduction_pct", optional_number(metrics.iso_time_energy_reduction_pct)},
        {"iso_energy_time_reduction_pct", optional_number(metrics.iso_energy_time_reduction_pct)}};
  }
  nlohmann::ordered_json within = nlohmann::ordered_json::array();
  const MethodResult* kareus = find_method(result.methods, Method::kKareus);
  for (const double time_s : result.within_times_s) {
    const std::optional<std::size_t> position = kareus ? position_within(*kareus, time_s) : std::nullopt;
    within.push_back({{"time_s", time_s},
                      {"plan", position ? nlohmann::ordered_json(plan_file(Method::kKareus, *position)) : nullptr}});
  }
  nlohmann::ordered_json searches = nlohmann::ordered_json::array();
  for (const KeySearch& search : result.searches) {
    searches.push_back({{"partition", search.key},
                        {"space_size", search.space_size},
                        {"evaluations", search.evaluations},
                        {"clock_fill_evaluations", search.clock_fill},
                        {"front_remeasurements", search.front_remeasurements}});
  }
  nlohmann::ordered_json summary;
  summary["schema"] = plan::kSummarySchema;
  summary["workload"] = nlohmann::ordered_json::parse(workload::workload_to_json(workload));
  summary["methods"] = std::move(methods);
  summary["comparison"] = std::move(comparison);
  summary["within"] = std::move(within);
  summary["partition_searches"] = std::move(searches);
  summary["measurements"] = {{"device", result.device_kind}, {"sources", result.sources}};
  write_file_atomic(summary_path, summary.dump(2) + "\n");
}

}  // namespace kareus::planner
