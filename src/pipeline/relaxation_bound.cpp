// The certified lower bound of phillips_dessouky.h: PD on the kCheapest DAG without slack
// reclamation, its planned points read as the convex relaxation's optimum at each quantized makespan.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "kareus/pipeline/phillips_dessouky.h"

namespace kareus::pipeline {

std::vector<BoundPoint> relaxation_lower_bound(const PipelineDag& cheapest_dag, int gpus) {
  const int paying = gpus > 0 ? gpus : cheapest_dag.stages;
  PhillipsDessoukyOptions options;
  options.reclaim_slack = false;
  options.gpus = paying;
  const PhillipsDessoukyResult result = PhillipsDessouky(cheapest_dag, options).run();
  // Planned points in decreasing quantized makespan (the optional all-fastest extra is a
  // realization, not a planned point: skip entries whose quant_time does not decrease).
  std::vector<std::pair<std::int64_t, double>> planned;
  for (const IterationResult& iteration : result.iterations) {
    if (planned.empty() || iteration.quant_time < planned.back().first) {
      planned.emplace_back(iteration.quant_time, iteration.effective_energy_j);
    }
  }
  std::vector<BoundPoint> bound;
  if (result.stop_reason != StopReason::kMinimumTime) return bound;  // no certificate below the last point
  // Between two planned points the solver made one cut, unit after unit at the same cost
  // (PhillipsDessouky records once per cut), so relaxed(q) is linear there.
  std::size_t slower = 0;
  for (std::int64_t quant = planned.front().first; quant >= planned.back().first; --quant) {
    while (slower + 1 < planned.size() && planned[slower + 1].first >= quant) ++slower;
    double relaxed = planned[slower].second;
    if (quant < planned[slower].first) {
      const auto& [slow_quant, slow_cost] = planned[slower];
      const auto& [fast_quant, fast_cost] = planned[slower + 1];
      relaxed += (fast_cost - slow_cost) * static_cast<double>(slow_quant - quant) /
                 static_cast<double>(slow_quant - fast_quant);
    }
    const double time_s = static_cast<double>(quant) * cheapest_dag.unit_time_s;
    bound.push_back({time_s, relaxed + cheapest_dag.static_power_w * time_s * paying});
  }
  std::reverse(bound.begin(), bound.end());
  return bound;
}

double lower_bound_at(const std::vector<BoundPoint>& bound, double time_s) {
  double least = std::numeric_limits<double>::infinity();
  for (const BoundPoint& point : bound) {
    // quantize_time nudges by 1e-9, so a bound point may sit that far past a real time.
    if (point.time_s <= time_s * (1 + 1e-8)) least = std::min(least, point.energy_j);
  }
  return least;
}

}  // namespace kareus::pipeline
