// src/pipeline/stage_reassignment.h - an exact re-choice of one stage's options at a fixed
// makespan, the other stages pinned: the solver's improvement step on its minimum-time plan.
//
// Slack reclamation and the walks change one operation at a time, so they miss trades between
// the operations that share a stage's time: at the minimum time of a two-stage pipeline whose
// second stage is the bottleneck, each backward + forward pair of the first stage shares the
// second's period, and the cheapest pair is the backward faster and the forward slower than the
// greedy order gives (1.0% of the iteration's energy on one generated profile; bench/RESULTS.md).
// With every other operation pinned to a start time, one stage is a chain of operations, each
// released by its pinned predecessors and due by its pinned successors, and the cheapest choice
// of its options is a multiple-choice knapsack over time: a dynamic program over the chain whose
// states are the Pareto set of (finish time, effective energy). Pinning the others at their
// earliest starts and at their latest starts gives two such programs per stage; each result is
// checked on the whole DAG before it is kept. Units: seconds, joules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kareus/pipeline/pipeline_dag.h"
#include "pipeline/dag_timing.h"

namespace kareus::pipeline::detail {

class StageReassignment {
 public:
  /// Pareto states kept per operation of the chain by default: past it the program keeps every
  /// so many in finish order, the earliest and the cheapest among them (a heuristic then, still
  /// checked).
  static constexpr std::size_t kMaxStates = 16;
  /// Passes over the stages at most (each pass that changes nothing ends it).
  static constexpr int kMaxPasses = 4;

  /// `dag` and `topology` (of dag) must outlive this object. `static_w`: static power x GPUs,
  /// which a chain pays over the makespan it leaves (0: effective energy alone is lowered).
  StageReassignment(const PipelineDag& dag, const Topology& topology, double static_w = 0,
                    std::size_t max_states = kMaxStates);

  /// Lowers the effective energy of `options` plus static_w x the makespan, keeping the real
  /// makespan within `deadline_s`, stage by stage; returns whether it changed anything. (With
  /// the others pinned, a chain's choice moves the makespan only past their last finish.)
  bool improve(std::vector<int>& options, double deadline_s);

  /// States the programs have made so far (each one option tried after one state): their work.
  [[nodiscard]] std::int64_t states_made() const { return states_made_; }

 private:
  struct State {
    double finish_s;
    double effective_j;
    int parent;  // index in the previous operation's states, -1 for the first
    int option;
  };

  const ExecutionOption& option(int op, int index) const {
    return dag_.specs[dag_.operations[op].spec].options()[index];
  }
  // The cheapest options of `stage`'s chain with the other operations pinned at pinned_start_s_;
  // false when the current ones are already the cheapest (or nothing fits).
  bool reassign(int stage, std::vector<int>& options, double deadline_s);
  void keep_pareto(std::vector<State>& states) const;

  const PipelineDag& dag_;
  const Topology& topology_;
  const double static_w_;
  const std::size_t max_states_;
  std::int64_t states_made_ = 0;
  std::vector<std::vector<int>> chains_;  // per stage: its instructions in topological order
  std::vector<int> stage_of_;             // per operation: its chain, or -1 (transfers, reductions)
  std::vector<double> start_s_, latest_finish_s_, pinned_start_s_;
  std::vector<double> trial_start_s_;       // the check of a re-chosen chain, so start_s_ stays the plan's
  std::vector<double> release_s_, due_s_;   // per chain position, from the pinned operations
  std::vector<std::vector<State>> levels_;  // per chain position: the program's states
};

}  // namespace kareus::pipeline::detail
