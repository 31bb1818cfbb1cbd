#include "kareus/search/search_report.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "kareus/partition/search_space.h"
#include "search_internal.h"

namespace kareus::search {
namespace {

nlohmann::ordered_json front_json(const std::vector<Evaluation>& front) {
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const Evaluation& point : front) {
    points.push_back({{"config", partition::knob_config_to_json(point.config)},
                      {"time_s", point.time_s},
                      {"energy_j", point.energy_j}});
  }
  return points;
}

nlohmann::ordered_json ratios_json(const HypervolumeRatios& ratios) {
  return {{"energy", ratios.energy}, {"effective_energy", ratios.effective_energy}};
}

}  // namespace

std::size_t search_budget(std::size_t space_size, std::optional<long long> requested) {
  const long long budget = requested ? *requested : std::max(1LL, std::llround(0.1 * static_cast<double>(space_size)));
  check_budget_range(budget, space_size);
  return static_cast<std::size_t>(budget);
}

std::string search_report_json(const SearchReportContext& context, const SearchResult& result,
                               const SearchQuality& quality) {
  const nlohmann::ordered_json output = {
      {"schema", "kareus.search/1"},
      {"workload", nlohmann::ordered_json::parse(context.workload_json.empty() ? "{}" : context.workload_json)},
      {"gpu", context.gpu},
      {"partition", context.partition},
      {"strategy", context.strategy},
      {"seed", context.seed},
      {"space_size", context.space_size},
      {"budget", context.budget},
      {"evaluations", result.evaluations.size()},
      {"from_log", result.from_log},
      {"batches", result.batches},
      {"surrogate_fits", result.surrogate_fits},
      {"stop_reason", to_string(result.stop_reason)},
      {"static_power_w", context.static_power_w},
      {"frontier", front_json(result.energy_front)},
      {"effective_energy_frontier", front_json(result.effective_energy_front)},
      {"hypervolume_ratio", ratios_json(quality.evaluated)},
      {"front_hypervolume_ratio", ratios_json(quality.front)}};
  return output.dump(2);
}

}  // namespace kareus::search
