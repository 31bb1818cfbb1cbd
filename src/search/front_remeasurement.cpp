#include "kareus/search/front_remeasurement.h"

#include <vector>

namespace kareus::search {

std::size_t remeasure_front(device::Device& device, const partition::Partition& representative, int repeats,
                            double static_power_w, std::vector<Evaluation>& evaluations) {
  if (repeats <= 1) return 0;
  const std::vector<Evaluation> front = pareto_front(evaluations, static_power_w, Objective::kEffectiveEnergy);
  std::size_t added = 0;
  for (const Evaluation& point : front) {
    double time_s = 0, energy_j = 0;
    int count = 0;
    for (const Evaluation& one : evaluations) {
      if (one.config != point.config) continue;
      time_s += one.time_s;
      energy_j += one.energy_j;
      ++count;
    }
    for (; count < repeats; ++count, ++added) {
      const device::Measurement again = device.measure(representative, point.config);
      time_s += again.time_s;
      energy_j += again.energy_j;
    }
    std::erase_if(evaluations, [&](const Evaluation& one) { return one.config == point.config; });
    evaluations.push_back({point.config, time_s / count, energy_j / count});
  }
  return added;
}

}  // namespace kareus::search
