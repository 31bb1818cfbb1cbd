// kareus/common/pareto.h - the one Pareto filter: the points no other point dominates.
//
// Used wherever a list of (time, cost) points is reduced to its front: a partition's measured
// configs (search, on energy or effective energy), an instruction's composed options (compose,
// on effective energy), a method's simulated plans (planner, on job energy), the solver's
// execution options (pipeline/operation.h, on effective energy).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

namespace kareus {

/// The points not dominated in (time_of, cost_of), time ascending and cost strictly
/// descending. Of points equal in both, the first one in `points` is kept.
template <typename Point, typename TimeOf, typename CostOf>
[[nodiscard]] std::vector<Point> pareto_filter(std::vector<Point> points, TimeOf time_of, CostOf cost_of) {
  std::stable_sort(points.begin(), points.end(), [&](const Point& a, const Point& b) {
    const double time_a = time_of(a), time_b = time_of(b);
    return time_a != time_b ? time_a < time_b : cost_of(a) < cost_of(b);
  });
  std::vector<Point> front;
  for (Point& point : points) {
    if (front.empty() || cost_of(point) < cost_of(front.back())) front.push_back(std::move(point));
  }
  return front;
}

}  // namespace kareus
