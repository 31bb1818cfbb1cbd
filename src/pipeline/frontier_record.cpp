#include "pipeline/frontier_record.h"

#include <cassert>
#include <iterator>

#include "kareus/pipeline/phillips_dessouky.h"

namespace kareus::pipeline {
namespace detail {

bool FrontierRecord::dominated(double time_s, double energy_j) const {
  const auto after = points_.upper_bound(time_s * (1 + 1e-12));
  return after != points_.begin() && std::prev(after)->second.first <= energy_j * (1 + 1e-12);
}

bool FrontierRecord::offer(double time_s, double energy_j, int index) {
  if (dominated(time_s, energy_j)) return false;
  // Drop the points this one dominates: from its time on, those with no less energy.
  auto position = points_.lower_bound(time_s);
  while (position != points_.end() && position->second.first >= energy_j) position = points_.erase(position);
  points_.emplace_hint(position, time_s, std::make_pair(energy_j, index));
  return true;
}

std::vector<int> FrontierRecord::indices() const {
  std::vector<int> kept;
  kept.reserve(points_.size());
  for (const auto& [time_s, point] : points_) kept.push_back(point.second);
  return kept;
}

}  // namespace detail

int PlanHistory::add(std::span<const int> options) {
  const int id = size();
  if (id % kCheckpointEvery == 0) {
    checkpoints_.emplace_back(options.begin(), options.end());
  } else {
    for (int op = 0; op < static_cast<int>(options.size()); ++op) {
      if (options[op] != last_[op]) changes_.emplace_back(op, options[op]);
    }
  }
  changes_end_.push_back(changes_.size());
  last_.assign(options.begin(), options.end());
  return id;
}

std::vector<int> PlanHistory::at(int id) const {
  assert(id >= 0 && id < size() && "PlanHistory::at: no such plan");
  std::vector<int> options = checkpoints_[id / kCheckpointEvery];
  const int first = id - id % kCheckpointEvery;
  for (std::size_t change = changes_end_[first]; change < changes_end_[id]; ++change) {
    options[changes_[change].first] = changes_[change].second;
  }
  return options;
}

std::size_t PlanHistory::stored_options() const {
  std::size_t stored = changes_.size();
  for (const std::vector<int>& checkpoint : checkpoints_) stored += checkpoint.size();
  return stored;
}

}  // namespace kareus::pipeline
