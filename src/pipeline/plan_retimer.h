// src/pipeline/plan_retimer.h - one plan of a pipeline DAG on real times, tried one operation
// one option slower at a time, its slack reclaimed and the result evaluated incrementally.
//
// The Phillips-Dessouky solver's walks (phillips_dessouky.h) make thousands of such tries from
// each frontier plan. A try lengthens one operation; slack reclamation then lets every operation
// whose next slower option now fits its window (latest finish - start, with latest finish =
// makespan - time-to-the-end) take the slowest that fits, latest in topological order first,
// first over the representatives and then, with `finer_options`, over every option; the plan is
// evaluated as evaluate_plan() does (makespan; sum of effective energies in operation order +
// static power x makespan x GPUs). Here only the operations a try reaches are re-timed
// (dag_timing.h), and only those whose next option could fit are visited: an operation's window
// only shrinks while operations get slower, so one that does not fit before the pass never fits
// in it. The result equals, bit for bit, full passes of the same rule over the whole DAG
// (tests/pipeline/plan_retimer_test.cpp). Units: seconds, joules.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/pipeline/pipeline_dag.h"
#include "pipeline/dag_timing.h"

namespace kareus::pipeline::detail {

/// Slack reclamation's step for one operation: from option `index` on, the slowest (cheapest)
/// of the next representatives (or, not `representatives_only`, of the next options) whose times
/// fit `window_s`; `index` when none does.
[[nodiscard]] inline int slowest_within(const CandidateExecutionOptions& spec, int index, double window_s,
                                        bool representatives_only) {
  const std::vector<ExecutionOption>& options = spec.options();
  if (representatives_only) {
    const std::vector<int>& representatives = spec.representatives();
    for (auto next = std::upper_bound(representatives.begin(), representatives.end(), index);
         next != representatives.end() && options[*next].time_s <= window_s; ++next) {
      index = *next;
    }
  } else {
    while (index + 1 < static_cast<int>(options.size()) && options[index + 1].time_s <= window_s) ++index;
  }
  return index;
}

class PlanRetimer {
 public:
  /// `dag` and `topology` (of dag) must outlive this object. gpus > 0.
  PlanRetimer(const PipelineDag& dag, const Topology& topology, int gpus, bool finer_options);

  /// Makes `options` (one index per operation) the plan, timed by full passes; commits.
  void load(std::span<const int> options);
  /// Moves `op` one option slower (precondition: it has one), reclaims the slack, and returns
  /// the evaluation of the plan that gives. rollback() returns to the committed plan.
  PlanEvaluation slow_down(int op);
  void commit();
  void rollback();
  /// Keeps the tried plan (since the last commit) aside; restore() after rollback() makes it
  /// the plan again, committed, without re-timing it.
  void save();
  void restore();

  [[nodiscard]] PlanEvaluation evaluation() const;
  [[nodiscard]] std::span<const int> options() const { return options_; }
  [[nodiscard]] const IncrementalTiming& timing() const { return timing_; }

 private:
  // Per operation spec, per option index: the next slower option's and the next slower
  // representative's times (+inf when there is none), so that a choice costs two lookups.
  struct SpecTables {
    std::vector<double> next_s, next_representative_s;
  };
  void choose(int op, int index);
  void set_option(int op, int index);
  void update_gaps();
  void reclaim_pass(bool representatives_only);

  const PipelineDag& dag_;
  const Topology& topology_;
  const int gpus_;
  const bool finer_options_;
  std::vector<SpecTables> spec_tables_;
  std::vector<const ExecutionOption*> op_options_;  // per op: its spec's options
  std::vector<const SpecTables*> op_tables_;        // per op: its spec's tables
  IncrementalTiming timing_;
  std::vector<int> options_;
  std::vector<double> energy_j_;                 // per op: its option's effective energy
  std::vector<double> next_time_s_;              // per op: its next slower option's time, or +inf
  std::vector<double> next_representative_s_;    // per op: its next slower representative's time, or +inf
  std::vector<std::pair<int, int>> option_log_;  // (op, option before) since the last commit
  std::vector<int> watched_, fitting_;
  // Per op, of the committed plan: how much its window must grow for its next option to fit
  // (next option's time - window). A try that raises the makespan by d can only let operations
  // with a gap up to d fit (windows only shrink otherwise), so they are the ones watched.
  std::vector<double> gap_s_;
  double committed_makespan_s_ = 0;
  IncrementalTiming::Redo saved_timing_;
  std::vector<std::pair<int, int>> saved_options_;  // (op, option) of the saved try
};

}  // namespace kareus::pipeline::detail
