// src/pipeline/max_flow.h - Dinic's maximum flow on a fixed network with changing capacities.
//
// PhillipsDessouky solves one minimum cut per unit of makespan removed (thousands per run) on
// the critical sub-DAG of that iteration. The network is rebuilt in place each time (reset,
// add_edge, finalize: compressed adjacency, edge e and its reverse e^1) in buffers that keep
// their memory, so an iteration allocates nothing and costs O(critical size). Dinic
// (1970): O(V^2 E) worst case, far less on the shallow, sparse critical sub-DAGs here. Why our
// own: Boost.Graph's max-flow wants its property maps rebuilt or adapted per call and costs
// seconds of compile time per including file; LEMON's Preflow (Debian liblemon-dev 1.3.1)
// could take an updated capacity map on a fixed graph but adds a dependency for ~100 lines,
// and we need an infinity that survives arithmetic and an epsilon for double capacities. We
// have not benchmarked LEMON against this (bench/RESULTS.md has our solver's numbers).
// Capacities are doubles (joules per time unit); +infinity is allowed on edges as long as no
// source-sink path is infinite (the caller checks first). Residuals below `epsilon` count as 0.
#pragma once

#include <span>
#include <vector>

namespace kareus::pipeline::detail {

class MaxFlow {
 public:
  explicit MaxFlow(int nodes = 0) : nodes_(nodes) {}

  /// Drops every edge and sets the node count; buffers keep their memory.
  void reset(int nodes);
  /// Adds from -> to and returns its id (its reverse is id ^ 1). Only before finalize().
  int add_edge(int from, int to, double capacity = 0);
  /// Builds the adjacency; call once after the last add_edge.
  void finalize();
  /// Whether `sink` is reachable from `source` through arcs of infinite residual capacity.
  [[nodiscard]] bool infinite_path(int source, int sink);

  /// Sets an edge's capacity and clears its flow; after finalize(), like the accessors below.
  void set_capacity(int edge, double capacity) {
    residual_[position_of_[edge]] = capacity;
    residual_[position_of_[edge ^ 1]] = 0;
  }
  [[nodiscard]] double capacity(int edge) const { return residual_[position_of_[edge]]; }
  [[nodiscard]] int head(int edge) const { return head_[edge]; }
  [[nodiscard]] int tail(int edge) const { return tail_[edge]; }
  [[nodiscard]] int edge_count() const { return static_cast<int>(head_.size()); }
  /// The flow on an edge added by add_edge (an even id): what its reverse can send back.
  [[nodiscard]] double flow(int edge) const { return residual_[position_of_[edge ^ 1]]; }
  /// Edges leaving `node` (its added edges and the reverses of those entering it); after finalize().
  [[nodiscard]] std::span<const int> edges_at(int node) const {
    return {edges_of_.data() + first_[node], edges_of_.data() + first_[node + 1]};
  }
  /// Sends `amount` (<= capacity(edge)) along `edge`, e.g. to seed run() with an easy flow.
  void add_flow(int edge, double amount) {
    residual_[position_of_[edge]] -= amount;
    residual_[position_of_[edge ^ 1]] += amount;
  }

  /// Maximum flow from `source` to `sink`; afterwards source_side() is the minimum cut.
  double run(int source, int sink, double epsilon);
  /// Whether `node` is reachable from the source in the residual network of the last run().
  [[nodiscard]] bool source_side(int node) const { return level_[node] >= 0; }

 private:
  template <typename Usable>
  bool levels_from(int source, int sink, Usable usable);
  bool build_levels(int source, int sink);
  double push(int node, int sink, double limit);

  int nodes_ = 0;
  double epsilon_ = 0;
  std::vector<int> tail_;
  std::vector<int> head_;
  std::vector<double> added_capacity_;  // per edge id, until finalize()
  std::vector<int> first_;              // adjacency of node n: edges_of_[first_[n] .. first_[n+1])
  std::vector<int> edges_of_;
  std::vector<int> position_of_;  // edge id -> its position in the adjacency
  // Per adjacency position, so that the searches read each arc's head, residual capacity and
  // reverse where they walk the adjacency, not through its edge id.
  std::vector<int> head_of_;
  std::vector<double> residual_;
  std::vector<int> reverse_of_;
  std::vector<int> fill_;
  std::vector<int> level_;
  std::vector<int> cursor_;
  std::vector<int> queue_;
};

}  // namespace kareus::pipeline::detail
