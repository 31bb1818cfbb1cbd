// The Phillips-Dessouky iteration itself (phillips_dessouky.h): the planned durations, the
// critical sub-DAG, the cut applied and repeated, and the record of the plans it realizes. Its
// parts: the cut network (cut_network.h), the frontier record (frontier_record.h), the passes on
// real times (real_time_walks.h), and plan realization (plan_realization.h).
#include "kareus/pipeline/phillips_dessouky.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "pipeline/cut_network.h"
#include "pipeline/dag_timing.h"
#include "pipeline/deadline_polish.h"
#include "pipeline/frontier_record.h"
#include "pipeline/plan_realization.h"
#include "pipeline/real_time_walks.h"
#include "pipeline/stage_reassignment.h"

namespace kareus::pipeline {

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

namespace {

using detail::forward_pass;
using detail::latest_finish_pass;
using detail::RealTimeWalks;
using detail::tight_dependency;
using detail::Topology;

// One run of the solver: the durations being planned, and the iterations recorded so far.
class Solver {
 public:
  Solver(const PipelineDag& dag, const PhillipsDessoukyOptions& options)
      : dag_(dag),
        options_(options),
        topology_(dag),
        count_(static_cast<int>(dag.operations.size())),
        gpus_(options.gpus > 0 ? options.gpus : dag.stages),
        op_specs_(count_),
        network_(dag, topology_),
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
        walks_(dag, topology_, gpus_, finer_options_),
        reassignment_(dag, topology_),
        polish_(dag, topology_, gpus_),
        polish_seeds_(options.polish_deadlines_s.size()) {
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
      network_.build({critical_ops_, compact_, duration_, start_, latest_finish_, makespan_});
      if (network_.at_minimum_time()) {
        result_.stop_reason = StopReason::kMinimumTime;
        break;
      }
      network_.solve();
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
      if (options_.reclaim_slack) {
        const std::vector<int> minimum_time_plan = last_plan_;
        const double minimum_time_s = result_.iterations.back().time_s;
        walk_slower_from_frontier();
        reassign_minimum_time_plan(minimum_time_plan, minimum_time_s);
        polish_at_deadlines();
      }
    }
    result_.frontier = frontier_.indices();
    return std::move(result_);
  }

 private:
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
        detail::reclaim_slack(dag_, topology_, option_indices_, real_start_, real_latest_finish_, false);
      keep(std::move(point), detail::evaluate(dag_, topology_, option_indices_, gpus_, real_start_));
      keep_polish_seeds(result_.iterations.back().time_s);
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
        detail::reclaim_slack(dag_, topology_, option_indices_, real_start_, real_latest_finish_, finer_options_);
      evaluated = detail::evaluate(dag_, topology_, option_indices_, gpus_, real_start_);
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
  // its options to the plan history, and offers it to the frontier.
  void keep(IterationResult point, const PlanEvaluation& real) {
    point.time_s = real.time_s;
    point.energy_j = real.energy_j;
    point.plan = result_.plans.add(option_indices_);
    last_plan_ = option_indices_;
    frontier_.offer(point.time_s, point.energy_j, static_cast<int>(result_.iterations.size()));
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

  // Forward-cut operations get one unit faster; backward-cut ones one unit slower where they
  // can. Returns false, durations unchanged, when the cut does not shorten the makespan.
  bool apply_cut() {
    shortened_.clear();
    lengthened_.clear();
    for (int k = 0; k < static_cast<int>(critical_ops_.size()); ++k) {
      const int op = critical_ops_[k];
      if (network_.forward_cut(k)) {
        shortened_.push_back(op);
      } else if (network_.backward_cut(k) && duration_[op] < spec(op).max_quant_time()) {
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
    for (std::size_t edge = 0; edge < dag_.edges.size(); ++edge)
      tight_[edge] = tight_dependency(dag_.edges[edge], duration_, start_, latest_finish_);
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
      room = std::min(room, now - quant(options, options.hull_vertex_at_or_below(now)));
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
      if (tight_dependency(dag_.edges[edge], duration_, start_try_, latest_finish_try_) !=
          static_cast<bool>(tight_[edge]))
        return false;
    }
    return true;
  }

  // Off-critical operations may run options whose real times exceed their quantized ones, so
  // the last PD plan need not reach the true minimum makespan; repair it on real times, then
  // reclaim slack (record_realized).
  void repair_to_minimum_time() {
    for (int op = 0; op < count_; ++op) option_indices_[op] = spec(op).option_index_for(duration_[op]);
    walks_.repair_to_minimum_time(option_indices_);
    for (int op = 0; op < count_; ++op) duration_[op] = spec(op).options()[option_indices_[op]].quant_time;
    if (option_indices_ != last_plan_) record_realized();
  }

  // Walks on real times, slower one option at a time, from the minimum-time plan and from
  // every plan on the frontier so far. Near the fast end, where most operations are critical,
  // the real makespans of the last PD plans run several units above their planned ones and
  // above the repaired minimum-time plan, which is often cheaper than they are: without the
  // walk the frontier jumps from the minimum time to the first PD plan that is cheaper,
  // skipping every time in between. Elsewhere PD's plans are the hull's, and a few real-time
  // steps from each find the options between its quantized ones.
  void walk_slower_from_frontier() {
    const std::vector<int> seeds = frontier_.indices();
    walk_slower_across(last_plan_);
    std::vector<int> slowest(count_);
    for (int op = 0; op < count_; ++op) slowest[op] = static_cast<int>(spec(op).options().size()) - 1;
    walks_.walk_faster(slowest, walk_across_steps(), frontier_, record_walked());
    const RealTimeWalks::KeepPlan keep = record_walked();
    for (const int seed : seeds) {
      walks_.walk_slower(result_.options_of(seed), RealTimeWalks::kWalkStepsFromEachPlan, RealTimeWalks::kWalkPatience,
                         frontier_, keep);
    }
  }

  // The improvement step at the minimum time: the minimum-time plan's stages re-chosen exactly,
  // one at a time with the others pinned (stage_reassignment.h), and a walk slower from what it
  // gives, beside the walk from the plan before it (a walk is greedy: from each it finds other
  // plans, and neither's are all cheaper).
  void reassign_minimum_time_plan(std::vector<int> options, double minimum_time_s) {
    if (!reassignment_.improve(options, minimum_time_s)) return;
    option_indices_ = std::move(options);
    record_realized();  // reclaims slack: the walk starts from the plan recorded
    walk_slower_across(last_plan_);
  }

  // For each asked deadline not seeded yet that this PD plan meets in real time: its durations
  // rounded down to hull vertices. That is the LP relaxation's plan at the quantized makespan with
  // each mixed operation at the faster of its two options (every one no slower than the option
  // the plan realized, so it meets the deadline too): a seed of the exchanges other than the
  // frontier's plans, whose walks end in other local optima.
  void keep_polish_seeds(double time_s) {
    for (std::size_t k = 0; k < polish_seeds_.size(); ++k) {
      if (!polish_seeds_[k].empty() || time_s > options_.polish_deadlines_s[k]) continue;
      std::vector<int>& seed = polish_seeds_[k];
      seed.resize(count_);
      for (int op = 0; op < count_; ++op) seed[op] = spec(op).hull_vertex_at_or_below(duration_[op]);
    }
  }

  // At each asked deadline, the polish (deadline_polish.h) from the frontier's plan by it and
  // from PD's seed there; the plan it finds is recorded (its slack reclaimed), so the frontier
  // only gains.
  void polish_at_deadlines() {
    for (std::size_t k = 0; k < polish_seeds_.size(); ++k) {
      const double deadline_s = options_.polish_deadlines_s[k];
      std::vector<std::vector<int>> seeds;
      int best = -1;
      for (const int index : frontier_.indices()) {
        if (result_.iterations[index].time_s <= deadline_s) best = index;
      }
      if (best >= 0) seeds.push_back(result_.options_of(best));
      if (!polish_seeds_[k].empty()) {
        seeds.push_back(std::move(polish_seeds_[k]));
        detail::reclaim_slack(dag_, topology_, seeds.back(), real_start_, real_latest_finish_, finer_options_);
      }
      std::vector<int> polished = polish_.best_by(std::move(seeds), deadline_s);
      if (polished.empty() || (best >= 0 && polished == result_.options_of(best))) continue;
      option_indices_ = std::move(polished);
      record_realized();
    }
  }

  // Records each plan a walk keeps.
  RealTimeWalks::KeepPlan record_walked() {
    return [this](std::span<const int> options, const PlanEvaluation& evaluated) {
      option_indices_.assign(options.begin(), options.end());
      record_realized(evaluated);
    };
  }

  // The walks from the minimum-time and the all-slowest plans may cross the whole frontier.
  int walk_across_steps() const { return RealTimeWalks::kWalkStepsPerOperation * count_; }

  // A walk slower from `seed` (a copy: what the walk keeps changes last_plan_) across the frontier.
  void walk_slower_across(std::vector<int> seed) {
    walks_.walk_slower(seed, walk_across_steps(), walk_across_steps(), frontier_, record_walked());
  }

  const PipelineDag& dag_;
  const PhillipsDessoukyOptions& options_;
  const Topology topology_;
  const int count_;
  const int gpus_;
  std::vector<const CandidateExecutionOptions*> op_specs_;  // per operation: its spec

  detail::CutNetwork network_;
  std::vector<int> compact_;       // operation -> critical index k, or -1
  std::vector<int> critical_ops_;  // k -> operation

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
  detail::FrontierRecord frontier_;
  bool last_record_planned_ = false;  // the last record was a PD plan (not realized by a caller)
  bool structure_current_ = false;    // critical_ops_ and compact_ are those of the durations now
  bool reverted_ok_ = false;          // the last cut was applied whole (none of it reverted)
  std::vector<char> tight_;           // per DAG edge: without float at the last mark_critical()
  std::vector<std::int64_t> start_try_, latest_finish_try_;

  RealTimeWalks walks_;
  detail::StageReassignment reassignment_;
  detail::DeadlinePolish polish_;
  std::vector<std::vector<int>> polish_seeds_;  // per asked deadline: PD's plan there, rounded down (or empty)
  PhillipsDessoukyResult result_;
};

}  // namespace

PhillipsDessouky::PhillipsDessouky(const PipelineDag& dag, PhillipsDessoukyOptions options)
    : dag_(dag), options_(std::move(options)) {
  if (options_.gpus < 0) throw InputError(fmt::format("phillips-dessouky: gpus must be >= 0, found {}", options_.gpus));
  for (const double deadline_s : options_.polish_deadlines_s) {
    if (!std::isfinite(deadline_s) || deadline_s <= 0) {
      throw InputError(
          fmt::format("phillips-dessouky: a polish deadline must be finite and > 0 s, found {}", deadline_s));
    }
  }
  if (options_.max_iterations < 0) {
    throw InputError(fmt::format("phillips-dessouky: max_iterations must be >= 0, found {}", options_.max_iterations));
  }
}

PhillipsDessoukyResult PhillipsDessouky::run() const { return Solver(dag_, options_).run(); }

}  // namespace kareus::pipeline
