#include "pipeline/max_flow.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace kareus::pipeline::detail {

void MaxFlow::reset(int nodes) {
  nodes_ = nodes;
  tail_.clear();
  head_.clear();
  added_capacity_.clear();
}

int MaxFlow::add_edge(int from, int to, double capacity) {
  assert(from >= 0 && from < nodes_ && to >= 0 && to < nodes_ && "MaxFlow::add_edge: node out of range");
  const int id = static_cast<int>(head_.size());
  tail_.push_back(from);
  head_.push_back(to);
  added_capacity_.push_back(capacity);
  tail_.push_back(to);
  head_.push_back(from);
  added_capacity_.push_back(0);
  return id;
}

void MaxFlow::finalize() {
  const int edges = static_cast<int>(head_.size());
  first_.assign(nodes_ + 1, 0);
  for (int edge = 0; edge < edges; ++edge) ++first_[tail_[edge] + 1];
  for (int node = 0; node < nodes_; ++node) first_[node + 1] += first_[node];
  edges_of_.resize(edges);
  fill_.assign(first_.begin(), first_.end() - 1);
  for (int edge = 0; edge < edges; ++edge) edges_of_[fill_[tail_[edge]]++] = edge;
  position_of_.resize(edges);
  for (int position = 0; position < edges; ++position) position_of_[edges_of_[position]] = position;
  head_of_.resize(edges);
  residual_.resize(edges);
  reverse_of_.resize(edges);
  for (int position = 0; position < edges; ++position) {
    const int edge = edges_of_[position];
    head_of_[position] = head_[edge];
    residual_[position] = added_capacity_[edge];
    reverse_of_[position] = position_of_[edge ^ 1];
  }
  level_.assign(nodes_, -1);
  cursor_.resize(nodes_);
  queue_.resize(nodes_);
}

// Breadth-first levels from `source` over the arcs `usable` accepts (by adjacency position;
// -1: unreached); stops once the sink's level is complete, as nodes at or beyond it cannot lie
// on a shortest path to it.
template <typename Usable>
bool MaxFlow::levels_from(int source, int sink, Usable usable) {
  std::fill(level_.begin(), level_.end(), -1);
  int read = 0;
  int write = 0;
  queue_[write++] = source;
  level_[source] = 0;
  while (read < write) {
    const int node = queue_[read++];
    if (level_[sink] >= 0 && level_[node] >= level_[sink]) break;
    for (int position = first_[node]; position < first_[node + 1]; ++position) {
      const int next = head_of_[position];
      if (level_[next] < 0 && usable(position)) {
        level_[next] = level_[node] + 1;
        queue_[write++] = next;
      }
    }
  }
  return level_[sink] >= 0;
}

bool MaxFlow::infinite_path(int source, int sink) {
  return levels_from(source, sink,
                     [&](int position) { return residual_[position] == std::numeric_limits<double>::infinity(); });
}

bool MaxFlow::build_levels(int source, int sink) {
  return levels_from(source, sink, [&](int position) { return residual_[position] > epsilon_; });
}

// Pushes up to `limit` from `node` towards the sink along the level graph, through as many
// arcs as it takes (one call sends a whole blocking flow's share, not one path).
double MaxFlow::push(int node, int sink, double limit) {
  if (node == sink) return limit;
  double sent = 0;
  for (int& position = cursor_[node]; position < first_[node + 1]; ++position) {
    const int next = head_of_[position];
    if (level_[next] != level_[node] + 1) continue;
    if (residual_[position] <= epsilon_) continue;
    const double pushed = push(next, sink, std::min(limit - sent, residual_[position]));
    if (pushed > 0) {
      residual_[position] -= pushed;
      residual_[reverse_of_[position]] += pushed;
      sent += pushed;
      if (limit - sent <= epsilon_) return sent;  // keep the cursor: this arc may have room left
    }
  }
  level_[node] = -2;  // dead end for the rest of this phase
  return sent;
}

double MaxFlow::run(int source, int sink, double epsilon) {
  epsilon_ = epsilon;
  double total = 0;
  const double infinity = std::numeric_limits<double>::infinity();
  while (build_levels(source, sink)) {
    std::copy(first_.begin(), first_.end() - 1, cursor_.begin());
    const double pushed = push(source, sink, infinity);
    assert(pushed < infinity && "MaxFlow::run: infinite source-sink path");
    total += pushed;
  }
  return total;
}

}  // namespace kareus::pipeline::detail
