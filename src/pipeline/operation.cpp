#include "kareus/pipeline/operation.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "kareus/common/pareto.h"

namespace kareus::pipeline {

ExecutionOption make_execution_option(double time_s, double energy_j, int knob, double static_power_w) {
  return {time_s, energy_j, energy_j - static_power_w * time_s, knob, 0};
}

std::int64_t quantize_time(double time_s, double unit_time_s) {
  // A relative nudge so that 0.003 / 0.001 = 2.9999999999999996 counts as 3 units.
  const double units = time_s / unit_time_s;
  return static_cast<std::int64_t>(std::floor(units + 1e-9 * std::max(1.0, std::abs(units))));
}

CandidateExecutionOptions::CandidateExecutionOptions(std::vector<ExecutionOption> options, double unit_time_s,
                                                     QuantumRule rule) {
  assert(!options.empty() && unit_time_s > 0 && "CandidateExecutionOptions: no options or bad unit");
  for (ExecutionOption& option : options) option.quant_time = quantize_time(option.time_s, unit_time_s);
  // Pareto front on real time and effective energy.
  options_ = pareto_filter(
      std::move(options), [](const ExecutionOption& option) { return option.time_s; },
      [](const ExecutionOption& option) { return option.effective_energy_j; });
  // One representative per quantized time: the fastest (lowtime's rule). Quantization floors,
  // so the fastest option of a quantum is the one whose real time the plan underestimates
  // least, and the fastest quantum keeps the truly fastest option (the minimum makespan stays
  // reachable).
  for (int index = 0; index < static_cast<int>(options_.size()); ++index) {
    if (representatives_.empty() || options_[index].quant_time > options_[representatives_.back()].quant_time) {
      representatives_.push_back(index);
    } else if (rule == QuantumRule::kCheapest) {
      representatives_.back() = index;  // slower within the quantum, hence cheaper (Pareto order)
    }
  }
  // Lower convex hull of the representatives (Andrew's monotone chain, lower half); costs are
  // decreasing in time.
  for (const int index : representatives_) {
    while (hull_.size() >= 2) {
      const ExecutionOption& a = options_[hull_[hull_.size() - 2]];
      const ExecutionOption& b = options_[hull_.back()];
      const ExecutionOption& c = options_[index];
      // Drop b if it lies on or above the segment a-c.
      const double cross =
          static_cast<double>(b.quant_time - a.quant_time) * (c.effective_energy_j - a.effective_energy_j) -
          (b.effective_energy_j - a.effective_energy_j) * static_cast<double>(c.quant_time - a.quant_time);
      if (cross <= 0) {
        hull_.pop_back();
      } else {
        break;
      }
    }
    hull_.push_back(index);
  }
  if (max_quant_time() - min_quant_time() < kMaxHullTable) {
    hull_table_.resize(static_cast<std::size_t>(max_quant_time() - min_quant_time() + 1));
    for (std::size_t offset = 0; offset < hull_table_.size(); ++offset)
      hull_table_[offset] = hull_cost_on_hull(min_quant_time() + static_cast<std::int64_t>(offset));
  }
}

int CandidateExecutionOptions::option_index_for(std::int64_t quant_time) const {
  const auto after =
      std::upper_bound(representatives_.begin(), representatives_.end(), quant_time,
                       [this](std::int64_t time, int index) { return time < options_[index].quant_time; });
  return after == representatives_.begin() ? representatives_.front() : *(after - 1);
}

double CandidateExecutionOptions::hull_cost_on_hull(std::int64_t quant_time) const {
  if (quant_time <= min_quant_time()) return options_[hull_.front()].effective_energy_j;
  if (quant_time >= max_quant_time()) return options_[hull_.back()].effective_energy_j;
  const auto after = std::upper_bound(hull_.begin(), hull_.end(), quant_time, [this](std::int64_t time, int index) {
    return time < options_[index].quant_time;
  });
  const ExecutionOption& right = options_[*after];
  const ExecutionOption& left = options_[*(after - 1)];
  if (left.quant_time == quant_time) return left.effective_energy_j;
  const double fraction =
      static_cast<double>(quant_time - left.quant_time) / static_cast<double>(right.quant_time - left.quant_time);
  return left.effective_energy_j + fraction * (right.effective_energy_j - left.effective_energy_j);
}

}  // namespace kareus::pipeline
