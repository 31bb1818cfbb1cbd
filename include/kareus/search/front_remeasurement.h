// kareus/search/front_remeasurement.h - noise-robust fronts after a search.
//
// A front picked from single noisy measurements favours configs that were measured lucky: the
// plan job measures each config on a partition's effective-energy front again before composing
// (--front-repeats). Times in seconds, energies in joules, power in watts.
#pragma once

#include <cstddef>
#include <vector>

#include "kareus/device/device.h"
#include "kareus/search/pareto.h"

namespace kareus::search {

/// Re-measures each config on the effective-energy front of `evaluations` on `device` until it
/// has `repeats` measurements, then replaces every measurement of those configs by their mean.
/// Returns the measurements added; repeats <= 1 changes nothing.
std::size_t remeasure_front(device::Device& device, const partition::Partition& partition, int repeats,
                            double static_power_w, std::vector<Evaluation>& evaluations);

}  // namespace kareus::search
