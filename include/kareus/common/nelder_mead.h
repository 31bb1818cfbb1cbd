// kareus/common/nelder_mead.h - derivative-free minimization of a function of a few variables.
//
// Nelder-Mead with the standard coefficients (reflect 1, expand 2, contract 1/2, shrink 1/2),
// for objectives with kinks (the emulator's roofline, wave quantization and smooth minima), where
// gradients are not worth having. Used to fit emulator parameters to measurements
// (device/calibration.h) and to the overlap targets (planner/overlap_calibration.h). Callers
// that need bounds map them into the variables (a log and a clamp, or a sine).
#pragma once

#include <functional>
#include <vector>

namespace kareus {

/// Minimizes `objective` from `start`, with a first simplex of `start` plus `step` along each
/// axis; stops when the simplex's objective spread falls below `tolerance` or `evaluations`
/// reaches `max_evaluations`. Returns the best vertex; adds the evaluations it used to
/// `evaluations`. Precondition: !start.empty().
[[nodiscard]] std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& objective,
                                              std::vector<double> start, double step, int max_evaluations,
                                              double tolerance, int& evaluations);

}  // namespace kareus
