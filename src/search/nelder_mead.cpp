#include "nelder_mead.h"

#include <algorithm>
#include <numeric>

namespace kareus::search {

NelderMeadResult nelder_mead(const std::function<double(const std::vector<double>&)>& function,
                             std::vector<double> start, double step, int max_evaluations) {
  const std::size_t dims = start.size();
  std::vector<std::vector<double>> simplex(dims + 1, start);
  for (std::size_t axis = 0; axis < dims; ++axis) simplex[axis + 1][axis] += step;
  std::vector<double> values(dims + 1);
  int evaluations = 0;
  auto evaluate = [&](const std::vector<double>& point) {
    ++evaluations;
    return function(point);
  };
  for (std::size_t vertex = 0; vertex <= dims; ++vertex) values[vertex] = evaluate(simplex[vertex]);
  std::vector<std::size_t> order(dims + 1);
  auto along = [&](const std::vector<double>& centroid, const std::vector<double>& worst, double factor) {
    std::vector<double> point(dims);
    for (std::size_t axis = 0; axis < dims; ++axis)
      point[axis] = centroid[axis] + factor * (worst[axis] - centroid[axis]);
    return point;
  };
  while (evaluations < max_evaluations) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    const std::size_t best = order.front();
    const std::size_t worst = order.back();
    const std::size_t second_worst = order[dims - (dims > 0 ? 1 : 0)];
    if (values[worst] - values[best] < 1e-8) break;
    std::vector<double> centroid(dims, 0.0);
    for (std::size_t vertex = 0; vertex <= dims; ++vertex) {
      if (vertex == worst) continue;
      for (std::size_t axis = 0; axis < dims; ++axis)
        centroid[axis] += simplex[vertex][axis] / static_cast<double>(dims);
    }
    const std::vector<double> reflected = along(centroid, simplex[worst], -1.0);
    const double reflected_value = evaluate(reflected);
    if (reflected_value < values[best]) {
      const std::vector<double> expanded = along(centroid, simplex[worst], -2.0);
      const double expanded_value = evaluate(expanded);
      if (expanded_value < reflected_value) {
        simplex[worst] = expanded;
        values[worst] = expanded_value;
      } else {
        simplex[worst] = reflected;
        values[worst] = reflected_value;
      }
      continue;
    }
    if (reflected_value < values[second_worst]) {
      simplex[worst] = reflected;
      values[worst] = reflected_value;
      continue;
    }
    const bool outside = reflected_value < values[worst];
    const std::vector<double> contracted = along(centroid, outside ? reflected : simplex[worst], 0.5);
    const double contracted_value = evaluate(contracted);
    if (contracted_value < std::min(values[worst], reflected_value)) {
      simplex[worst] = contracted;
      values[worst] = contracted_value;
      continue;
    }
    // Shrink towards the best vertex.
    for (std::size_t vertex = 0; vertex <= dims; ++vertex) {
      if (vertex == best) continue;
      for (std::size_t axis = 0; axis < dims; ++axis) {
        simplex[vertex][axis] = simplex[best][axis] + 0.5 * (simplex[vertex][axis] - simplex[best][axis]);
      }
      values[vertex] = evaluate(simplex[vertex]);
    }
  }
  const std::size_t best = static_cast<std::size_t>(std::min_element(values.begin(), values.end()) - values.begin());
  return {simplex[best], values[best], evaluations};
}

}  // namespace kareus::search
