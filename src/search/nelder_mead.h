// Private: Nelder-Mead downhill simplex (Nelder & Mead 1965) with the standard coefficients,
// used to maximise the Gaussian process's marginal likelihood over a handful of parameters.
#pragma once

#include <functional>
#include <vector>

namespace kareus::search {

struct NelderMeadResult {
  std::vector<double> point;
  double value = 0;
  int evaluations = 0;
};

/// Minimises `function` from `start` with an initial simplex of `step` along each axis, for at
/// most `max_evaluations` calls or until the simplex's values span less than 1e-8.
NelderMeadResult nelder_mead(const std::function<double(const std::vector<double>&)>& function,
                             std::vector<double> start, double step, int max_evaluations);

}  // namespace kareus::search
