// kareus/pipeline/phillips_dessouky.h - the iteration time-energy frontier of a pipeline DAG.
//
// Solves the discrete time-cost tradeoff on a PipelineDag by the Phillips-Dessouky method
// (Phillips & Dessouky, "Solving the project time/cost tradeoff problem using the minimal cut
// concept", Management Science 1977), matching lowtime's PhillipsDessouky: start with every
// operation at its slowest option; each iteration finds the critical sub-DAG, a minimum cut
// whose forward arcs cost (cost(d-1) - cost(d)) and backward arcs save (cost(d) - cost(d+1)),
// shortens forward-cut operations and lengthens backward-cut ones by one `unit_time_s`. Unlike
// lowtime, cost(d) is the exact convex hull of the discrete options (no exponential fit), and
// every iteration's plan is evaluated as it would really run: each operation takes the slowest
// option that fits its planned duration (then, by default, any real slack left is reclaimed by
// slower, cheaper options); makespan from real times; energy = sum of effective
// energies + static_power_w x makespan x GPUs (lowtime's convention; = the real energies plus
// static power while a GPU idles). One iteration: a few O(V+E) passes and one max flow
// (Dinic, src/pipeline/max_flow.h, started from the last iteration's flow) on the critical
// sub-DAG. One cut per iteration, made again for as many units of makespan as it stays a
// minimum cut (same critical sub-DAG, same costs) and realizes no new option: at most one
// iteration per unit_time_s between the all-slowest and all-fastest plans, far fewer where
// options are many units apart. The walks on real times (PhillipsDessoukyResult::iterations)
// re-time only the operations each tried move reaches (src/pipeline/plan_retimer.h). Memory: a
// few numbers per iteration and the plans as changes from one to the next (PlanHistory).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "kareus/pipeline/pipeline_dag.h"

namespace kareus::pipeline {

enum class StopReason {
  kMinimumTime,     ///< a critical path runs every operation at its fastest option
  kNoCut,           ///< the cut found did not shorten the makespan (numerical trouble)
  kZeroCostChange,  ///< lowtime's rule, only with stop_on_zero_cost_change
  kIterationLimit,  ///< max_iterations reached
};
std::string_view to_string(StopReason reason);

struct IterationResult {
  int iteration = 0;                     ///< 0 = every operation at its slowest option
  std::int64_t quant_time = 0;           ///< planned makespan, in unit_time_s (may drop several units)
  double effective_energy_j = 0;         ///< planned: sum of the hull costs at the planned durations
  double effective_energy_change_j = 0;  ///< planned change from the previous iteration
  double time_s = 0;                     ///< real makespan of the realized plan
  double energy_j = 0;                   ///< real energy of the realized plan, all GPUs
  int plan = -1;                         ///< its options: PhillipsDessoukyResult::options_of
};

/// Every plan a solve evaluated, compactly: each as the options that changed from the plan
/// before it (consecutive plans differ in a few operations), with a full copy every
/// kCheckpointEvery plans, so reading one replays at most that many changes.
class PlanHistory {
 public:
  static constexpr int kCheckpointEvery = 64;
  /// Stores a plan (one option index per operation) and returns its id.
  int add(std::span<const int> options);
  /// The plan stored as `id`. Precondition: 0 <= id < size().
  [[nodiscard]] std::vector<int> at(int id) const;
  [[nodiscard]] int size() const { return static_cast<int>(changes_end_.size()); }
  /// Option indices held: the full copies' and the changes' (the memory, at 4 and 8 bytes each).
  [[nodiscard]] std::size_t stored_options() const;

 private:
  std::vector<int> last_;
  std::vector<std::vector<int>> checkpoints_;  // plan k x kCheckpointEvery's options
  std::vector<std::pair<int, int>> changes_;   // (operation, option) changed from the plan before
  std::vector<std::size_t> changes_end_;       // per plan: where its changes end in changes_
};

struct PhillipsDessoukyOptions {
  int gpus = 0;                           ///< GPUs paying static power over the makespan; 0 = dag.stages
  int max_iterations = 0;                 ///< 0 = until the minimum time
  bool stop_on_zero_cost_change = false;  ///< lowtime stops when an iteration is free; we go on by default
  /// Before evaluating a plan, give each operation the cheapest option that fits its real slack
  /// (never raises the real makespan). Off = the plan is exactly "slowest option within the
  /// planned duration", as lowtime realizes it, and no walk up from the minimum-time plan
  /// (see PhillipsDessoukyResult::iterations).
  bool reclaim_slack = true;
  /// Deadlines (real makespans, seconds) a caller asks plans for. At each, after the walks, a
  /// local search (src/pipeline/deadline_polish.h: pair exchanges, stage re-choices, kicks, then
  /// random perturbations from a fixed seed) from the frontier's plan by it and from PD's plan
  /// there rounded down to its hull vertices; the plan it finds joins the frontier. The frontier
  /// elsewhere is as without them. Each costs milliseconds to a few tenths of a second. Needs
  /// reclaim_slack; each finite and > 0.
  std::vector<double> polish_deadlines_s;
  std::function<void(const IterationResult&)> progress;  ///< called after every iteration
};

struct PhillipsDessoukyResult {
  /// In solve order, makespan decreasing. After kMinimumTime (with reclaim_slack), an entry
  /// repairs the last PD plan to the true minimum real makespan (operations on real critical
  /// paths at their fastest options), unless the last PD plan already got there; then come
  /// the plans of a greedy walk up from that plan on real times (one operation one option
  /// slower at a time, the few best moves by energy saved per second added tried each step),
  /// those no earlier entry is as fast and as cheap as: they fill the times next to the
  /// minimum, which PD's quantized plans overshoot.
  std::vector<IterationResult> iterations;
  StopReason stop_reason = StopReason::kMinimumTime;
  /// Indices into iterations, Pareto-optimal in real (time_s, energy_j), time ascending (of
  /// points equal within 1e-12, the first recorded).
  std::vector<int> frontier;
  int reverted_iterations = 0;  ///< iterations whose lengthenings had to be undone to shorten the makespan
  PlanHistory plans;
  /// The options (per operation, into dag.specs[operation.spec].options()) of iteration
  /// `index`'s plan, as evaluated (time_s, energy_j).
  [[nodiscard]] std::vector<int> options_of(int index) const { return plans.at(iterations[index].plan); }
};

class PhillipsDessouky {
 public:
  /// Precondition: `dag` is acyclic (build_one_f_one_b_dag's are) and outlives this object.
  /// Throws InputError if options.gpus < 0 or options.max_iterations < 0; run() throws Error
  /// if the DAG has a cycle.
  PhillipsDessouky(const PipelineDag& dag, PhillipsDessoukyOptions options);
  [[nodiscard]] PhillipsDessoukyResult run() const;

 private:
  const PipelineDag& dag_;
  PhillipsDessoukyOptions options_;
};

struct PlanEvaluation {
  double time_s = 0;    ///< makespan from the options' real times
  double energy_j = 0;  ///< sum of effective energies + static_power_w x makespan x gpus
};

/// Evaluates one option per operation (indices into each operation's candidates).
/// Precondition: option_indices.size() == dag.operations.size(), each index valid.
[[nodiscard]] PlanEvaluation evaluate_plan(const PipelineDag& dag, std::span<const int> option_indices, int gpus);

/// Work one asked deadline's search may take by default: operation timings (plans timed x
/// operations) of its exchanges, repairs and reclamations plus the states of its re-choices'
/// programs. A 48-operation DAG's search mostly ends before it; a 1,024-operation one's stops at
/// it (about 0.2 s).
inline constexpr std::int64_t kDeadlineSearchWork = 50'000'000;

/// The cheapest plan the search at an asked deadline (PhillipsDessoukyOptions::polish_deadlines_s)
/// finds by `deadline_s` from `seeds` (one option per operation each; a solve's frontier plans,
/// say) within `max_work`, for a caller whose deadline is known only after the solve. Seeds that
/// do not finish by it are skipped; empty when none does. Throws InputError if gpus <= 0, the
/// deadline is not finite and > 0, max_work < 0, or a seed does not give every operation a valid
/// option.
[[nodiscard]] std::vector<int> cheapest_plan_by(const PipelineDag& dag, int gpus, std::vector<std::vector<int>> seeds,
                                                double deadline_s, std::int64_t max_work = kDeadlineSearchWork);

struct BoundPoint {
  double time_s = 0;
  double energy_j = 0;
};

/// A certified lower bound on the frontier of every plan (any option per operation):
/// `cheapest_dag` must be built with QuantumRule::kCheapest, so each operation's hull is below
/// all its options at their quantized times; PhillipsDessouky is exact on that convex
/// relaxation (see the brute-force tests), so the planned cost at quantized makespan q bounds
/// the effective energy of every plan whose quantized makespan is <= q... Returns, for every
/// q from the all-fastest to the all-slowest quantized makespan, (q x unit_time_s,
/// relaxed(q) + static_power_w x q x unit_time_s x gpus). Any real plan finishing within T uses
/// at least the least energy_j among the points with time_s <= T (quantization floors, so a
/// plan's quantized makespan never exceeds its real one). gpus 0 = dag.stages.
[[nodiscard]] std::vector<BoundPoint> relaxation_lower_bound(const PipelineDag& cheapest_dag, int gpus = 0);

/// Least energy_j among `bound` points with time_s <= time_s (+infinity when none).
[[nodiscard]] double lower_bound_at(const std::vector<BoundPoint>& bound, double time_s);

}  // namespace kareus::pipeline
