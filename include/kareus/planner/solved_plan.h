// kareus/planner/solved_plan.h - turning the solver's chosen options into a plan.
//
// The Phillips-Dessouky solver picks one ExecutionOption per DAG operation; each option carries
// a `knob`, an integer whose meaning belongs to whoever built the options (a clock in MHz for a
// Perseus profile, an index into a method's knobs for `kareus plan`). A plan holds clocks and
// comm configs, never knobs: the caller says how a knob becomes an instruction's settings.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/pipeline/pipeline_dag.h"
#include "kareus/plan/plan.h"

namespace kareus::planner {

/// The solver's choice for one instruction: where it runs and the knob of its chosen option.
struct KnobChoice {
  int stage = 0;
  int chunk = 0;  ///< model chunk on the stage (interleaved 1F1B)
  Direction type = Direction::kForward;
  int knob = 0;
};

/// Sets an instruction's clock (and overlap and comm configs, where the method has them).
using ApplyKnob = std::function<void(const KnobChoice&, plan::PlannedInstruction&)>;

/// The plan of one option per operation (indices into each operation's options, as in
/// pipeline::IterationResult): every instruction in the DAG's (interleaved) 1F1B order, with its chunk, filled by
/// `apply`; predicted time and energy are left 0 for the caller.
[[nodiscard]] plan::Plan plan_from_options(const pipeline::PipelineDag& dag, std::span<const int> option_indices,
                                           std::string workload_json, const ApplyKnob& apply);

/// The position in the solver's frontier (time ascending) of its slowest point no slower than
/// `time_s` (the least energy by that time), or -1 when every point is slower.
[[nodiscard]] int frontier_position_by(const pipeline::PhillipsDessoukyResult& solved, double time_s);

/// Positions in the solver's frontier (time ascending) of `max_points` points evenly spread
/// (evenly_spread_positions: with two or more, the fastest and slowest always), plus for each of `at_times_s` the
/// slowest point no slower than it (the least energy by that time): the times a caller compares at or asked for, so
/// that its plan there is the solver's own rather than a neighbour's. Ascending, distinct.
[[nodiscard]] std::vector<int> sample_frontier(const pipeline::PhillipsDessoukyResult& solved, int max_points,
                                               const std::vector<double>& at_times_s);

}  // namespace kareus::planner
