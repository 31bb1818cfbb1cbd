#include "kareus/compose/instruction_options.h"

#include <algorithm>
#include <cmath>

#include "kareus/common/pareto.h"
#include "kareus/partition/comm_fit.h"
#include "kareus/partition/partition.h"

namespace kareus::compose {
namespace {

struct SumPoint {
  double time_s = 0;
  double energy_j = 0;
  partition::CommConfigs choices;
};

/// Keeps points not dominated in (time, effective energy), time ascending.
std::vector<SumPoint> pareto(std::vector<SumPoint> points, double static_power_w) {
  return pareto_filter(
      std::move(points), [](const SumPoint& point) { return point.time_s; },
      [static_power_w](const SumPoint& point) { return point.energy_j - static_power_w * point.time_s; });
}

/// Bounds a front to `limit` points spread evenly in time (first and last kept).
std::vector<SumPoint> prune(std::vector<SumPoint> front, int limit, int& pruned) {
  if (limit <= 0 || static_cast<int>(front.size()) <= limit) return front;
  std::vector<SumPoint> kept;
  const double first = front.front().time_s;
  const double span = front.back().time_s - first;
  std::size_t cursor = 0;
  for (int index = 0; index < limit; ++index) {
    const double target = first + span * index / (limit - 1);
    while (cursor + 1 < front.size() &&
           std::fabs(front[cursor + 1].time_s - target) <= std::fabs(front[cursor].time_s - target)) {
      ++cursor;
    }
    if (kept.empty() || kept.back().time_s != front[cursor].time_s) kept.push_back(front[cursor]);
  }
  pruned += static_cast<int>(front.size() - kept.size());
  return kept;
}

}  // namespace

std::map<std::string, int, std::less<>> key_instance_counts(const workload::Workload& workload, int stage,
                                                            Direction direction) {
  std::map<std::string, int, std::less<>> counts;
  for (Direction pass : partition::instruction_passes(workload, direction)) {
    for (const partition::Partition& partition : partition::build_partitions(workload, stage, pass)) {
      if (partition.searchable()) ++counts[partition.key];
    }
  }
  return counts;
}

InstructionComposition compose_instruction(device::Device& device, const workload::Workload& workload, int stage,
                                           Direction direction, const PartitionMeasurements& measurements,
                                           const std::vector<int>& clocks_mhz, const ComposeOptions& options) {
  const device::GpuSpec& gpu = device.gpu();
  const auto counts = key_instance_counts(workload, stage, direction);
  InstructionComposition composition;
  for (int clock : clocks_mhz) {
    const device::InstructionRun fixed = device::run_fixed_work(device, workload, stage, direction, clock);
    const SumPoint base{fixed.time_s, fixed.energy_j, {}};
    std::vector<SumPoint> front{base};
    bool complete = true;
    for (const auto& [key, count] : counts) {
      std::vector<SumPoint> key_points;
      if (auto found = measurements.find(key); found != measurements.end()) {
        for (const search::Evaluation& measured : found->second) {
          if (measured.config.freq_mhz != clock) continue;
          SumPoint point{count * measured.time_s, count * measured.energy_j, {}};
          point.choices[key] = {measured.config.slot, measured.config.ctas};
          key_points.push_back(std::move(point));
        }
      }
      if (key_points.empty()) {
        complete = false;
        break;
      }
      key_points = pareto(std::move(key_points), gpu.static_power_w);
      std::vector<SumPoint> sums;
      sums.reserve(front.size() * key_points.size());
      for (const SumPoint& left : front) {
        for (const SumPoint& right : key_points) {
          SumPoint sum{left.time_s + right.time_s, left.energy_j + right.energy_j, left.choices};
          sum.choices.insert(right.choices.begin(), right.choices.end());
          sums.push_back(std::move(sum));
        }
      }
      front =
          prune(pareto(std::move(sums), gpu.static_power_w), options.max_options_per_clock, composition.pruned_points);
    }
    if (!complete) {
      composition.skipped_clocks_mhz.push_back(clock);
      continue;
    }
    for (SumPoint& point : front) {
      composition.options.push_back({clock, point.time_s, point.energy_j, std::move(point.choices)});
    }
  }
  return composition;
}

}  // namespace kareus::compose
