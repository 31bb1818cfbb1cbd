// kareus's plans within the baselines' achieved times (private to plan_job).
//
// `kareus plan` compares kareus with a baseline at the time the baseline's plan achieves in the
// plan simulator, which spends each clock switch's latency at the old clock. The solver does
// not model that latency, so its plans run 0.1-0.2% slower than it predicts: the frontier's plan
// by a baseline's time often runs past it, and the comparison falls back to a faster, costlier
// plan (up to 2.6% more energy on the artifact's ten configurations; bench/RESULTS.md,
// "kareus's plans within the baselines' times"). Here each time gets the frontier's plan by it,
// and the cheapest plan the search at an asked deadline finds (pipeline::cheapest_plan_by) by a
// deadline set so that the plan runs within the time: first the time less the frontier plan's
// overshoot (or, where that plan runs past the time, the overshoot of the slowest frontier plan
// a short bisection finds within it, the search's seed then), then less each overshoot seen, a
// few times at most. The searches run on all cores. Units: seconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/planner/plan_job_result.h"

namespace kareus::planner {

/// Searches at most this many times (evenly spread over the sorted times; the rest get the
/// frontier's plan only), each within a fifth of an asked deadline's default work: on the
/// README's job the full budget found at most 0.07% less energy for 2 s more of its 8.6 s, and
/// on the 70B TP 8 PP 8 job none, for 1.9 s (bench/RESULTS.md).
inline constexpr std::size_t kMaxSearchedTimes = 64;
inline constexpr std::int64_t kSearchWork = pipeline::kDeadlineSearchWork / 5;

/// A plan (one option per operation of the solved DAG) as it runs: made, predicted and simulated.
using RunPlan = std::function<MethodPoint(std::span<const int> options)>;

/// The plans of `solved` (a solve of `dag` with `gpus` paying static power) tried for each of
/// `times_s`, as `run` achieves them: for each time, one that runs within it where found, and
/// those that ran past theirs too (a plan past one time may be the best within a slower one).
[[nodiscard]] std::vector<MethodPoint> plans_within(const pipeline::PipelineDag& dag,
                                                    const pipeline::PhillipsDessoukyResult& solved, int gpus,
                                                    std::vector<double> times_s, const RunPlan& run);

}  // namespace kareus::planner
