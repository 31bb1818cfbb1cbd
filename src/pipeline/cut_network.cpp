#include "pipeline/cut_network.h"

#include <algorithm>
#include <cassert>

namespace kareus::pipeline::detail {
CutNetwork::CutNetwork(const PipelineDag& dag, const Topology& topology)
    : dag_(dag), topology_(topology), count_(static_cast<int>(dag.operations.size())) {}

void CutNetwork::build(const CriticalSubDag& sub) {
  critical_count_ = static_cast<int>(sub.critical_ops.size());
  arc_keys_.clear();
  arcs_.clear();
  lower_in_.assign(critical_count_, -1);
  lower_out_.assign(critical_count_, -1);
  max_capacity_ = 0;
  for (int k = 0; k < critical_count_; ++k) {
    const int op = sub.critical_ops[k];
    const CandidateExecutionOptions& options = dag_.specs[dag_.operations[op].spec];
    const std::int64_t duration = sub.duration[op];
    const double here = options.hull_cost(duration);
    double upper = duration > options.min_quant_time() ? options.hull_cost(duration - 1) - here : kInfinity;
    const double lower =
        duration < options.max_quant_time() ? std::max(0.0, here - options.hull_cost(duration + 1)) : 0.0;
    // Convexity guarantees lower <= upper; clamp rounding noise.
    if (upper < lower) upper = lower;
    if (upper < kInfinity) max_capacity_ = std::max(max_capacity_, upper);
    add_arc(start_node(k), end_node(k), upper - lower, FlowKey::kOperation, op);
    if (lower > 0) {
      lower_out_[k] = add_arc(start_node(k), kSink, lower, FlowKey::kLowerOut, op);
      lower_in_[k] = add_arc(kSource, end_node(k), lower, FlowKey::kLowerIn, op);
    }
  }
  tight_edges_.clear();
  for (std::size_t edge = 0; edge < dag_.edges.size(); ++edge) {
    if (!tight_dependency(dag_.edges[edge], sub.duration, sub.start, sub.latest_finish)) continue;
    const auto& [before, after] = dag_.edges[edge];
    // A dependency without float joins two operations without float.
    assert(sub.compact[before] >= 0 && sub.compact[after] >= 0 && "tight dependency between non-critical operations");
    const int arc = add_arc(end_node(sub.compact[before]), start_node(sub.compact[after]), kInfinity,
                            FlowKey::kDependency, static_cast<int>(edge));
    tight_edges_.push_back({arc, sub.compact[before], sub.compact[after]});
  }
  terminal_arcs_.clear();
  for (int k = 0; k < critical_count_; ++k) {
    const int op = sub.critical_ops[k];
    if (topology_.pred_first[op] == topology_.pred_first[op + 1] && sub.latest_finish[op] - sub.duration[op] == 0) {
      terminal_arcs_.emplace_back(add_arc(kSource, start_node(k), kInfinity, FlowKey::kFromSource, op), k);
    }
    if (topology_.succ_first[op] == topology_.succ_first[op + 1] && sub.start[op] + sub.duration[op] == sub.makespan) {
      terminal_arcs_.emplace_back(add_arc(end_node(k), kSink, kInfinity, FlowKey::kToSink, op), k);
    }
  }
  node_ops_.clear();
  for (const int op : topology_.order) {
    if (sub.compact[op] >= 0) node_ops_.push_back(sub.compact[op]);
  }
  load_network(2 + 2 * critical_count_);
}

bool CutNetwork::at_minimum_time() { return network_.infinite_path(kSource, kSink); }

void CutNetwork::solve() {
  warm_start();
  seed_flow();
  network_.run(kSource, kSink, 1e-12 * std::max(1.0, max_capacity_));
  save_flow();
}

// Most iterations (nine in ten at 175B scale) see the arcs of the last one, only their
// capacities changed: then the network's adjacency is kept and the capacities are set (the
// same state a rebuild gives: every arc at its capacity, no flow).
void CutNetwork::load_network(int nodes) {
  const bool same = nodes == loaded_nodes_ && arcs_.size() == loaded_arcs_.size() &&
                    std::equal(arcs_.begin(), arcs_.end(), loaded_arcs_.begin(),
                               [](const Arc& a, const Arc& b) { return a.from == b.from && a.to == b.to; });
  if (same) {
    for (std::size_t arc = 0; arc < arcs_.size(); ++arc)
      network_.set_capacity(2 * static_cast<int>(arc), arcs_[arc].capacity);
  } else {
    network_.reset(nodes);
    for (const Arc& arc : arcs_) network_.add_edge(arc.from, arc.to, arc.capacity);
    network_.finalize();
    loaded_nodes_ = nodes;
  }
  std::swap(arcs_, loaded_arcs_);
}

int CutNetwork::add_arc(int from, int to, double capacity, FlowKey kind, int index) {
  arc_keys_.push_back(kind == FlowKey::kDependency ? 5 * count_ + index : 5 * index + static_cast<int>(kind));
  arcs_.push_back({from, to, capacity});
  return 2 * (static_cast<int>(arcs_.size()) - 1);  // MaxFlow's id: arcs in order, each with its reverse
}

// Each arc gets its last flow, cut to its capacity; conservation is then restored by sending
// deficits on towards the sink (in topological order) and excesses back towards the source (in
// reverse), along arcs that carry flow. Any feasible start gives the same minimum cut: the
// source side is what the residual network of a maximum flow reaches.
void CutNetwork::warm_start() {
  if (saved_flow_.empty()) saved_flow_.assign(5 * static_cast<std::size_t>(count_) + dag_.edges.size(), 0.0);
  const int nodes = 2 + 2 * critical_count_;
  imbalance_.assign(nodes, 0.0);
  for (int arc = 0; arc < static_cast<int>(arc_keys_.size()); ++arc) {
    const int edge = 2 * arc;
    const double amount = std::min(saved_flow_[arc_keys_[arc]], network_.capacity(edge));
    if (amount <= 0) continue;
    network_.add_flow(edge, amount);
    imbalance_[network_.head(edge)] += amount;
    imbalance_[network_.tail(edge)] -= amount;
  }
  node_order_.clear();
  for (const int k : node_ops_) {
    node_order_.push_back(start_node(k));
    node_order_.push_back(end_node(k));
  }
  for (const int node : node_order_) {  // deficits: less flow out
    for (const int edge : network_.edges_at(node)) {
      if (imbalance_[node] >= 0) break;
      if ((edge & 1) != 0) continue;
      const double amount = std::min(network_.flow(edge), -imbalance_[node]);
      if (amount <= 0) continue;
      network_.add_flow(edge ^ 1, amount);
      imbalance_[node] += amount;
      imbalance_[network_.head(edge)] -= amount;
    }
  }
  for (auto node = node_order_.rbegin(); node != node_order_.rend(); ++node) {  // excesses: less flow in
    for (const int edge : network_.edges_at(*node)) {
      if (imbalance_[*node] <= 0) break;
      if ((edge & 1) == 0) continue;
      const double amount = std::min(network_.flow(edge ^ 1), imbalance_[*node]);
      if (amount <= 0) continue;
      network_.add_flow(edge, amount);
      imbalance_[*node] -= amount;
      imbalance_[network_.head(edge)] += amount;
    }
  }
}

void CutNetwork::save_flow() {
  for (const int key : saved_keys_) saved_flow_[key] = 0;
  saved_keys_ = arc_keys_;
  for (int arc = 0; arc < static_cast<int>(arc_keys_.size()); ++arc)
    saved_flow_[arc_keys_[arc]] = network_.flow(2 * arc);
}

// Seeds the flow with the two- and three-arc paths source -> end(u) -> start(v) -> sink
// through tight dependencies (and the source/sink arcs): most of the lower-bound flow travels
// them, so Dinic is left a few long paths instead of hundreds of short ones.
void CutNetwork::seed_flow() {
  for (const TightEdge& edge : tight_edges_) {
    if (lower_in_[edge.before] < 0 || lower_out_[edge.after] < 0) continue;
    const double amount =
        std::min(network_.capacity(lower_in_[edge.before]), network_.capacity(lower_out_[edge.after]));
    if (amount <= 0) continue;
    network_.add_flow(lower_in_[edge.before], amount);
    network_.add_flow(edge.arc, amount);
    network_.add_flow(lower_out_[edge.after], amount);
  }
  for (const auto& [arc, k] : terminal_arcs_) {
    const int lower_arc = network_.head(arc) == kSink ? lower_in_[k] : lower_out_[k];
    if (lower_arc < 0 || network_.capacity(lower_arc) <= 0) continue;
    const double amount = network_.capacity(lower_arc);
    network_.add_flow(arc, amount);
    network_.add_flow(lower_arc, amount);
  }
}

}  // namespace kareus::pipeline::detail
