// src/pipeline/real_time_walks.h - the Phillips-Dessouky solver's passes on real times: the
// repair of its last plan to the true minimum makespan, and greedy walks slower, one operation
// one option at a time, from a plan.
//
// PD plans on quantized durations; each option's real time exceeds its quantized one by up to a
// unit, so near the fast end the real makespans of its last plans run above their planned ones,
// and between its quantized plans lie options it never plans with. These passes work on the
// options' real times and hand every new plan to the caller. Units: seconds, joules.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "kareus/pipeline/phillips_dessouky.h"
#include "pipeline/dag_timing.h"
#include "pipeline/frontier_record.h"
#include "pipeline/plan_retimer.h"

namespace kareus::pipeline::detail {

class RealTimeWalks {
 public:
  // How many of the best predicted moves each step tries; how many steps the walk from the
  // minimum time takes at most, per operation; how many the walk from each other frontier plan
  // takes, and after how many in a row that keep no plan it stops. Three tries rather than
  // four: 12% less work on the convex bench profile and 8% on a 175B solve, with the
  // brute-force tests' numbers unchanged and no bench profile further above lowtime
  // (bench/RESULTS.md, fifth round); two lose the fast end (0.016% above its optimum).
  static constexpr std::size_t kTriedMoves = 3;
  static constexpr int kWalkStepsPerOperation = 4;
  static constexpr int kWalkStepsFromEachPlan = 8;
  static constexpr int kWalkPatience = 2;

  /// Receives a plan the frontier does not dominate, as evaluated.
  using KeepPlan = std::function<void(std::span<const int> options, const PlanEvaluation& evaluated)>;

  /// `dag` and `topology` (of dag) must outlive this object. gpus > 0.
  RealTimeWalks(const PipelineDag& dag, const Topology& topology, int gpus, bool finer_options);

  /// From `options`, while the real makespan is above the minimum (every operation at its
  /// fastest option), moves the operation on a real critical path with the least effective
  /// energy per second saved one representative faster (the finer options are left to slack
  /// reclamation). Each round lowers one option index, so this ends, at worst at all-fastest.
  void repair_to_minimum_time(std::vector<int>& options);

  /// From `seed`, moves one operation one option slower at a time. The moves are ranked by
  /// energy saved (effective energy plus static power x makespan x GPUs) per second of makespan
  /// added, which one forward and one backward pass give exactly for every operation; the best
  /// kTriedMoves are made, their slack reclaimed, and those `frontier` does not dominate go to
  /// `keep`; the walk goes on from the one with the best real rate. Ends when no move saves
  /// energy, after `max_steps` steps, or after `patience` steps in a row that kept no plan.
  void walk_slower(std::span<const int> seed, int max_steps, int patience, const FrontierRecord& frontier,
                   const KeepPlan& keep);

  /// From `seed`, at most `max_steps` times: the operation on a real critical path whose next
  /// faster option costs the least effective energy per second saved takes it, the slack is
  /// reclaimed, and the plan goes to `keep` unless `frontier` dominates it; until the minimum
  /// makespan. From the all-slowest plan this fills the slow end, which PD's plans may leave
  /// empty when the unit is coarse against the options' spread.
  void walk_faster(std::span<const int> seed, int max_steps, const FrontierRecord& frontier, const KeepPlan& keep);

 private:
  const CandidateExecutionOptions& spec(int op) const { return dag_.specs[dag_.operations[op].spec]; }

  /// Which faster option a speed-up step moves to: the next faster representative (the finer
  /// options left to slack reclamation), or the next faster option.
  enum class SpeedUp { kRepresentative, kNextOption };
  int faster_option(int op, int option, SpeedUp step) const {
    return step == SpeedUp::kRepresentative ? spec(op).faster_representative(option) : option - 1;
  }

  /// Times the plan `options` (start_s_ and latest_finish_s_ on real times) and returns its
  /// real makespan in `now_s` and the operation on a real critical path whose faster option
  /// costs the least effective energy per second saved, or -1 when none can go faster.
  int cheapest_critical_speed_up(std::span<const int> options, SpeedUp step, double& now_s);

  const PipelineDag& dag_;
  const Topology& topology_;
  const int count_;
  const int gpus_;
  PlanRetimer retimer_;
  const bool finer_options_;
  std::vector<double> start_s_, latest_finish_s_;
};

}  // namespace kareus::pipeline::detail
