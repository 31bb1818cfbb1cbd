// src/pipeline/pair_exchange.h - a local search at a fixed deadline whose moves are one
// operation one option slower, alone or paired with another one or two options faster.
//
// Slack reclamation and the walks change one operation at a time, each step cheaper or slower.
// In the middle of the frontier the optimum often trades the steady state's period against the
// warm-up and cool-down (every steady-state pair slower, the ends faster): from the solver's
// plans no single-option change goes towards it, a slower one paired with a faster one does
// (bench/RESULTS.md, "How far local moves get in the middle of the frontier"). A faster partner
// helps only where it lies on a path the slower operation pushed past the deadline, so the
// partners tried are the operations whose float is less than that excess. Each try re-times
// the DAG from the changed operation on, and a search tries up to n x 2(n - 1) pairs per pass:
// it is for the few deadlines a caller asks, not the whole frontier. Units: seconds, joules.
#pragma once

#include <cstdint>
#include <vector>

#include "kareus/pipeline/pipeline_dag.h"
#include "pipeline/dag_timing.h"

namespace kareus::pipeline::detail {

class PairExchange {
 public:
  /// `dag` and `topology` (of dag) must outlive this object. gpus > 0.
  PairExchange(const PipelineDag& dag, const Topology& topology, int gpus);

  /// Lowers the energy of `options` keeping its real makespan within `deadline_s`, one accepted
  /// move at a time (the first that lowers it), to a local optimum or until `budget` (operation
  /// timings: plans timed x operations, counted down) runs out; returns whether it changed
  /// anything. `options` must finish by `deadline_s`.
  bool improve(std::vector<int>& options, double deadline_s, std::int64_t& budget);

 private:
  const ExecutionOption& option(int op, int index) const;
  int option_count(int op) const;
  // Moves `op` to option `index`, keeping duration_s_ and effective_j_.
  void set(std::vector<int>& options, int op, int index);
  // The makespan of the durations now, whose starts are `before_s` but where `changed` and what
  // follows it in topological order is re-timed, into `start_s`; the operations re-timed come
  // off `budget`.
  double retime(const std::vector<double>& before_s, std::vector<double>& start_s, int changed, std::int64_t& budget);

  const PipelineDag& dag_;
  const Topology& topology_;
  const int count_;
  const double static_w_;  // static power x GPUs
  // Of the plan being searched: each operation's time and the sum of effective energies, kept
  // as options change, so a try is one partial forward pass.
  std::vector<double> duration_s_;
  double effective_j_ = 0;
  // Starts of the plan, of it with the slower move alone, and with the pair; latest finishes of
  // the slower move alone.
  std::vector<double> start_s_, alone_start_s_, pair_start_s_, latest_finish_s_;
};

}  // namespace kareus::pipeline::detail
