// kareus/search/search_quality.h - how close a search came to the exhaustive front.
//
// A search is rated against the values of every config of its space measured on a noise-free
// device (the exact emulator, handed in by the caller like every other device): the hypervolume
// of what it found over that of the true front, on (t, E) and (t, E - P_static t). Times in
// seconds, energies in joules.
#pragma once

#include <vector>

#include "kareus/device/device.h"
#include "kareus/search/search.h"

namespace kareus::search {

/// Every config of `space` measured once on `exact` (a noise-free device), in index order: the
/// ground truth a search is rated against.
[[nodiscard]] std::vector<Evaluation> exact_evaluations(device::Device& exact, const partition::Partition& partition,
                                                        const partition::SearchSpace& space);

/// Quality of a search: the hypervolume of the Pareto front of the noise-free values of the
/// `found` configs over that of the exhaustive noise-free front, both with the reference point
/// 1.1 x (max t, max objective) over `exact` (exact_evaluations of `space`). Pass every
/// evaluated config to rate what the search found (independent of the measurement noise), or
/// only those on its measured front to rate what it reports (noise may put a config there that
/// is truly dominated). Throws InputError if a config is not in `space`.
[[nodiscard]] double hypervolume_ratio(const std::vector<partition::KnobConfig>& found,
                                       const std::vector<Evaluation>& exact, const partition::SearchSpace& space,
                                       double static_power_w, Objective objective);

struct HypervolumeRatios {
  double energy = 0;            ///< on (t, E)
  double effective_energy = 0;  ///< on (t, E - P_static t)
};

/// How good a search result is: hypervolume_ratio of every evaluated config (what the search
/// found) and of the configs on its measured fronts (what it reports).
struct SearchQuality {
  HypervolumeRatios evaluated;
  HypervolumeRatios front;
};

/// Rates `result` against `exact` (a noise-free device of the GPU searched on).
[[nodiscard]] SearchQuality rate_search(device::Device& exact, const partition::Partition& partition,
                                        const partition::SearchSpace& space, const SearchResult& result);

}  // namespace kareus::search
