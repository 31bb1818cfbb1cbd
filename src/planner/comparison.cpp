#include "kareus/planner/comparison.h"

#include <algorithm>

namespace kareus::planner {

Comparison compare(const MethodResult& method, const MethodResult* megatron, const MethodResult* perseus) {
  Comparison comparison;
  if (method.frontier.empty()) return comparison;
  const MethodPoint& fastest = method.frontier.front();
  if (megatron != nullptr && !megatron->frontier.empty()) {
    const MethodPoint& base = megatron->frontier.front();
    comparison.max_throughput_time_reduction_pct = (base.time_s - fastest.time_s) / base.time_s * 100;
    comparison.max_throughput_energy_reduction_pct = (base.energy_j - fastest.energy_j) / base.energy_j * 100;
  }
  if (perseus != nullptr && !perseus->frontier.empty()) {
    const MethodPoint& perseus_fastest = perseus->frontier.front();
    const MethodPoint& perseus_least_energy = perseus->frontier.back();
    std::optional<double> least_energy, least_time;
    for (const MethodPoint& point : method.frontier) {
      if (point.time_s <= perseus_fastest.time_s * (1 + 1e-9)) {
        least_energy = std::min(least_energy.value_or(point.energy_j), point.energy_j);
      }
      if (point.energy_j <= perseus_least_energy.energy_j * (1 + 1e-9)) {
        least_time = std::min(least_time.value_or(point.time_s), point.time_s);
      }
    }
    if (least_energy) {
      comparison.iso_time_energy_reduction_pct =
          (perseus_fastest.energy_j - *least_energy) / perseus_fastest.energy_j * 100;
    }
    if (least_time) {
      comparison.iso_energy_time_reduction_pct =
          (perseus_least_energy.time_s - *least_time) / perseus_least_energy.time_s * 100;
    }
  }
  return comparison;
}

}  // namespace kareus::planner
