// src/pipeline/plan_realization.h - a plan as it would really run: its makespan and energy from
// the options' real times, and slack reclamation (each operation the cheapest option that still
// fits its real window).
//
// The Phillips-Dessouky solver plans on quantized durations; every plan it records is realized
// here first. Units: seconds, joules.
#pragma once

#include <span>
#include <vector>

#include "kareus/pipeline/phillips_dessouky.h"
#include "pipeline/dag_timing.h"

namespace kareus::pipeline::detail {

/// Makespan from the options' real times (starts left in `start`), and energy = sum of
/// effective energies + static_power_w x makespan x gpus.
[[nodiscard]] PlanEvaluation evaluate(const PipelineDag& dag, const Topology& topology,
                                      std::span<const int> option_indices, int gpus, std::vector<double>& start);

/// Slack reclamation at a fixed real makespan: every operation takes the cheapest option that
/// still finishes by the latest start of its successors, starting no earlier than its
/// predecessors allow; over the representatives, then (with `finer_options`) over every option.
/// Never raises the makespan nor any operation's cost. `start` and `latest_finish` are scratch.
void reclaim_slack(const PipelineDag& dag, const Topology& topology, std::vector<int>& option_indices,
                   std::vector<double>& start, std::vector<double>& latest_finish, bool finer_options);

}  // namespace kareus::pipeline::detail
