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

// Latest finish times for durations `duration(op)` and a given makespan, in reverse
// topological order. `visit(op)` runs as soon as latest_finish[op] is set, before any
// predecessor reads duration(op), so it may change op's duration (slack reclamation does).
template <typename T, typename Duration, typename Visit>
void latest_finish_pass(const Topology& topology, std::vector<T>& latest_finish, T makespan, Duration duration,
                        Visit visit) {
  for (auto position = topology.order.rbegin(); position != topology.order.rend(); ++position) {
    const int op = *position;
    T latest = makespan;
    for (int index = topology.succ_first[op]; index < topology.succ_first[op + 1]; ++index) {
      const int succ = topology.succs[index];
      latest = std::min(latest, latest_finish[succ] - duration(succ));
    }
    latest_finish[op] = latest;
    visit(op);
  }
}

template <typename T, typename Duration>
void latest_finish_pass(const Topology& topology, std::vector<T>& latest_finish, T makespan, Duration duration) {
  latest_finish_pass(topology, latest_finish, makespan, duration, [](int) {});
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
void reclaim_slack_once(const PipelineDag& dag, const Topology& topology, std::vector<int>& option_indices,
                        std::vector<double>& start, std::vector<double>& latest_finish, bool representatives_only) {
  auto spec_of = [&](int op) -> const CandidateExecutionOptions& { return dag.specs[dag.operations[op].spec]; };
  auto time_s = [&](int op) { return spec_of(op).options()[option_indices[op]].time_s; };
  const double makespan = forward_pass<double>(topology, start, time_s);
  latest_finish_pass(topology, latest_finish, makespan, time_s, [&](int op) {
    const CandidateExecutionOptions& spec = spec_of(op);
    const double window = latest_finish[op] - start[op];
    const std::vector<ExecutionOption>& options = spec.options();
    int& chosen = option_indices[op];
    if (representatives_only) {
      const std::vector<int>& representatives = spec.representatives();
      for (auto next = std::upper_bound(representatives.begin(), representatives.end(), chosen);
           next != representatives.end() && options[*next].time_s <= window; ++next) {
        chosen = *next;
      }
    } else {
      while (chosen + 1 < static_cast<int>(options.size()) && options[chosen + 1].time_s <= window) ++chosen;
    }
  });
}

// The walk in reverse order is greedy: an operation late in the order may spend on a small
// step the float an earlier one needed for a large one. Over the representatives first, then,
// when some options are not representatives, over every option, so the finer options only
// ever add to what the coarse pass saved.
void reclaim_slack(const PipelineDag& dag, const Topology& topology, std::vector<int>& option_indices,
                   std::vector<double>& start, std::vector<double>& latest_finish, bool finer_options) {
  reclaim_slack_once(dag, topology, option_indices, start, latest_finish, true);
  if (finer_options) reclaim_slack_once(dag, topology, option_indices, start, latest_finish, false);
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

namespace {

// One run of the solver: the durations being planned, the critical sub-DAG's flow network in
// buffers reused every iteration, and the iterations recorded so far.
class Solver {
 public:
  Solver(const PipelineDag& dag, const PhillipsDessoukyOptions& options)
      : dag_(dag),
        options_(options),
        topology_(dag),
        count_(static_cast<int>(dag.operations.size())),
        gpus_(options.gpus > 0 ? options.gpus : dag.stages),
        compact_(count_, -1),
        duration_(count_),
        start_(count_),
        latest_finish_(count_),
        real_start_(count_),
        real_latest_finish_(count_),
        option_indices_(count_),
        finer_options_(std::any_of(dag.specs.begin(), dag.specs.end(), [](const CandidateExecutionOptions& spec) {
          return spec.representatives().size() < spec.options().size();
        })) {
    for (int op = 0; op < count_; ++op) duration_[op] = spec(op).max_quant_time();
  }

  PhillipsDessoukyResult run() {
    makespan_ = makespan_now();
    record_slowest();
    record(static_cast<int>(result_.iterations.size()), makespan_);
    for (int iteration = 1;; ++iteration) {
      if (options_.max_iterations > 0 && iteration > options_.max_iterations) {
        result_.stop_reason = StopReason::kIterationLimit;
        break;
      }
      mark_critical();
      build_network();
      // A source-sink path of infinite arcs is a critical path already at its fastest.
      if (network_.infinite_path(kSource, kSink)) {
        result_.stop_reason = StopReason::kMinimumTime;
        break;
      }
      seed_flow();
      network_.run(kSource, kSink, 1e-12 * std::max(1.0, max_capacity_));
      if (!apply_cut()) {
        result_.stop_reason = StopReason::kNoCut;
        break;
      }
      record(iteration, makespan_);
      if (options_.stop_on_zero_cost_change && std::abs(result_.iterations.back().effective_energy_change_j) < 1e-9) {
        result_.stop_reason = StopReason::kZeroCostChange;
        break;
      }
    }
    if (result_.stop_reason == StopReason::kMinimumTime) {
      repair_to_minimum_time();
      if (options_.reclaim_slack) walk_slower_from_frontier();
    }
    result_.frontier = pareto_frontier(result_.iterations);
    return std::move(result_);
  }

 private:
  // Activity-on-arc flow network of the critical sub-DAG, rebuilt in place every iteration:
  // critical operation k is the arc start(k) -> end(k) (nodes 2 + 2k, 3 + 2k); tight
  // dependencies are infinite arcs end(u) -> start(v); node 0 is the source, 1 the sink. A
  // lower bound l on an arc a -> b becomes capacity (upper - l) on the arc, a -> sink and
  // source -> b of capacity l, and a constant -l: the minimum cut then equals PD's (sum of
  // forward uppers - sum of backward lowers) in one max flow, negative cuts included, with
  // no separate feasibility phase.
  static constexpr int kSource = 0;
  static constexpr int kSink = 1;
  static int start_node(int k) { return 2 + 2 * k; }
  // Walking slower on real times, how many of the best predicted moves each step makes; how
  // many steps the walk from the minimum time takes at most, per operation; how many the walk
  // from each other frontier plan takes, and after how many in a row that keep no plan it stops.
  static constexpr std::size_t kTriedMoves = 4;
  static constexpr int kWalkStepsPerOperation = 4;
  static constexpr int kWalkStepsFromEachPlan = 8;
  static constexpr int kWalkPatience = 2;
  static int end_node(int k) { return 3 + 2 * k; }

  struct TightEdge {
    int arc, before, after;  // before/after as critical indices
  };

  const CandidateExecutionOptions& spec(int op) const { return dag_.specs[dag_.operations[op].spec]; }

  std::int64_t makespan_now() {
    return forward_pass<std::int64_t>(topology_, start_, [&](int op) { return duration_[op]; });
  }

  // Records the plan of the current durations; `realized` = true keeps option_indices_ as the
  // caller set them instead of deriving them from the durations. PD's own plans reclaim slack
  // over the representatives only: the finer pass costs a tenth of the solve on 8 x 64 and
  // the walks from the frontier plans, which make it, find what it would.
  void record(int iteration, std::int64_t quant_time, bool realized = false) {
    IterationResult point;
    point.iteration = iteration;
    point.quant_time = quant_time;
    for (int op = 0; op < count_; ++op) {
      point.effective_energy_j += spec(op).hull_cost(duration_[op]);
      if (!realized) option_indices_[op] = spec(op).option_index_for(duration_[op]);
    }
    point.effective_energy_change_j =
        result_.iterations.empty() ? 0.0 : point.effective_energy_j - result_.iterations.back().effective_energy_j;
    if (options_.reclaim_slack)
      reclaim_slack(dag_, topology_, option_indices_, real_start_, real_latest_finish_, finer_options_ && realized);
    const PlanEvaluation real = evaluate(dag_, topology_, option_indices_, gpus_, real_start_);
    point.time_s = real.time_s;
    point.energy_j = real.energy_j;
    point.option_indices = option_indices_;
    result_.iterations.push_back(std::move(point));
    if (options_.progress) options_.progress(result_.iterations.back());
  }

  // Every operation at its slowest (cheapest) option, when that is not the first planned
  // point already: a representative is the fastest of its quantized time, so with a unit
  // coarser than the gaps between options the planned slow end is not the cheapest plan.
  void record_slowest() {
    bool differs = false;
    for (int op = 0; op < count_; ++op) {
      option_indices_[op] = static_cast<int>(spec(op).options().size()) - 1;
      differs |= option_indices_[op] != spec(op).option_index_for(duration_[op]);
    }
    if (differs) record(0, makespan_, true);
  }

  // Latest finish times at the current makespan; an operation is critical when it has no float.
  void mark_critical() {
    latest_finish_pass<std::int64_t>(topology_, latest_finish_, makespan_, [&](int op) { return duration_[op]; });
    critical_ops_.clear();
    for (int op = 0; op < count_; ++op) {
      compact_[op] = start_[op] + duration_[op] == latest_finish_[op] ? static_cast<int>(critical_ops_.size()) : -1;
      if (compact_[op] >= 0) critical_ops_.push_back(op);
    }
  }

  void build_network() {
    const int critical_count = static_cast<int>(critical_ops_.size());
    network_.reset(2 + 2 * critical_count);
    lower_in_.assign(critical_count, -1);
    lower_out_.assign(critical_count, -1);
    max_capacity_ = 0;
    for (int k = 0; k < critical_count; ++k) {
      const int op = critical_ops_[k];
      const CandidateExecutionOptions& options = spec(op);
      const double here = options.hull_cost(duration_[op]);
      double upper = duration_[op] > options.min_quant_time() ? options.hull_cost(duration_[op] - 1) - here : kInfinity;
      const double lower =
          duration_[op] < options.max_quant_time() ? std::max(0.0, here - options.hull_cost(duration_[op] + 1)) : 0.0;
      // Convexity guarantees lower <= upper; clamp rounding noise.
      if (upper < lower) upper = lower;
      if (upper < kInfinity) max_capacity_ = std::max(max_capacity_, upper);
      network_.add_edge(start_node(k), end_node(k), upper - lower);
      if (lower > 0) {
        lower_out_[k] = network_.add_edge(start_node(k), kSink, lower);
        lower_in_[k] = network_.add_edge(kSource, end_node(k), lower);
      }
    }
    tight_edges_.clear();
    for (const auto& [before, after] : dag_.edges) {
      if (start_[before] + duration_[before] != latest_finish_[after] - duration_[after]) continue;
      // A dependency without float joins two operations without float.
      assert(compact_[before] >= 0 && compact_[after] >= 0 && "tight dependency between non-critical operations");
      const int arc = network_.add_edge(end_node(compact_[before]), start_node(compact_[after]), kInfinity);
      tight_edges_.push_back({arc, compact_[before], compact_[after]});
    }
    terminal_arcs_.clear();
    for (int k = 0; k < critical_count; ++k) {
      const int op = critical_ops_[k];
      if (topology_.pred_first[op] == topology_.pred_first[op + 1] && latest_finish_[op] - duration_[op] == 0) {
        terminal_arcs_.emplace_back(network_.add_edge(kSource, start_node(k), kInfinity), k);
      }
      if (topology_.succ_first[op] == topology_.succ_first[op + 1] && start_[op] + duration_[op] == makespan_) {
        terminal_arcs_.emplace_back(network_.add_edge(end_node(k), kSink, kInfinity), k);
      }
    }
    network_.finalize();
  }

  // Seeds the flow with the two- and three-arc paths source -> end(u) -> start(v) -> sink
  // through tight dependencies (and the source/sink arcs): most of the lower-bound flow
  // travels them, so Dinic is left a few long paths instead of hundreds of short ones.
  void seed_flow() {
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

  // Forward-cut operations (start on the source side, end on the sink side) get one unit
  // faster; backward-cut ones one unit slower where they can. Returns false, durations
  // unchanged, when the cut does not shorten the makespan.
  bool apply_cut() {
    shortened_.clear();
    lengthened_.clear();
    for (int k = 0; k < static_cast<int>(critical_ops_.size()); ++k) {
      const int op = critical_ops_[k];
      const bool start_side = network_.source_side(start_node(k));
      const bool end_side = network_.source_side(end_node(k));
      if (start_side && !end_side) {
        shortened_.push_back(op);
      } else if (!start_side && end_side && duration_[op] < spec(op).max_quant_time()) {
        lengthened_.push_back(op);
      }
    }
    for (const int op : shortened_) --duration_[op];
    for (const int op : lengthened_) ++duration_[op];
    std::int64_t next_makespan = makespan_now();
    if (next_makespan >= makespan_ && !lengthened_.empty()) {
      // A lengthened operation also sat on a path that was not critical; keep the shortening only.
      for (const int op : lengthened_) --duration_[op];
      ++result_.reverted_iterations;
      next_makespan = makespan_now();
    }
    if (next_makespan >= makespan_ || shortened_.empty()) {
      for (const int op : shortened_) ++duration_[op];
      makespan_ = makespan_now();
      return false;
    }
    makespan_ = next_makespan;
    return true;
  }

  // Off-critical operations may run options whose real times exceed their quantized ones,
  // so the last PD plan need not reach the true minimum makespan (every operation at its
  // fastest option). Repair it greedily on real times: while the real makespan is above
  // that minimum, move the operation on a real critical path with the least effective
  // energy per second saved one representative faster (the finer options are left to slack
  // reclamation, which then spends the float on them); then reclaim slack. Each round lowers
  // one option index, so this ends, at worst at all-fastest.
  void repair_to_minimum_time() {
    std::vector<int> fastest(count_, 0);
    const double minimum_s = evaluate(dag_, topology_, fastest, gpus_, real_start_).time_s;
    for (int op = 0; op < count_; ++op) option_indices_[op] = spec(op).option_index_for(duration_[op]);
    auto real_time = [&](int op) { return spec(op).options()[option_indices_[op]].time_s; };
    while (true) {
      const double now_s = forward_pass<double>(topology_, real_start_, real_time);
      if (now_s <= minimum_s * (1 + 1e-12)) break;
      const int best = cheapest_speedup_on_critical_path(now_s, real_time);
      if (best < 0) {
        std::fill(option_indices_.begin(), option_indices_.end(), 0);
        break;
      }
      option_indices_[best] = spec(best).faster_representative(option_indices_[best]);
    }
    for (int op = 0; op < count_; ++op) duration_[op] = spec(op).options()[option_indices_[op]].quant_time;
    if (option_indices_ != result_.iterations.back().option_indices) {
      record(static_cast<int>(result_.iterations.size()), makespan_now(), true);
    }
  }

  // Walks on real times, slower one option at a time, from the minimum-time plan and from
  // every plan on the frontier so far. PD plans on quantized durations; each option's real
  // time exceeds its quantized one by up to a unit, so near the fast end, where most
  // operations are critical, the real makespans of the last PD plans run several units above
  // their planned ones and above the repaired minimum-time plan, which is often cheaper than
  // they are: without the walk the frontier jumps from the minimum time to the first PD plan
  // that is cheaper, skipping every time in between. Elsewhere PD's plans are the hull's, and
  // a few real-time steps from each find the options between its quantized ones.
  void walk_slower_from_frontier() {
    std::vector<std::vector<int>> seeds;  // copies: walking records plans, which may move them
    for (const int index : pareto_frontier(result_.iterations)) {
      frontier_.emplace_back(result_.iterations[index].time_s, result_.iterations[index].energy_j);
      seeds.push_back(result_.iterations[index].option_indices);
    }
    const int min_time_steps = kWalkStepsPerOperation * count_;
    walk_slower(result_.iterations.back().option_indices, min_time_steps, min_time_steps);
    for (const std::vector<int>& seed : seeds) walk_slower(seed, kWalkStepsFromEachPlan, kWalkPatience);
  }

  // True when a plan found so far is at least as fast and as cheap.
  bool dominated(double time_s, double energy_j) const {
    const auto after =
        std::upper_bound(frontier_.begin(), frontier_.end(), time_s * (1 + 1e-12),
                         [](double time, const std::pair<double, double>& point) { return time < point.first; });
    return after != frontier_.begin() && std::prev(after)->second <= energy_j * (1 + 1e-12);
  }

  // Reclaims the slack of the plan in option_indices_ and records it when it is not
  // dominated; returns its evaluation.
  PlanEvaluation keep_if_new() {
    reclaim_slack(dag_, topology_, option_indices_, real_start_, real_latest_finish_, finer_options_);
    const PlanEvaluation real = evaluate(dag_, topology_, option_indices_, gpus_, real_start_);
    if (dominated(real.time_s, real.energy_j)) return real;
    for (int op = 0; op < count_; ++op) duration_[op] = spec(op).options()[option_indices_[op]].quant_time;
    record(static_cast<int>(result_.iterations.size()), makespan_now(), true);
    const IterationResult& kept = result_.iterations.back();
    auto position = std::upper_bound(frontier_.begin(), frontier_.end(), std::make_pair(kept.time_s, kept.energy_j));
    position = std::next(frontier_.insert(position, {kept.time_s, kept.energy_j}));
    auto last = position;
    while (last != frontier_.end() && last->second >= kept.energy_j) ++last;
    frontier_.erase(position, last);
    return real;
  }

  // From `seed`, moves one operation one option slower at a time. The moves are ranked by
  // energy saved (effective energy plus static power x makespan x GPUs) per second of
  // makespan added, which one forward and one backward pass give exactly for every operation
  // (lengthening one by d adds max(0, d - its total float)); the best kTriedMoves are made,
  // their slack reclaimed and their plans kept when new, and the walk goes on from the one
  // with the best real rate. Ends when no move saves energy, after `max_steps` steps, or after
  // `patience` steps in a row that kept no plan.
  void walk_slower(const std::vector<int>& seed, int max_steps, int patience) {
    struct Move {
      double rate;  // predicted energy saved per second added, before slack reclamation
      int op;
    };
    std::vector<Move> moves;
    option_indices_ = seed;
    auto real_time = [&](int op) { return spec(op).options()[option_indices_[op]].time_s; };
    for (int step = 0, fruitless = 0; step < max_steps && fruitless < patience; ++step) {
      const std::size_t recorded = result_.iterations.size();
      const PlanEvaluation now_plan = evaluate(dag_, topology_, option_indices_, gpus_, real_start_);
      const double now_s = now_plan.time_s;
      latest_finish_pass(topology_, real_latest_finish_, now_s, real_time);
      moves.clear();
      for (int op = 0; op < count_; ++op) {
        const std::vector<ExecutionOption>& options = spec(op).options();
        if (option_indices_[op] + 1 >= static_cast<int>(options.size())) continue;
        const ExecutionOption& now = options[option_indices_[op]];
        const ExecutionOption& slower = options[option_indices_[op] + 1];
        const double total_float = real_latest_finish_[op] - (real_start_[op] + now.time_s);
        const double added_s = std::max(0.0, slower.time_s - now.time_s - total_float);
        const double saved_j =
            now.effective_energy_j - slower.effective_energy_j - dag_.static_power_w * gpus_ * added_s;
        if (saved_j <= 0) continue;
        moves.push_back({saved_j / std::max(added_s, 1e-15), op});
      }
      if (moves.empty()) break;
      const std::size_t tried = std::min<std::size_t>(moves.size(), kTriedMoves);
      std::partial_sort(
          moves.begin(), moves.begin() + static_cast<std::ptrdiff_t>(tried), moves.end(),
          [](const Move& a, const Move& b) { return a.rate > b.rate || (a.rate == b.rate && a.op < b.op); });
      const std::vector<int> walked = option_indices_;
      std::vector<int> next;
      double next_rate = -kInfinity;
      for (std::size_t index = 0; index < tried; ++index) {
        option_indices_ = walked;
        ++option_indices_[moves[index].op];
        const PlanEvaluation real = keep_if_new();
        const double saved_j = now_plan.energy_j - real.energy_j;
        const double rate = saved_j / std::max(real.time_s - now_s, 1e-15);
        if (saved_j > 0 && rate > next_rate) {
          next_rate = rate;
          next = option_indices_;
        }
      }
      if (next.empty()) break;
      option_indices_ = std::move(next);
      fruitless = result_.iterations.size() > recorded ? 0 : fruitless + 1;
    }
  }

  // The operation on a real critical path (real_start_ from the last forward pass, makespan
  // now_s) whose next faster option costs the least effective energy per second saved; -1
  // when every critical operation already runs its fastest option.
  template <typename RealTime>
  int cheapest_speedup_on_critical_path(double now_s, RealTime real_time) {
    const double tolerance = 1e-12 * now_s;
    latest_finish_pass(topology_, real_latest_finish_, now_s, real_time);
    int best = -1;
    double best_rate = kInfinity;
    for (int op = 0; op < count_; ++op) {
      if (option_indices_[op] == 0 || real_start_[op] + real_time(op) < real_latest_finish_[op] - tolerance) continue;
      const std::vector<ExecutionOption>& options = spec(op).options();
      const ExecutionOption& now = options[option_indices_[op]];
      const ExecutionOption& faster = options[spec(op).faster_representative(option_indices_[op])];
      const double rate =
          (faster.effective_energy_j - now.effective_energy_j) / std::max(now.time_s - faster.time_s, 1e-15);
      if (rate < best_rate) {
        best_rate = rate;
        best = op;
      }
    }
    return best;
  }

  const PipelineDag& dag_;
  const PhillipsDessoukyOptions& options_;
  const Topology topology_;
  const int count_;
  const int gpus_;

  detail::MaxFlow network_;
  std::vector<int> compact_;               // operation -> critical index k, or -1
  std::vector<int> critical_ops_;          // k -> operation
  std::vector<int> lower_in_, lower_out_;  // k -> arc, or -1 when l = 0
  std::vector<TightEdge> tight_edges_;
  std::vector<std::pair<int, int>> terminal_arcs_;  // (arc, k): source -> start(k) or end(k) -> sink
  double max_capacity_ = 0;

  std::vector<std::int64_t> duration_, start_, latest_finish_;  // planned, in unit_time_s
  std::int64_t makespan_ = 0;
  std::vector<double> real_start_, real_latest_finish_;  // of the realized plan, seconds
  std::vector<int> option_indices_;
  const bool finer_options_;  // some options lie between representatives (a unit coarser than their gaps)
  std::vector<int> shortened_, lengthened_;
  std::vector<std::pair<double, double>> frontier_;  // (time_s, energy_j) of the walks: time up, energy down

  PhillipsDessoukyResult result_;
};

}  // namespace

PhillipsDessouky::PhillipsDessouky(const PipelineDag& dag, PhillipsDessoukyOptions options)
    : dag_(dag), options_(std::move(options)) {
  if (options_.gpus < 0) throw InputError(fmt::format("phillips-dessouky: gpus must be >= 0, found {}", options_.gpus));
  if (options_.max_iterations < 0) {
    throw InputError(fmt::format("phillips-dessouky: max_iterations must be >= 0, found {}", options_.max_iterations));
  }
}

PhillipsDessoukyResult PhillipsDessouky::run() const { return Solver(dag_, options_).run(); }

}  // namespace kareus::pipeline
