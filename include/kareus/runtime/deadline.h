// kareus/runtime/deadline.h - picking a plan from the iteration frontier for a deadline.
//
// When a straggler or a changed power budget moves the iteration-time target, the runtime
// switches to the frontier point (time_s, energy_j: one iteration, whole job) with the least
// energy that still meets the deadline, and, if none does, to the fastest point, flagged, so the
// caller can report that the deadline is out of reach. The frontier comes from a
// plan::kFrontierSchema file (plan/frontier.h, its writer and reader; docs/formats.md).
#pragma once

#include <cstddef>
#include <span>

#include "kareus/plan/frontier.h"

namespace kareus::runtime {

/// A point of the frontier file, as `kareus solve` and `kareus plan` write it.
using FrontierPoint = plan::FrontierPoint;

struct DeadlineChoice {
  std::size_t index = 0;        ///< into the frontier
  bool meets_deadline = false;  ///< false: no point meets it; index is the fastest point
};

/// The least-energy point with time_s <= deadline_s (ties: the faster), else the fastest point
/// (ties: the lower energy) with meets_deadline = false. Throws InputError for an empty frontier,
/// a point whose time_s or energy_j is not finite (or time_s <= 0, energy_j < 0), or a deadline
/// that is not a positive finite number of seconds.
[[nodiscard]] DeadlineChoice choose_for_deadline(std::span<const FrontierPoint> frontier, double deadline_s);

}  // namespace kareus::runtime
