#include "kareus/runtime/deadline.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::runtime {

DeadlineChoice choose_for_deadline(std::span<const FrontierPoint> frontier, double deadline_s) {
  if (frontier.empty()) throw InputError("deadline: the frontier has no points");
  if (!std::isfinite(deadline_s) || deadline_s <= 0) {
    throw InputError(fmt::format("deadline: the iteration-time deadline must be > 0 s, found {}", deadline_s));
  }
  // A NaN compares false with everything and would pass as meeting any deadline.
  for (std::size_t index = 0; index < frontier.size(); ++index) {
    const FrontierPoint& point = frontier[index];
    if (!std::isfinite(point.time_s) || point.time_s <= 0 || !std::isfinite(point.energy_j) || point.energy_j < 0) {
      throw InputError(
          fmt::format("deadline: frontier point {} has time_s {} and energy_j {}: expected a finite "
                      "time_s > 0 and energy_j >= 0",
                      index, point.time_s, point.energy_j));
    }
  }
  std::optional<std::size_t> best;
  std::size_t fastest = 0;
  for (std::size_t index = 0; index < frontier.size(); ++index) {
    const FrontierPoint& point = frontier[index];
    const FrontierPoint& quickest = frontier[fastest];
    if (point.time_s < quickest.time_s || (point.time_s == quickest.time_s && point.energy_j < quickest.energy_j)) {
      fastest = index;
    }
    if (point.time_s > deadline_s) continue;
    if (!best || point.energy_j < frontier[*best].energy_j ||
        (point.energy_j == frontier[*best].energy_j && point.time_s < frontier[*best].time_s)) {
      best = index;
    }
  }
  if (best) return {*best, true};
  return {fastest, false};
}

}  // namespace kareus::runtime
