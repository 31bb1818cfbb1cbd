#include "kareus/common/nelder_mead.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace kareus {

std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& objective,
                                std::vector<double> start, double step, int max_evaluations, double tolerance,
                                int& evaluations) {
  assert(!start.empty());
  const std::size_t dims = start.size();
  std::vector<std::vector<double>> simplex(dims + 1, start);
  for (std::size_t dim = 0; dim < dims; ++dim) simplex[dim + 1][dim] += step;
  std::vector<double> values(dims + 1);
  for (std::size_t vertex = 0; vertex <= dims; ++vertex) values[vertex] = objective(simplex[vertex]);
  evaluations += static_cast<int>(dims + 1);
  std::vector<std::size_t> order(dims + 1);
  auto combine = [&](const std::vector<double>& from, const std::vector<double>& to, double factor) {
    std::vector<double> point(dims);
    for (std::size_t dim = 0; dim < dims; ++dim) point[dim] = from[dim] + factor * (to[dim] - from[dim]);
    return point;
  };
  while (evaluations < max_evaluations) {
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    const std::size_t best = order.front(), worst = order.back(), second = order[dims - 1];
    if (values[worst] - values[best] < tolerance) break;
    std::vector<double> centroid(dims, 0.0);
    for (std::size_t vertex : order) {
      if (vertex == worst) continue;
      for (std::size_t dim = 0; dim < dims; ++dim) centroid[dim] += simplex[vertex][dim] / static_cast<double>(dims);
    }
    const std::vector<double> reflected = combine(centroid, simplex[worst], -1);
    const double reflected_value = objective(reflected);
    ++evaluations;
    if (reflected_value < values[best]) {
      const std::vector<double> expanded = combine(centroid, simplex[worst], -2);
      const double expanded_value = objective(expanded);
      ++evaluations;
      if (expanded_value < reflected_value) {
        simplex[worst] = expanded, values[worst] = expanded_value;
      } else {
        simplex[worst] = reflected, values[worst] = reflected_value;
      }
      continue;
    }
    if (reflected_value < values[second]) {
      simplex[worst] = reflected, values[worst] = reflected_value;
      continue;
    }
    const bool outside = reflected_value < values[worst];
    const std::vector<double> contracted = combine(centroid, outside ? reflected : simplex[worst], 0.5);
    const double contracted_value = objective(contracted);
    ++evaluations;
    if (contracted_value < std::min(reflected_value, values[worst])) {
      simplex[worst] = contracted, values[worst] = contracted_value;
      continue;
    }
    for (std::size_t vertex : order) {  // shrink towards the best
      if (vertex == best) continue;
      simplex[vertex] = combine(simplex[best], simplex[vertex], 0.5);
      values[vertex] = objective(simplex[vertex]);
      ++evaluations;
    }
  }
  const auto best = std::min_element(values.begin(), values.end()) - values.begin();
  return simplex[static_cast<std::size_t>(best)];
}

}  // namespace kareus
