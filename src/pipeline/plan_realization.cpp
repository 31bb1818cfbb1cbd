#include "pipeline/plan_realization.h"

#include <cassert>

#include "pipeline/plan_retimer.h"

namespace kareus::pipeline {
namespace detail {
namespace {

// One O(V+E) pass in reverse topological order; an operation's current option always fits, so
// none gets costlier.
void reclaim_slack_once(const PipelineDag& dag, const Topology& topology, std::vector<int>& option_indices,
                        std::vector<double>& start, std::vector<double>& latest_finish, bool representatives_only) {
  auto spec_of = [&](int op) -> const CandidateExecutionOptions& { return dag.specs[dag.operations[op].spec]; };
  auto time_s = [&](int op) { return spec_of(op).options()[option_indices[op]].time_s; };
  const double makespan = forward_pass<double>(topology, start, time_s);
  latest_finish_pass(topology, latest_finish, makespan, time_s, [&](int op) {
    option_indices[op] =
        slowest_within(spec_of(op), option_indices[op], latest_finish[op] - start[op], representatives_only);
  });
}

}  // namespace

PlanEvaluation evaluate(const PipelineDag& dag, const Topology& topology, std::span<const int> option_indices, int gpus,
                        std::vector<double>& start) {
  auto option = [&](int op) -> const ExecutionOption& {
    return dag.specs[dag.operations[op].spec].options()[option_indices[op]];
  };
  const double makespan = forward_pass<double>(topology, start, [&](int op) { return option(op).time_s; });
  double effective = 0;
  for (std::size_t op = 0; op < dag.operations.size(); ++op)
    effective += option(static_cast<int>(op)).effective_energy_j;
  return {makespan, effective + dag.static_power_w * makespan * gpus};
}

// The walk in reverse order is greedy: an operation late in the order may spend on a small
// step the float an earlier one needed for a large one. Over the representatives first, so the
// finer options only ever add to what the coarse pass saved.
void reclaim_slack(const PipelineDag& dag, const Topology& topology, std::vector<int>& option_indices,
                   std::vector<double>& start, std::vector<double>& latest_finish, bool finer_options) {
  reclaim_slack_once(dag, topology, option_indices, start, latest_finish, true);
  if (finer_options) reclaim_slack_once(dag, topology, option_indices, start, latest_finish, false);
}

}  // namespace detail

PlanEvaluation evaluate_plan(const PipelineDag& dag, std::span<const int> option_indices, int gpus) {
  assert(option_indices.size() == dag.operations.size() && "evaluate_plan: one option per operation");
  const detail::Topology topology(dag);
  std::vector<double> start(dag.operations.size());
  return detail::evaluate(dag, topology, option_indices, gpus, start);
}

}  // namespace kareus::pipeline
