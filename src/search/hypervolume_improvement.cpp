#include "kareus/search/hypervolume_improvement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "kareus/common/pareto.h"

namespace kareus::search {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

double normal_pdf(double z) { return 0.3989422804014327 * std::exp(-0.5 * z * z); }
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// E[(a - Y) 1{Y < b}] for Y ~ N(mean, stddev^2), stddev > 0.
double partial_expectation(double a, double b, double mean, double stddev) {
  if (b == -kInfinity) return 0;
  const double z = (b - mean) / stddev;
  return (a - mean) * normal_cdf(z) + stddev * normal_pdf(z);
}

// E[(upper - max(lower, Y))+]: the expected width of the stripe [lower, upper) a point at Y covers.
double expected_width(double lower, double upper, GaussianMarginal y) {
  if (y.stddev <= 0) return std::max(0.0, upper - std::max(lower, y.mean));
  double width =
      partial_expectation(upper, upper, y.mean, y.stddev) - partial_expectation(upper, lower, y.mean, y.stddev);
  if (lower != -kInfinity) width += (upper - lower) * normal_cdf((lower - y.mean) / y.stddev);
  return std::max(0.0, width);
}

}  // namespace

HypervolumeImprovement::HypervolumeImprovement(const std::vector<ObjectivePoint>& front, ObjectivePoint reference) {
  std::vector<ObjectivePoint> points;
  for (const ObjectivePoint& point : front) {
    if (point.time_s < reference.time_s && point.energy_j < reference.energy_j) points.push_back(point);
  }
  const std::vector<ObjectivePoint> nondominated = pareto_filter(
      std::move(points), [](const ObjectivePoint& point) { return point.time_s; },
      [](const ObjectivePoint& point) { return point.energy_j; });
  // Stripe 0 lies left of the first point under the reference; stripe i > 0 starts at point i-1
  // and lies under it.
  lower_.push_back(-kInfinity);
  height_.push_back(reference.energy_j);
  for (const ObjectivePoint& point : nondominated) {
    upper_.push_back(point.time_s);
    lower_.push_back(point.time_s);
    height_.push_back(point.energy_j);
  }
  upper_.push_back(reference.time_s);
  hypervolume_ = search::hypervolume(nondominated, reference);
}

double HypervolumeImprovement::improvement(ObjectivePoint point) const {
  double area = 0;
  for (std::size_t stripe = 0; stripe < lower_.size(); ++stripe) {
    const double width = upper_[stripe] - std::max(lower_[stripe], point.time_s);
    const double height = height_[stripe] - point.energy_j;
    if (width > 0 && height > 0) area += width * height;
  }
  return area;
}

double HypervolumeImprovement::expected_improvement(GaussianMarginal time, GaussianMarginal energy) const {
  double expected = 0;
  for (std::size_t stripe = 0; stripe < lower_.size(); ++stripe) {
    // Independent marginals: the stripe's expected area is width times height in expectation.
    const double height = energy.stddev <= 0
                              ? std::max(0.0, height_[stripe] - energy.mean)
                              : partial_expectation(height_[stripe], height_[stripe], energy.mean, energy.stddev);
    if (height <= 0) continue;
    expected += expected_width(lower_[stripe], upper_[stripe], time) * height;
  }
  return expected;
}

}  // namespace kareus::search
