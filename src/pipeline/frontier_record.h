// src/pipeline/frontier_record.h - the plans a solve recorded that no other is as fast and as
// cheap as, on real (time_s, energy_j).
//
// The Phillips-Dessouky solver offers every plan it evaluates (PD's own, the repair to the
// minimum time, each walk's tries); the walks ask it whether a try would be new before keeping
// it. Of points equal within 1e-12 (relative), the first offered stays. PlanHistory
// (phillips_dessouky.h) keeps the plans themselves.
#pragma once

#include <map>
#include <utility>
#include <vector>

namespace kareus::pipeline::detail {

class FrontierRecord {
 public:
  /// True when a point kept is at least as fast and as cheap (within 1e-12 relative).
  [[nodiscard]] bool dominated(double time_s, double energy_j) const;
  /// Keeps (time_s, energy_j) as `index` unless dominated, dropping the points it dominates.
  /// Returns whether it was kept.
  bool offer(double time_s, double energy_j, int index);
  /// The indices kept, time ascending (energy descending).
  [[nodiscard]] std::vector<int> indices() const;
  [[nodiscard]] std::size_t size() const { return points_.size(); }

 private:
  std::map<double, std::pair<double, int>> points_;  // time_s -> (energy_j, index)
};

}  // namespace kareus::pipeline::detail
