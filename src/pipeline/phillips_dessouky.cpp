#include "kareus/pipeline/phillips_dessouky.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "pipeline/dag_timing.h"
#include "pipeline/max_flow.h"
#include "pipeline/plan_retimer.h"

namespace kareus::pipeline {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

using detail::forward_pass;
using detail::latest_finish_pass;
using detail::Topology;

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
    option_indices[op] =
        detail::slowest_within(spec_of(op), option_indices[op], latest_finish[op] - start[op], representatives_only);
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

int PlanHistory::add(std::span<const int> options) {
  const int id = size();
  if (id % kCheckpointEvery == 0) {
    checkpoints_.emplace_back(options.begin(), options.end());
  } else {
    for (int op = 0; op < static_cast<int>(options.size()); ++op) {
      if (options[op] != last_[op]) changes_.emplace_back(op, options[op]);
    }
  }
  changes_end_.push_back(changes_.size());
  last_.assign(options.begin(), options.end());
  return id;
}

std::vector<int> PlanHistory::at(int id) const {
  assert(id >= 0 && id < size() && "PlanHistory::at: no such plan");
  std::vector<int> options = checkpoints_[id / kCheckpointEvery];
  const int first = id - id % kCheckpointEvery;
  for (std::size_t change = changes_end_[first]; change < changes_end_[id]; ++change) {
    options[changes_[change].first] = changes_[change].second;
  }
  return options;
}

std::size_t PlanHistory::stored_options() const {
  std::size_t stored = changes_.size();
  for (const std::vector<int>& checkpoint : checkpoints_) stored += checkpoint.size();
  return stored;
}

PlanEvaluation evaluate_plan(const PipelineDag& dag, std::span<const int> option_indices, int gpus) {
  assert(option_indices.size() == dag.operations.size() && "evaluate_plan: one option per operation");
  const Topology topology(dag);
  std::vector<double> start(dag.operations.size());
  return evaluate(dag, topology, option_indices, gpus, start);
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
  // Between two planned points the solver made one cut, unit after unit at the same cost
  // (PhillipsDessouky records once per cut), so relaxed(q) is linear there.
  std::size_t slower = 0;
  for (std::int64_t quant = planned.front().first; quant >= planned.back().first; --quant) {
    while (slower + 1 < planned.size() && planned[slower + 1].first >= quant) ++slower;
    double relaxed = planned[slower].second;
    if (quant < planned[slower].first) {
      const auto& [slow_quant, slow_cost] = planned[slower];
      const auto& [fast_quant, fast_cost] = planned[slower + 1];
      relaxed += (fast_cost - slow_cost) * static_cast<double>(slow_quant - quant) /
                 static_cast<double>(slow_quant - fast_quant);
    }
    const double time_s = static_cast<double>(quant) * cheapest_dag.unit_time_s;
    bound.push_back({time_s, relaxed + cheapest_dag.static_power_w * time_s * paying});
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
        op_specs_(count_),
        compact_(count_, -1),
        duration_(count_),
        start_(count_),
        latest_finish_(count_),
        real_start_(count_),
        real_latest_finish_(count_),
        option_indices_(count_),
        finer_options_(std::any_of(dag.specs.begin(), dag.specs.end(),
                                   [](const CandidateExecutionOptions& spec) {
                                     return spec.representatives().size() < spec.options().size();
                                   })),
        planned_options_(count_),
        start_try_(count_),
        latest_finish_try_(count_),
        retimer_(dag, topology_, gpus_, finer_options_) {
    for (int op = 0; op < count_; ++op) op_specs_[op] = &dag.specs[dag.operations[op].spec];
    for (int op = 0; op < count_; ++op) {
      duration_[op] = spec(op).max_quant_time();
      planned_options_[op] = spec(op).option_index_for(duration_[op]);
      planned_cost_ += spec(op).hull_cost(duration_[op]);
    }
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
      if (!structure_current_) mark_critical();
      build_network();
      // A source-sink path of infinite arcs is a critical path already at its fastest.
      if (network_.infinite_path(kSource, kSink)) {
        result_.stop_reason = StopReason::kMinimumTime;
        break;
      }
      warm_start();
      seed_flow();
      network_.run(kSource, kSink, 1e-12 * std::max(1.0, max_capacity_));
      save_flow();
      if (!apply_cut()) {
        result_.stop_reason = StopReason::kNoCut;
        break;
      }
      repeat_cut();
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
    for (const auto& [time_s, kept] : frontier_) result_.frontier.push_back(kept.second);
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
  // Three tries rather than four: 12% less work on the convex bench profile and 8% on a 175B
  // solve, with the brute-force tests' numbers unchanged and no bench profile further above
  // lowtime (bench/RESULTS.md, fifth round); two lose the fast end (0.016% above its optimum).
  static constexpr std::size_t kTriedMoves = 3;
  static constexpr int kWalkStepsPerOperation = 4;
  static constexpr int kWalkStepsFromEachPlan = 8;
  static constexpr int kWalkPatience = 2;
  static int end_node(int k) { return 3 + 2 * k; }

  struct TightEdge {
    int arc, before, after;  // before/after as critical indices
  };

  const CandidateExecutionOptions& spec(int op) const { return *op_specs_[op]; }

  std::int64_t makespan_now() {
    return forward_pass<std::int64_t>(topology_, start_, [&](int op) { return duration_[op]; });
  }

  // Records the PD plan of the current durations. PD's own plans reclaim slack over the
  // representatives only: the finer pass costs a tenth of the solve on 8 x 64 and the walks
  // from the frontier plans, which make it, find what it would. A plan whose durations
  // realize the same options as the last PD plan recorded is that plan again: its real time
  // and energy are copied, not evaluated.
  void record(int iteration, std::int64_t quant_time) {
    IterationResult point = planned_point(iteration, quant_time, planned_cost_);
    if (!plan_changed_ && last_record_planned_) {
      point.time_s = result_.iterations.back().time_s;
      point.energy_j = result_.iterations.back().energy_j;
      point.plan = result_.iterations.back().plan;
      result_.iterations.push_back(std::move(point));
    } else {
      option_indices_ = planned_options_;
      if (options_.reclaim_slack)
        reclaim_slack(dag_, topology_, option_indices_, real_start_, real_latest_finish_, false);
      keep(std::move(point), evaluate(dag_, topology_, option_indices_, gpus_, real_start_));
    }
    plan_changed_ = false;
    last_record_planned_ = true;
    if (options_.progress) options_.progress(result_.iterations.back());
  }

  // Records the plan in option_indices_ as the caller set it; its slack is reclaimed and it is
  // evaluated unless the caller did (`evaluated`). The durations become its options' quantized
  // times (so this ends PD's own plans: record() needs the durations PD left).
  void record_realized(std::optional<PlanEvaluation> evaluated = std::nullopt) {
    double planned_cost = 0;
    for (int op = 0; op < count_; ++op) {
      duration_[op] = spec(op).options()[option_indices_[op]].quant_time;
      planned_cost += spec(op).hull_cost(duration_[op]);
    }
    IterationResult point = planned_point(static_cast<int>(result_.iterations.size()), makespan_now(), planned_cost);
    if (!evaluated) {
      if (options_.reclaim_slack)
        reclaim_slack(dag_, topology_, option_indices_, real_start_, real_latest_finish_, finer_options_);
      evaluated = evaluate(dag_, topology_, option_indices_, gpus_, real_start_);
    }
    keep(std::move(point), *evaluated);
    last_record_planned_ = false;
    if (options_.progress) options_.progress(result_.iterations.back());
  }

  IterationResult planned_point(int iteration, std::int64_t quant_time, double planned_cost) const {
    IterationResult point;
    point.iteration = iteration;
    point.quant_time = quant_time;
    point.effective_energy_j = planned_cost;
    point.effective_energy_change_j =
        result_.iterations.empty() ? 0.0 : planned_cost - result_.iterations.back().effective_energy_j;
    return point;
  }

  // Appends `point`, the plan in option_indices_ as `real` evaluates it, to the iterations and
  // its options to the plan history; the frontier map keeps it when no other plan recorded is
  // as fast and as cheap.
  void keep(IterationResult point, const PlanEvaluation& real) {
    point.time_s = real.time_s;
    point.energy_j = real.energy_j;
    point.plan = result_.plans.add(option_indices_);
    last_plan_ = option_indices_;
    const int index = static_cast<int>(result_.iterations.size());
    if (!dominated(point.time_s, point.energy_j)) {
      // Drop the plans this one dominates: from its time on, those with no less energy.
      auto position = frontier_.lower_bound(point.time_s);
      while (position != frontier_.end() && position->second.first >= point.energy_j) {
        position = frontier_.erase(position);
      }
      frontier_.emplace_hint(position, point.time_s, std::make_pair(point.energy_j, index));
    }
    result_.iterations.push_back(std::move(point));
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
    if (differs) record_realized();
  }

  // Latest finish times at the current makespan; an operation is critical when it has no float.
  void mark_critical() {
    latest_finish_pass<std::int64_t>(topology_, latest_finish_, makespan_, [&](int op) { return duration_[op]; });
    critical_ops_.clear();
    for (int op = 0; op < count_; ++op) {
      compact_[op] = start_[op] + duration_[op] == latest_finish_[op] ? static_cast<int>(critical_ops_.size()) : -1;
      if (compact_[op] >= 0) critical_ops_.push_back(op);
    }
    structure_current_ = true;
  }

  bool tight(std::size_t edge, const std::vector<std::int64_t>& start,
             const std::vector<std::int64_t>& latest_finish) const {
    const auto& [before, after] = dag_.edges[edge];
    return start[before] + duration_[before] == latest_finish[after] - duration_[after];
  }

  // Makes the last cut again, as many more units as it stays a minimum cut and realizes no
  // new options before its last unit (so no plan is skipped). It does while the critical
  // sub-DAG, its dependencies without float and the cut's capacities stay the same: the
  // planned cost is convex in the makespan, so no later cut is cheaper, and this one costs
  // what it did. The capacities hold while every cut operation stays on its hull segment; the
  // sub-DAG is checked after each try (one forward and one backward pass: paths change
  // linearly with the units, so the same sub-DAG after k units means the same at every unit
  // between). So the units it can be repeated are an interval from 0: the whole room is
  // tried first (it holds in 19 of 20 repeats at 175B scale, one check instead of about
  // three), then 1, 2, 4, ... units, halving after a try that changes the sub-DAG; either way
  // the cut is repeated the most units the sub-DAG allows. The critical sub-DAG it leaves is
  // that of the durations then, so the next iteration need not mark it again.
  void repeat_cut() {
    structure_current_ = false;
    if (!reverted_ok_) return;
    std::int64_t room = repeat_room();
    if (room <= 0) return;
    mark_critical();
    tight_.resize(dag_.edges.size());
    for (std::size_t edge = 0; edge < dag_.edges.size(); ++edge) tight_[edge] = tight(edge, start_, latest_finish_);
    std::int64_t units = room;
    for (bool whole = true; room > 0 && units > 0; whole = false) {
      units = std::min(units, room);
      shift_cut(units);
      if (same_structure(makespan_ - units)) {
        std::swap(start_, start_try_);
        std::swap(latest_finish_, latest_finish_try_);
        makespan_ -= units;
        room -= units;
        units *= 2;
      } else {
        shift_cut(-units);
        units = whole && room > 1 ? 1 : units / 2;
      }
    }
    structure_current_ = true;  // same_structure() kept the critical operations mark_critical() found
  }

  void shift_cut(std::int64_t units) {
    for (const int op : shortened_) move(op, -units);
    for (const int op : lengthened_) move(op, units);
  }

  // Changes a planned duration, keeping the planned cost and options up to date.
  void move(int op, std::int64_t units) {
    const CandidateExecutionOptions& options = spec(op);
    planned_cost_ -= options.hull_cost(duration_[op]);
    duration_[op] += units;
    planned_cost_ += options.hull_cost(duration_[op]);
    const int planned = options.option_index_for(duration_[op]);
    if (planned != planned_options_[op]) {
      planned_options_[op] = planned;
      plan_changed_ = true;
    }
  }

  // Units the last cut can be repeated: each shortened operation stays on the hull segment of
  // its last unit and within its representative's quantum (until the last unit), likewise
  // each lengthened one.
  std::int64_t repeat_room() const {
    std::int64_t room = std::numeric_limits<std::int64_t>::max();
    auto quant = [](const CandidateExecutionOptions& options, int index) {
      return options.options()[index].quant_time;
    };
    for (const int op : shortened_) {
      const CandidateExecutionOptions& options = spec(op);
      const std::int64_t now = duration_[op];  // the last unit was [now, now + 1]
      const std::vector<int>& hull = options.hull_vertices();
      const auto vertex = std::upper_bound(hull.begin(), hull.end(), now,
                                           [&](std::int64_t time, int index) { return time < quant(options, index); });
      room = std::min(room, now - quant(options, *std::prev(vertex)));
      room = std::min(room, now - quant(options, options.option_index_for(now)) + 1);
    }
    for (const int op : lengthened_) {
      const CandidateExecutionOptions& options = spec(op);
      const std::int64_t now = duration_[op];  // the last unit was [now - 1, now]
      const std::vector<int>& hull = options.hull_vertices();
      const auto vertex = std::lower_bound(hull.begin(), hull.end(), now,
                                           [&](int index, std::int64_t time) { return quant(options, index) < time; });
      room = std::min(room, quant(options, *vertex) - now);
      const std::vector<int>& representatives = options.representatives();
      const auto next = std::upper_bound(representatives.begin(), representatives.end(), now,
                                         [&](std::int64_t time, int index) { return time < quant(options, index); });
      if (next != representatives.end()) room = std::min(room, quant(options, *next) - now);
    }
    return room;
  }

  // Whether the durations now have the makespan `makespan` and the critical operations and
  // tight dependencies of the last mark_critical(); leaves their start and latest finish
  // times in start_try_ and latest_finish_try_.
  bool same_structure(std::int64_t makespan) {
    auto duration = [&](int op) { return duration_[op]; };
    if (forward_pass<std::int64_t>(topology_, start_try_, duration) != makespan) return false;
    latest_finish_pass<std::int64_t>(topology_, latest_finish_try_, makespan, duration);
    for (int op = 0; op < count_; ++op) {
      if ((start_try_[op] + duration_[op] == latest_finish_try_[op]) != (compact_[op] >= 0)) return false;
    }
    for (std::size_t edge = 0; edge < dag_.edges.size(); ++edge) {
      if (tight(edge, start_try_, latest_finish_try_) != static_cast<bool>(tight_[edge])) return false;
    }
    return true;
  }

  void build_network() {
    const int critical_count = static_cast<int>(critical_ops_.size());
    arc_keys_.clear();
    arcs_.clear();
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
      add_arc(start_node(k), end_node(k), upper - lower, FlowKey::kOperation, op);
      if (lower > 0) {
        lower_out_[k] = add_arc(start_node(k), kSink, lower, FlowKey::kLowerOut, op);
        lower_in_[k] = add_arc(kSource, end_node(k), lower, FlowKey::kLowerIn, op);
      }
    }
    tight_edges_.clear();
    for (std::size_t edge = 0; edge < dag_.edges.size(); ++edge) {
      if (!tight(edge, start_, latest_finish_)) continue;
      const auto& [before, after] = dag_.edges[edge];
      // A dependency without float joins two operations without float.
      assert(compact_[before] >= 0 && compact_[after] >= 0 && "tight dependency between non-critical operations");
      const int arc = add_arc(end_node(compact_[before]), start_node(compact_[after]), kInfinity, FlowKey::kDependency,
                              static_cast<int>(edge));
      tight_edges_.push_back({arc, compact_[before], compact_[after]});
    }
    terminal_arcs_.clear();
    for (int k = 0; k < critical_count; ++k) {
      const int op = critical_ops_[k];
      if (topology_.pred_first[op] == topology_.pred_first[op + 1] && latest_finish_[op] - duration_[op] == 0) {
        terminal_arcs_.emplace_back(add_arc(kSource, start_node(k), kInfinity, FlowKey::kFromSource, op), k);
      }
      if (topology_.succ_first[op] == topology_.succ_first[op + 1] && start_[op] + duration_[op] == makespan_) {
        terminal_arcs_.emplace_back(add_arc(end_node(k), kSink, kInfinity, FlowKey::kToSink, op), k);
      }
    }
    load_network(2 + 2 * critical_count);
  }

  // Most iterations (nine in ten at 175B scale) see the arcs of the last one, only their
  // capacities changed: then the network's adjacency is kept and the capacities are set (the
  // same state a rebuild gives: every arc at its capacity, no flow).
  void load_network(int nodes) {
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

  // Where an arc's flow is kept between iterations: per operation (its own arc, its lower-
  // bound arcs, its source and sink arcs) or per DAG edge.
  enum class FlowKey { kOperation, kLowerOut, kLowerIn, kFromSource, kToSink, kDependency };
  int add_arc(int from, int to, double capacity, FlowKey kind, int index) {
    arc_keys_.push_back(kind == FlowKey::kDependency ? 5 * count_ + index : 5 * index + static_cast<int>(kind));
    arcs_.push_back({from, to, capacity});
    return 2 * (static_cast<int>(arcs_.size()) - 1);  // MaxFlow's id: arcs in order, each with its reverse
  }

  // Starts the max flow from the last iteration's: the network changes little from one cut
  // to the next. Each arc gets its last flow, cut to its capacity; conservation is then
  // restored by sending deficits on towards the sink (in topological order) and excesses back
  // towards the source (in reverse), along arcs that carry flow. Any feasible start gives the
  // same minimum cut: the source side is what the residual network of a maximum flow reaches.
  void warm_start() {
    if (saved_flow_.empty()) saved_flow_.assign(5 * static_cast<std::size_t>(count_) + dag_.edges.size(), 0.0);
    const int nodes = 2 + 2 * static_cast<int>(critical_ops_.size());
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
    for (const int op : topology_.order) {
      if (compact_[op] < 0) continue;
      node_order_.push_back(start_node(compact_[op]));
      node_order_.push_back(end_node(compact_[op]));
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

  void save_flow() {
    for (const int key : saved_keys_) saved_flow_[key] = 0;
    saved_keys_ = arc_keys_;
    for (int arc = 0; arc < static_cast<int>(arc_keys_.size()); ++arc)
      saved_flow_[arc_keys_[arc]] = network_.flow(2 * arc);
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
    for (const int op : shortened_) move(op, -1);
    for (const int op : lengthened_) move(op, 1);
    std::int64_t next_makespan = makespan_now();
    reverted_ok_ = true;
    if (next_makespan >= makespan_ && !lengthened_.empty()) {
      reverted_ok_ = false;
      // A lengthened operation also sat on a path that was not critical; keep the shortening only.
      for (const int op : lengthened_) move(op, -1);
      ++result_.reverted_iterations;
      next_makespan = makespan_now();
    }
    if (next_makespan >= makespan_ || shortened_.empty()) {
      for (const int op : shortened_) move(op, 1);
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
    if (option_indices_ != last_plan_) {
      record_realized();
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
    std::vector<int> seeds;
    for (const auto& [time_s, kept] : frontier_) seeds.push_back(kept.second);
    const int min_time_steps = kWalkStepsPerOperation * count_;
    walk_slower(last_plan_, min_time_steps, min_time_steps);
    for (const int seed : seeds) walk_slower(result_.options_of(seed), kWalkStepsFromEachPlan, kWalkPatience);
  }

  // True when a plan kept so far is at least as fast and as cheap.
  bool dominated(double time_s, double energy_j) const {
    const auto after = frontier_.upper_bound(time_s * (1 + 1e-12));
    return after != frontier_.begin() && std::prev(after)->second.first <= energy_j * (1 + 1e-12);
  }

  // From `seed`, moves one operation one option slower at a time. The moves are ranked by
  // energy saved (effective energy plus static power x makespan x GPUs) per second of
  // makespan added, which one forward and one backward pass give exactly for every operation
  // (lengthening one by d adds max(0, d - its total float)); the best kTriedMoves are made,
  // their slack reclaimed and their plans kept when new (re-timing only what each move reaches,
  // PlanRetimer), and the walk goes on from the one with the best real rate. Ends when no move
  // saves energy, after `max_steps` steps, or after `patience` steps in a row that kept no plan.
  void walk_slower(std::span<const int> seed, int max_steps, int patience) {
    struct Move {
      double rate;  // predicted energy saved per second added, before slack reclamation
      int op;
    };
    std::vector<Move> moves;
    retimer_.load(seed);
    const detail::IncrementalTiming& timing = retimer_.timing();
    for (int step = 0, fruitless = 0; step < max_steps && fruitless < patience; ++step) {
      const std::size_t recorded = result_.iterations.size();
      const PlanEvaluation now_plan = retimer_.evaluation();
      const double now_s = now_plan.time_s;
      const std::span<const int> walked = retimer_.options();
      latest_finish_pass(topology_, real_latest_finish_, now_s, [&](int op) { return timing.duration_s(op); });
      moves.clear();
      for (int op = 0; op < count_; ++op) {
        const std::vector<ExecutionOption>& options = spec(op).options();
        if (walked[op] + 1 >= static_cast<int>(options.size())) continue;
        const ExecutionOption& now = options[walked[op]];
        const ExecutionOption& slower = options[walked[op] + 1];
        const double total_float = real_latest_finish_[op] - (timing.start_s(op) + now.time_s);
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
      int next = -1;
      double next_rate = -kInfinity;
      for (std::size_t index = 0; index < tried; ++index) {
        const PlanEvaluation real = retimer_.slow_down(moves[index].op);
        if (!dominated(real.time_s, real.energy_j)) {
          option_indices_.assign(retimer_.options().begin(), retimer_.options().end());
          record_realized(real);
        }
        const double saved_j = now_plan.energy_j - real.energy_j;
        const double rate = saved_j / std::max(real.time_s - now_s, 1e-15);
        if (saved_j > 0 && rate > next_rate) {
          next_rate = rate;
          next = moves[index].op;
          retimer_.save();
        }
        retimer_.rollback();
      }
      if (next < 0) break;
      retimer_.restore();
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
  std::vector<const CandidateExecutionOptions*> op_specs_;  // per operation: its spec

  detail::MaxFlow network_;
  struct Arc {
    int from, to;
    double capacity;
  };
  std::vector<Arc> arcs_, loaded_arcs_;  // the network being built, and the one in network_
  int loaded_nodes_ = -1;
  std::vector<int> compact_;               // operation -> critical index k, or -1
  std::vector<int> critical_ops_;          // k -> operation
  std::vector<int> lower_in_, lower_out_;  // k -> arc, or -1 when l = 0
  std::vector<TightEdge> tight_edges_;
  std::vector<int> arc_keys_, saved_keys_;          // per arc of the network: its index into saved_flow_
  std::vector<double> saved_flow_;                  // the last maximum flow, by FlowKey
  std::vector<double> imbalance_;                   // per node: flow in - flow out, during warm_start()
  std::vector<int> node_order_;                     // the network's nodes in topological order
  std::vector<std::pair<int, int>> terminal_arcs_;  // (arc, k): source -> start(k) or end(k) -> sink
  double max_capacity_ = 0;

  std::vector<std::int64_t> duration_, start_, latest_finish_;  // planned, in unit_time_s
  std::int64_t makespan_ = 0;
  std::vector<double> real_start_, real_latest_finish_;  // of the realized plan, seconds
  std::vector<int> option_indices_;
  const bool finer_options_;  // some options lie between representatives (a unit coarser than their gaps)
  std::vector<int> shortened_, lengthened_;
  std::vector<int> planned_options_;  // option_index_for(duration_), kept by move()
  double planned_cost_ = 0;           // sum of hull_cost(duration_), kept by move()
  bool plan_changed_ = true;          // planned_options_ changed since the last record
  std::vector<int> last_plan_;        // the realized options of the last plan evaluated
  // Plans recorded that no other is as fast and as cheap as: time_s -> (energy_j, index into
  // result_.iterations), time up, energy down.
  std::map<double, std::pair<double, int>> frontier_;
  bool last_record_planned_ = false;  // the last record was a PD plan (not realized by a caller)
  bool structure_current_ = false;    // critical_ops_ and compact_ are those of the durations now
  bool reverted_ok_ = false;          // the last cut was applied whole (none of it reverted)
  std::vector<char> tight_;           // per DAG edge: without float at the last mark_critical()
  std::vector<std::int64_t> start_try_, latest_finish_try_;

  detail::PlanRetimer retimer_;  // the walks' plan
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
