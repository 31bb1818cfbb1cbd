// kareus/search/hypervolume_improvement.h - exact 2-D (expected) hypervolume improvement.
//
// The acquisition of the per-partition search (search.h). Given a front in a 2-D minimisation
// space and a reference point, the hypervolume improvement of a new point y is the area it
// dominates that the front does not. Sorting the front by the first coordinate splits the
// non-dominated region into vertical stripes [l_i, u_i) x (-inf, h_i); the improvement is a
// sum over stripes of (u_i - max(l_i, y1))+ * (h_i - y2)+, so under independent Gaussian
// marginals of y1 and y2 its expectation is a sum of products of one-dimensional closed forms
// (Emmerich, Giannakoglou & Naujoks 2006; Couckuyt, Deschrijver & Dhaene 2014). Cost O(n) per
// candidate after an O(n log n) sort done once.
#pragma once

#include <vector>

#include "kareus/search/pareto.h"

namespace kareus::search {

/// A Gaussian marginal of one objective of a candidate.
struct GaussianMarginal {
  double mean = 0;
  double stddev = 0;  ///< 0 = the value is known
};

class HypervolumeImprovement {
 public:
  /// `front`: any points (dominated ones and those outside the reference are dropped).
  HypervolumeImprovement(const std::vector<ObjectivePoint>& front, ObjectivePoint reference);

  /// Exact improvement of adding `point`.
  [[nodiscard]] double improvement(ObjectivePoint point) const;
  /// Expected improvement when the point's time and energy are independent Gaussians.
  [[nodiscard]] double expected_improvement(GaussianMarginal time, GaussianMarginal energy) const;
  /// Hypervolume of the front.
  [[nodiscard]] double hypervolume() const { return hypervolume_; }

 private:
  // Stripe i covers first coordinate [lower_[i], upper_[i]) with second coordinate below height_[i].
  std::vector<double> lower_;
  std::vector<double> upper_;
  std::vector<double> height_;
  double hypervolume_ = 0;
};

}  // namespace kareus::search
