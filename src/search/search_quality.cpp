#include "kareus/search/search_quality.h"

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::search {

std::vector<Evaluation> exact_evaluations(device::Device& exact, const partition::Partition& partition,
                                          const partition::SearchSpace& space) {
  std::vector<Evaluation> result;
  result.reserve(space.size());
  for (std::size_t index = 0; index < space.size(); ++index) {
    const partition::KnobConfig config = space.at(index);
    const device::Measurement run = exact.measure(partition, config);
    result.push_back({config, run.time_s, run.energy_j});
  }
  return result;
}

double hypervolume_ratio(const std::vector<partition::KnobConfig>& found, const std::vector<Evaluation>& exact,
                         const partition::SearchSpace& space, double static_power_w, Objective objective) {
  std::vector<Evaluation> true_values;
  for (const partition::KnobConfig& config : found) {
    const std::size_t index = space.index_of(config);
    if (index >= exact.size()) {
      throw InputError(fmt::format("config {} MHz, {} CTAs, slot '{}' is not in the search space", config.freq_mhz,
                                   config.ctas, config.slot));
    }
    true_values.push_back(exact[index]);
  }
  const ObjectivePoint reference = reference_point(exact, static_power_w, objective);
  const double best = hypervolume(pareto_front(exact, static_power_w, objective), static_power_w, objective, reference);
  return hypervolume(true_values, static_power_w, objective, reference) / best;
}

SearchQuality rate_search(device::Device& exact_device, const partition::Partition& partition,
                          const partition::SearchSpace& space, const SearchResult& result) {
  const std::vector<Evaluation> exact = exact_evaluations(exact_device, partition, space);
  const double static_power_w = exact_device.gpu().static_power_w;
  auto configs_of = [](const std::vector<Evaluation>& evaluations) {
    std::vector<partition::KnobConfig> configs;
    for (const Evaluation& evaluation : evaluations) configs.push_back(evaluation.config);
    return configs;
  };
  const std::vector<partition::KnobConfig> evaluated = configs_of(result.evaluations);
  auto ratio = [&](const std::vector<partition::KnobConfig>& configs, Objective objective) {
    return hypervolume_ratio(configs, exact, space, static_power_w, objective);
  };
  SearchQuality quality;
  quality.evaluated = {ratio(evaluated, Objective::kEnergy), ratio(evaluated, Objective::kEffectiveEnergy)};
  quality.front = {ratio(configs_of(result.energy_front), Objective::kEnergy),
                   ratio(configs_of(result.effective_energy_front), Objective::kEffectiveEnergy)};
  return quality;
}

}  // namespace kareus::search
