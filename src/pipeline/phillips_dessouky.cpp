#include "kareus/pipeline/phillips_dessouky.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "pipeline/max_flow.h"

namespace kareus::pipeline {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Predecessors and successors in compressed form plus a topological order, built once.
struct Topology {
  std::vector<int> order;
  std::vector<int> pred_first, preds;
  std::vector<int> succ_first, succs;

  explicit Topology(const PipelineDag& dag) {
    const int count = static_cast<int>(dag.operations.size());
    pred_first.assign(count + 1, 0);
    succ_first.assign(count + 1, 0);
    for (const auto& [before, after] : dag.edges) {
      ++succ_first[before + 1];
      ++pred_first[after + 1];
    }
    for (int op = 0; op < count; ++op) {
      succ_first[op + 1] += succ_first[op];
      pred_first[op + 1] += pred_first[op];
    }
    preds.resize(dag.edges.size());
    succs.resize(dag.edges.size());
    std::vector<int> succ_fill(succ_first.begin(), succ_first.end() - 1);
    std::vector<int> pred_fill(pred_first.begin(), pred_first.end() - 1);
    for (const auto& [before, after] : dag.edges) {
      succs[succ_fill[before]++] = after;
      preds[pred_fill[after]++] = before;
    }
    // Kahn's algorithm.
    std::vector<int> waiting(count);
    for (int op = 0; op < count; ++op) {
      waiting[op] = pred_first[op + 1] - pred_first[op];
      if (waiting[op] == 0) order.push_back(op);
    }
    for (std::size_t read = 0; read < order.size(); ++read) {
      const int op = order[read];
      for (int position = succ_first[op]; position < succ_first[op + 1]; ++position) {
        if (--waiting[succs[position]] == 0) order.push_back(succs[position]);
      }
    }
    if (order.size() != dag.operations.size()) throw Error("pipeline dag has a cycle");
  }
};

// Longest path with durations given by `duration(op)`; fills `start` and returns the makespan.
template <typename T, typename Duration>
T forward_pass(const Topology& topology, std::vector<T>& start, Duration duration) {
  T makespan = 0;
  for (const int op : topology.order) {
    T earliest = 0;
    for (int position = topology.pred_first[op]; position < topology.pred_first[op + 1]; ++position) {
      const int pred = topology.preds[position];
      earliest = std::max(earliest, start[pred] + duration(pred));
    }
    start[op] = earliest;
    makespan = std::max(makespan, earliest + duration(op));
  }
  return makespan;
}

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

// Slack reclamation at a fixed real makespan: walking the operations in reverse topological
// order, each one takes the cheapest option that still finishes by the latest start of its
// successors, starting no earlier than its predecessors allow. One O(V+E) pass; the makespan
// never grows and no operation gets costlier, since its current option always fits.
void reclaim_slack(const PipelineDag& dag, const Topology& topology, std::vector<int>& option_indices,
                   std::vector<double>& start, std::vector<double>& latest_start) {
  auto options_of = [&](int op) -> const std::vector<ExecutionOption>& {
    return dag.specs[dag.operations[op].spec].options();
  };
  const double makespan =
      forward_pass<double>(topology, start, [&](int op) { return options_of(op)[option_indices[op]].time_s; });
  for (auto position = topology.order.rbegin(); position != topology.order.rend(); ++position) {
    const int op = *position;
    double latest_finish = makespan;
    for (int index = topology.succ_first[op]; index < topology.succ_first[op + 1]; ++index) {
      latest_finish = std::min(latest_finish, latest_start[topology.succs[index]]);
    }
    const std::vector<ExecutionOption>& options = options_of(op);
    const double window = latest_finish - start[op];
    int chosen = option_indices[op];
    while (chosen + 1 < static_cast<int>(options.size()) && options[chosen + 1].time_s <= window) ++chosen;
    option_indices[op] = chosen;
    latest_start[op] = latest_finish - options[chosen].time_s;
  }
}

}  // namespace

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kMinimumTime:
      return "minimum time reached";
    case StopReason::kNoCut:
      return "no cut shortens the makespan";
    case StopReason::kZeroCostChange:
      return "zero cost change";
    case StopReason::kIterationLimit:
      return "iteration limit";
  }
  return "unknown";
}

PlanEvaluation evaluate_plan(const PipelineDag& dag, std::span<const int> option_indices, int gpus) {
  assert(option_indices.size() == dag.operations.size() && "evaluate_plan: one option per operation");
  const Topology topology(dag);
  std::vector<double> start(dag.operations.size());
  return evaluate(dag, topology, option_indices, gpus, start);
}

std::vector<int> pareto_frontier(const std::vector<IterationResult>& iterations) {
  std::vector<int> order(iterations.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (iterations[a].time_s != iterations[b].time_s) return iterations[a].time_s < iterations[b].time_s;
    return iterations[a].energy_j < iterations[b].energy_j;
  });
  std::vector<int> frontier;
  for (const int index : order) {
    if (frontier.empty() || iterations[index].energy_j < iterations[frontier.back()].energy_j)
      frontier.push_back(index);
  }
  return frontier;
}

std::vector<BoundPoint> relaxation_lower_bound(const PipelineDag& cheapest_dag, int gpus) {
  const int paying = gpus > 0 ? gpus : cheapest_dag.stages;
  PhillipsDessoukyOptions options;
  options.reclaim_slack = false;
  options.gpus = paying;
  const PhillipsDessoukyResult result = PhillipsDessouky(cheapest_dag, options).run();
  // Planned points in decreasing quantized makespan (the optional all-fastest extra is a
  // realization, not a planned point: skip entries whose quant_time does not decrease).
  std::vector<std::pair<std::int64_t, double>> planned;
  for (const IterationResult& iteration : result.iterations) {
    if (planned.empty() || iteration.quant_time < planned.back().first) {
      planned.emplace_back(iteration.quant_time, iteration.effective_energy_j);
    }
  }
  std::vector<BoundPoint> bound;
  if (result.stop_reason != StopReason::kMinimumTime) return bound;  // no certificate below the last point
  // relaxed(q) for a q between two planned points is at least the cost at the slower one.
  std::size_t slower = 0;
  for (std::int64_t quant = planned.front().first; quant >= planned.back().first; --quant) {
    while (slower + 1 < planned.size() && planned[slower + 1].first >= quant) ++slower;
    const double time_s = static_cast<double>(quant) * cheapest_dag.unit_time_s;
    bound.push_back({time_s, planned[slower].second + cheapest_dag.static_power_w * time_s * paying});
  }
  std::reverse(bound.begin(), bound.end());
  return bound;
}

double lower_bound_at(const std::vector<BoundPoint>& bound, double time_s) {
  double least = kInfinity;
  for (const BoundPoint& point : bound) {
    // quantize_time nudges by 1e-9, so a bound point may sit that far past a real time.
    if (point.time_s <= time_s * (1 + 1e-8)) least = std::min(least, point.energy_j);
  }
  return least;
}

PhillipsDessouky::PhillipsDessouky(const PipelineDag& dag, PhillipsDessoukyOptions options)
    : dag_(dag), options_(std::move(options)) {
  if (options_.gpus < 0) throw InputError(fmt::format("phillips-dessouky: gpus must be >= 0, found {}", options_.gpus));
  if (options_.max_iterations < 0) {
    throw InputError(fmt::format("phillips-dessouky: max_iterations must be >= 0, found {}", options_.max_iterations));
  }
}

PhillipsDessoukyResult PhillipsDessouky::run() const {
  const PipelineDag& dag = dag_;
  const Topology topology(dag);
  const int count = static_cast<int>(dag.operations.size());
  const int gpus = options_.gpus > 0 ? options_.gpus : dag.stages;
  auto spec = [&](int op) -> const CandidateExecutionOptions& { return dag.specs[dag.operations[op].spec]; };

  // Activity-on-arc flow network of the critical sub-DAG, rebuilt in place every iteration:
  // critical operation k is the arc start(k) -> end(k) (nodes 2 + 2k, 3 + 2k); tight
  // dependencies are infinite arcs end(u) -> start(v); node 0 is the source, 1 the sink. A
  // lower bound l on an arc a -> b becomes capacity (upper - l) on the arc, a -> sink and
  // source -> b of capacity l, and a constant -l: the minimum cut then equals PD's (sum of
  // forward uppers - sum of backward lowers) in one max flow, negative cuts included, with
  // no separate feasibility phase.
  constexpr int source = 0;
  constexpr int sink = 1;
  detail::MaxFlow network;
  std::vector<int> compact(count, -1);   // operation -> critical index k, or -1
  std::vector<int> critical_ops;         // k -> operation
  std::vector<int> lower_in, lower_out;  // k -> arc, or -1 when l = 0
  struct TightEdge {
    int arc, before, after;  // before/after as critical indices
  };
  std::vector<TightEdge> tight_edges;
  std::vector<std::pair<int, int>> terminal_arcs;  // (arc, k): source -> start(k) or end(k) -> sink

  std::vector<std::int64_t> duration(count), start(count), latest_finish(count);
  for (int op = 0; op < count; ++op) duration[op] = spec(op).max_quant_time();
  std::vector<double> real_start(count), real_latest_start(count);
  std::vector<int> option_indices(count);

  PhillipsDessoukyResult result;
  // Records the plan of the current durations; `realized` = true keeps option_indices as the
  // caller set them instead of deriving them from the durations.
  auto record = [&](int iteration, std::int64_t quant_time, bool realized = false) {
    IterationResult point;
    point.iteration = iteration;
    point.quant_time = quant_time;
    for (int op = 0; op < count; ++op) {
      point.effective_energy_j += spec(op).hull_cost(duration[op]);
      if (!realized) option_indices[op] = spec(op).option_index_for(duration[op]);
    }
    point.effective_energy_change_j =
        result.iterations.empty() ? 0.0 : point.effective_energy_j - result.iterations.back().effective_energy_j;
    if (options_.reclaim_slack) reclaim_slack(dag, topology, option_indices, real_start, real_latest_start);
    const PlanEvaluation real = evaluate(dag, topology, option_indices, gpus, real_start);
    point.time_s = real.time_s;
    point.energy_j = real.energy_j;
    point.option_indices = option_indices;
    result.iterations.push_back(std::move(point));
    if (options_.progress) options_.progress(result.iterations.back());
  };
  auto makespan_now = [&] { return forward_pass<std::int64_t>(topology, start, [&](int op) { return duration[op]; }); };

  std::int64_t makespan = makespan_now();
  record(0, makespan);
  std::vector<int> shortened, lengthened;
  for (int iteration = 1;; ++iteration) {
    if (options_.max_iterations > 0 && iteration > options_.max_iterations) {
      result.stop_reason = StopReason::kIterationLimit;
      break;
    }
    // Latest finish times; an operation is critical when it has no float.
    for (auto position = topology.order.rbegin(); position != topology.order.rend(); ++position) {
      const int op = *position;
      std::int64_t latest = makespan;
      for (int index = topology.succ_first[op]; index < topology.succ_first[op + 1]; ++index) {
        const int succ = topology.succs[index];
        latest = std::min(latest, latest_finish[succ] - duration[succ]);
      }
      latest_finish[op] = latest;
    }
    auto critical = [&](int op) { return start[op] + duration[op] == latest_finish[op]; };
    critical_ops.clear();
    for (int op = 0; op < count; ++op) {
      compact[op] = critical(op) ? static_cast<int>(critical_ops.size()) : -1;
      if (compact[op] >= 0) critical_ops.push_back(op);
    }
    const int critical_count = static_cast<int>(critical_ops.size());
    network.reset(2 + 2 * critical_count);
    lower_in.assign(critical_count, -1);
    lower_out.assign(critical_count, -1);
    double max_capacity = 0;
    for (int k = 0; k < critical_count; ++k) {
      const int op = critical_ops[k];
      const CandidateExecutionOptions& options = spec(op);
      const double here = options.hull_cost(duration[op]);
      double upper = duration[op] > options.min_quant_time() ? options.hull_cost(duration[op] - 1) - here : kInfinity;
      const double lower =
          duration[op] < options.max_quant_time() ? std::max(0.0, here - options.hull_cost(duration[op] + 1)) : 0.0;
      // Convexity guarantees lower <= upper; clamp rounding noise.
      if (upper < lower) upper = lower;
      if (upper < kInfinity) max_capacity = std::max(max_capacity, upper);
      network.add_edge(2 + 2 * k, 3 + 2 * k, upper - lower);
      if (lower > 0) {
        lower_out[k] = network.add_edge(2 + 2 * k, sink, lower);
        lower_in[k] = network.add_edge(source, 3 + 2 * k, lower);
      }
    }
    tight_edges.clear();
    for (const auto& [before, after] : dag.edges) {
      if (start[before] + duration[before] != latest_finish[after] - duration[after]) continue;
      // A dependency without float joins two operations without float.
      assert(compact[before] >= 0 && compact[after] >= 0 && "tight dependency between non-critical operations");
      const int arc = network.add_edge(3 + 2 * compact[before], 2 + 2 * compact[after], kInfinity);
      tight_edges.push_back({arc, compact[before], compact[after]});
    }
    terminal_arcs.clear();
    for (int k = 0; k < critical_count; ++k) {
      const int op = critical_ops[k];
      if (topology.pred_first[op] == topology.pred_first[op + 1] && latest_finish[op] - duration[op] == 0) {
        terminal_arcs.emplace_back(network.add_edge(source, 2 + 2 * k, kInfinity), k);
      }
      if (topology.succ_first[op] == topology.succ_first[op + 1] && start[op] + duration[op] == makespan) {
        terminal_arcs.emplace_back(network.add_edge(3 + 2 * k, sink, kInfinity), k);
      }
    }
    network.finalize();
    // A source-sink path of infinite arcs is a critical path already at its fastest.
    if (network.infinite_path(source, sink)) {
      result.stop_reason = StopReason::kMinimumTime;
      break;
    }
    // Seed the flow with the two- and three-arc paths source -> end(u) -> start(v) -> sink
    // through tight dependencies (and the source/sink arcs): most of the lower-bound flow
    // travels them, so Dinic is left a few long paths instead of hundreds of short ones.
    for (const TightEdge& edge : tight_edges) {
      if (lower_in[edge.before] < 0 || lower_out[edge.after] < 0) continue;
      const double amount = std::min(network.capacity(lower_in[edge.before]), network.capacity(lower_out[edge.after]));
      if (amount <= 0) continue;
      network.add_flow(lower_in[edge.before], amount);
      network.add_flow(edge.arc, amount);
      network.add_flow(lower_out[edge.after], amount);
    }
    for (const auto& [arc, k] : terminal_arcs) {
      const int lower_arc = network.head(arc) == sink ? lower_in[k] : lower_out[k];
      if (lower_arc < 0 || network.capacity(lower_arc) <= 0) continue;
      const double amount = network.capacity(lower_arc);
      network.add_flow(arc, amount);
      network.add_flow(lower_arc, amount);
    }
    network.run(source, sink, 1e-12 * std::max(1.0, max_capacity));
    // Forward-cut operations (start on the source side, end on the sink side) get one unit
    // faster; backward-cut ones one unit slower where they can.
    shortened.clear();
    lengthened.clear();
    for (int k = 0; k < critical_count; ++k) {
      const int op = critical_ops[k];
      const bool start_side = network.source_side(2 + 2 * k);
      const bool end_side = network.source_side(3 + 2 * k);
      if (start_side && !end_side) {
        shortened.push_back(op);
      } else if (!start_side && end_side && duration[op] < spec(op).max_quant_time()) {
        lengthened.push_back(op);
      }
    }
    for (const int op : shortened) --duration[op];
    for (const int op : lengthened) ++duration[op];
    std::int64_t next_makespan = makespan_now();
    if (next_makespan >= makespan && !lengthened.empty()) {
      // A lengthened operation also sat on a path that was not critical; keep the shortening only.
      for (const int op : lengthened) --duration[op];
      ++result.reverted_iterations;
      next_makespan = makespan_now();
    }
    if (next_makespan >= makespan || shortened.empty()) {
      for (const int op : shortened) ++duration[op];
      makespan = makespan_now();
      result.stop_reason = StopReason::kNoCut;
      break;
    }
    makespan = next_makespan;
    record(iteration, makespan);
    if (options_.stop_on_zero_cost_change && std::abs(result.iterations.back().effective_energy_change_j) < 1e-9) {
      result.stop_reason = StopReason::kZeroCostChange;
      break;
    }
  }
  if (result.stop_reason == StopReason::kMinimumTime) {
    // Off-critical operations may run options whose real times exceed their quantized ones,
    // so the last PD plan need not reach the true minimum makespan (every operation at its
    // fastest option). Repair it greedily on real times: while the real makespan is above
    // that minimum, move the operation on a real critical path with the least effective
    // energy per second saved one option faster; then reclaim slack. Each round lowers one
    // option index, so this ends, at worst at all-fastest.
    std::vector<int> fastest(count, 0);
    const double minimum_s = evaluate(dag, topology, fastest, gpus, real_start).time_s;
    for (int op = 0; op < count; ++op) option_indices[op] = spec(op).option_index_for(duration[op]);
    auto real_time = [&](int op) { return spec(op).options()[option_indices[op]].time_s; };
    std::vector<double> real_finish(count);
    while (true) {
      const double now_s = forward_pass<double>(topology, real_start, real_time);
      if (now_s <= minimum_s * (1 + 1e-12)) break;
      const double tolerance = 1e-12 * now_s;
      for (auto position = topology.order.rbegin(); position != topology.order.rend(); ++position) {
        const int op = *position;
        double latest = now_s;
        for (int index = topology.succ_first[op]; index < topology.succ_first[op + 1]; ++index) {
          const int succ = topology.succs[index];
          latest = std::min(latest, real_finish[succ] - real_time(succ));
        }
        real_finish[op] = latest;
      }
      int best = -1;
      double best_rate = kInfinity;
      for (int op = 0; op < count; ++op) {
        if (option_indices[op] == 0 || real_start[op] + real_time(op) < real_finish[op] - tolerance) continue;
        const std::vector<ExecutionOption>& options = spec(op).options();
        const ExecutionOption& now = options[option_indices[op]];
        const ExecutionOption& faster = options[option_indices[op] - 1];
        const double rate =
            (faster.effective_energy_j - now.effective_energy_j) / std::max(now.time_s - faster.time_s, 1e-15);
        if (rate < best_rate) {
          best_rate = rate;
          best = op;
        }
      }
      if (best < 0) {
        std::fill(option_indices.begin(), option_indices.end(), 0);
        break;
      }
      --option_indices[best];
    }
    for (int op = 0; op < count; ++op) duration[op] = spec(op).options()[option_indices[op]].quant_time;
    bool same = true;
    for (int op = 0; op < count; ++op) same = same && option_indices[op] == result.iterations.back().option_indices[op];
    if (!same) record(static_cast<int>(result.iterations.size()), makespan_now(), true);
  }
  result.frontier = pareto_frontier(result.iterations);
  return result;
}

}  // namespace kareus::pipeline
