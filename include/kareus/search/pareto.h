// kareus/search/pareto.h - objectives, Pareto fronts and 2-D hypervolume of partition configs.
//
// Fourth stage of the data flow (workload -> partition -> device -> search). Every evaluated
// knob config of a partition has two objectives to minimise: time t (s) and an energy (J),
// either the measured energy E (Objective::kEnergy) or the effective (dynamic) energy
// E - P_static * t (Objective::kEffectiveEnergy), P_static being the GPU's static power
// (docs/kareus.md section 4: a GPU blocked in a P2P receive, A100 85 W). Hypervolume is the
// area dominated by a front inside a reference point (Zitzler & Thiele 1998), exact in 2-D.
#pragma once

#include <string_view>
#include <vector>

#include "kareus/partition/search_space.h"

namespace kareus::search {

/// One evaluated knob config: what one GPU spent on one run of the partition.
struct Evaluation {
  partition::KnobConfig config;
  double time_s = 0;
  double energy_j = 0;
};

enum class Objective {
  kEnergy,           ///< (t, E)
  kEffectiveEnergy,  ///< (t, E - static_power_w * t)
};

[[nodiscard]] std::string_view to_string(Objective objective);

/// A point in a 2-D objective space, both coordinates minimised. `energy_j` is E or
/// E - P_static * t depending on the Objective it was made for.
struct ObjectivePoint {
  double time_s = 0;
  double energy_j = 0;
};

/// The objective point of `evaluation`: (t, E) or (t, E - static_power_w * t).
[[nodiscard]] ObjectivePoint objective_point(const Evaluation& evaluation, double static_power_w, Objective objective);

/// The non-dominated evaluations on (t, objective), sorted by time ascending (so the
/// objective strictly descends). Of points with equal objectives the first one is kept.
[[nodiscard]] std::vector<Evaluation> pareto_front(std::vector<Evaluation> evaluations, double static_power_w,
                                                   Objective objective);

/// Area dominated by `points` inside `reference` (points not strictly below the reference in
/// both coordinates add nothing). Points need not be a front or sorted. O(n log n).
[[nodiscard]] double hypervolume(std::vector<ObjectivePoint> points, ObjectivePoint reference);

/// hypervolume of the objective points of `evaluations`.
[[nodiscard]] double hypervolume(const std::vector<Evaluation>& evaluations, double static_power_w, Objective objective,
                                 ObjectivePoint reference);

/// The reference point 1.1 x (max t, max objective) over `evaluations` (non-empty).
[[nodiscard]] ObjectivePoint reference_point(const std::vector<Evaluation>& evaluations, double static_power_w,
                                             Objective objective);

}  // namespace kareus::search
