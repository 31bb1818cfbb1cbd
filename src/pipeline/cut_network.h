// src/pipeline/cut_network.h - the minimum-cut network of one Phillips-Dessouky iteration.
//
// Activity-on-arc form of the critical sub-DAG at the planned durations (in unit_time_s):
// critical operation k is the arc start(k) -> end(k) (nodes 2 + 2k, 3 + 2k); a dependency
// without float is an infinite arc end(u) -> start(v); node 0 is the source, 1 the sink, joined
// by infinite arcs to the critical operations that start at 0 and end at the makespan. An
// operation's arc may cost `upper` = cost(d - 1) - cost(d) to cut forward (shorten it) and saves
// `lower` = cost(d) - cost(d + 1) cut backward (lengthen it), cost the hull's. A lower bound l
// on an arc a -> b becomes capacity (upper - l) on the arc, a -> sink and source -> b of
// capacity l, and a constant -l: the minimum cut then equals PD's (sum of forward uppers - sum
// of backward lowers) in one max flow, negative cuts included, with no separate feasibility
// phase. The network is rebuilt in place every iteration and its max flow started from the last
// one's (the network changes little from one cut to the next).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kareus/pipeline/pipeline_dag.h"
#include "pipeline/dag_timing.h"
#include "pipeline/max_flow.h"

namespace kareus::pipeline::detail {

/// Whether dependency `edge` (before, after) has no float at these planned times.
[[nodiscard]] inline bool tight_dependency(const std::pair<int, int>& edge, std::span<const std::int64_t> duration,
                                           std::span<const std::int64_t> start,
                                           std::span<const std::int64_t> latest_finish) {
  const auto& [before, after] = edge;
  return start[before] + duration[before] == latest_finish[after] - duration[after];
}

/// The critical sub-DAG of planned durations: its operations, and every operation's planned
/// times at `makespan` (start from a forward pass, latest finish from a backward pass).
struct CriticalSubDag {
  std::span<const int> critical_ops;  ///< k -> operation
  std::span<const int> compact;       ///< operation -> k, or -1 when it has float
  std::span<const std::int64_t> duration, start, latest_finish;
  std::int64_t makespan = 0;
};

class CutNetwork {
 public:
  /// `dag` and `topology` (of dag) must outlive this object.
  CutNetwork(const PipelineDag& dag, const Topology& topology);

  /// Builds the network of `sub` (each critical operation's duration within its hull's span).
  void build(const CriticalSubDag& sub);
  /// A source-sink path of infinite arcs: a critical path already at its fastest everywhere.
  [[nodiscard]] bool at_minimum_time();
  /// Finds the minimum cut (the max flow started from the last solve's).
  void solve();
  /// After solve(): critical operation k's arc crosses the cut forward (shorten it) or
  /// backward (lengthen it).
  [[nodiscard]] bool forward_cut(int k) const {
    return network_.source_side(start_node(k)) && !network_.source_side(end_node(k));
  }
  [[nodiscard]] bool backward_cut(int k) const {
    return !network_.source_side(start_node(k)) && network_.source_side(end_node(k));
  }

 private:
  static constexpr int kSource = 0;
  static constexpr int kSink = 1;
  static int start_node(int k) { return 2 + 2 * k; }
  static int end_node(int k) { return 3 + 2 * k; }

  // Where an arc's flow is kept between iterations: per operation (its own arc, its lower-
  // bound arcs, its source and sink arcs) or per DAG edge.
  enum class FlowKey { kOperation, kLowerOut, kLowerIn, kFromSource, kToSink, kDependency };
  struct Arc {
    int from, to;
    double capacity;
  };
  struct TightEdge {
    int arc, before, after;  // before/after as critical indices
  };

  int add_arc(int from, int to, double capacity, FlowKey kind, int index);
  void load_network(int nodes);
  void warm_start();
  void seed_flow();
  void save_flow();

  const PipelineDag& dag_;
  const Topology& topology_;
  const int count_;
  MaxFlow network_;
  int critical_count_ = 0;
  std::vector<Arc> arcs_, loaded_arcs_;  // the network being built, and the one in network_
  int loaded_nodes_ = -1;
  std::vector<int> lower_in_, lower_out_;  // k -> arc, or -1 when l = 0
  std::vector<TightEdge> tight_edges_;
  std::vector<int> arc_keys_, saved_keys_;          // per arc of the network: its index into saved_flow_
  std::vector<double> saved_flow_;                  // the last maximum flow, by FlowKey
  std::vector<double> imbalance_;                   // per node: flow in - flow out, during warm_start()
  std::vector<int> node_order_;                     // the network's nodes in topological order
  std::vector<int> node_ops_;                       // critical operations in topological order
  std::vector<std::pair<int, int>> terminal_arcs_;  // (arc, k): source -> start(k) or end(k) -> sink
  double max_capacity_ = 0;
};

}  // namespace kareus::pipeline::detail
