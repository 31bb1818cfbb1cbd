// src/pipeline/deadline_polish.h - the cheapest plan a local search finds by one deadline a
// caller asks for: the solver's last step at PhillipsDessoukyOptions::polish_deadlines_s.
//
// PD's frontier is the convex relaxation's, realized plan by plan, and the greedy walks between
// its plans change one operation at a time; in the middle of the frontier that leaves plans up to
// 2% above the exact optimum, which often runs the steady state's pairs slower and the warm-up
// and cool-down faster (bench/RESULTS.md, "How far local moves get in the middle of the
// frontier"). At one deadline a wider search pays: pair exchanges (pair_exchange.h) and stage
// re-choices (stage_reassignment.h) in turn to a local optimum from each seed; kicks out of it
// (every operation of one spec, one stage's forwards say, shifted a few options or all set to one
// option some of them use), repaired to the deadline, searched again, kept when cheaper; then an
// iterated local search: a few random operations moved one or two options either way, repaired,
// slack reclaimed, pair exchanges to a local optimum, kept when cheaper, until many in a row keep
// nothing or the work budget is spent. The optima the kicks miss differ from their plan in
// several operations at once, often only in the warm-up or cool-down; random moves reach most
// of them, and the kicks a few the random moves do not (bench/RESULTS.md, "Asked deadlines: an
// iterated local search after the kicks"). Units: seconds, joules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/pipeline/pipeline_dag.h"
#include "pipeline/dag_timing.h"
#include "pipeline/pair_exchange.h"
#include "pipeline/stage_reassignment.h"

namespace kareus::pipeline::detail {

class DeadlinePolish {
 public:
  /// Option shifts of a kick (positive: faster) and rounds of kicks at most (a round that
  /// keeps nothing ends them).
  static constexpr int kKickShifts[] = {1, 2, 4, -1, -2};
  static constexpr int kKickRounds = 2;
  /// Kicks that set every operation of a spec to one option its operations use, at most.
  static constexpr std::size_t kMaxUniformKicks = 6;
  /// A perturbation moves 2 to kMaxPerturbed operations (drawn with repetition), each one or
  /// two options faster or slower; the search ends after kPatience perturbations in a row that
  /// keep nothing. With a patience of 100 or 200 it misses optima of the brute-force test (up to
  /// 0.31% above); moving at most 4 operations left 4 of the 71 hardest holdout deadlines above
  /// 0.1% where 12 leave 1 (bench/RESULTS.md).
  static constexpr int kMaxPerturbed = 12;
  static constexpr int kPatience = 1000;
  /// Rounds of pair exchanges + stage re-choices in one polish at most.
  static constexpr int kPolishRounds = 4;
  /// Pareto states per chain position in the re-choices: more than the minimum-time step's 16,
  /// since here they run at a few deadlines and a chain of one stage is then re-chosen exactly
  /// on small shapes (16 missed the optimum of a 6-instruction chain by 0.8%).
  static constexpr std::size_t kMaxStates = 64;

  /// `dag` and `topology` (of dag) must outlive this object. gpus > 0.
  DeadlinePolish(const PipelineDag& dag, const Topology& topology, int gpus);

  /// The cheapest plan found by `deadline_s` from `seeds` (each finishing by it) within
  /// `max_work` (kDeadlineSearchWork, phillips_dessouky.h), or empty when `seeds` is.
  [[nodiscard]] std::vector<int> best_by(std::vector<std::vector<int>> seeds, double deadline_s,
                                         std::int64_t max_work = kDeadlineSearchWork);

 private:
  // The cheapest plan found so far at the deadline being searched.
  struct Incumbent {
    std::vector<int> options;
    double energy_j = std::numeric_limits<double>::infinity();
    // Takes `trial` when it is cheaper by more than rounding (1e-12 relative); whether it did.
    bool offer(std::vector<int>& trial, double trial_j);
  };

  // Kicks out of `best` (kKickRounds rounds), each repaired and polished, kept when cheaper.
  void search_kicks(Incumbent& best, double deadline_s);
  // The kicks of `spec` from `options`: its operations all shifted (kKickShifts) or all set to
  // one option some of them use (the optimum often runs a stage's steady state uniformly).
  std::vector<std::vector<int>> kicks(const std::vector<int>& options, int spec) const;
  // The iterated local search from `best`: perturbed, repaired, slack reclaimed, pair exchanges;
  // kept when cheaper; until kPatience in a row keep nothing or the budget is spent.
  void perturb_and_search(Incumbent& best, double deadline_s);
  // `options` with a few random operations moved (kMaxPerturbed); mt19937's raw output, which
  // the standard fixes, so the same input gives the same plan everywhere.
  std::vector<int> perturbed(std::vector<int> options, std::mt19937& random) const;
  // Pair exchanges and stage re-choices in turn while either lowers the energy.
  void polish(std::vector<int>& options, double deadline_s);
  // Speeds up, one option at a time, the operation without float whose next faster option
  // costs the least effective energy per second saved, until the plan finishes by `deadline_s`;
  // false when it cannot.
  bool repair_to(std::vector<int>& options, double deadline_s);
  double energy_j(std::span<const int> options);
  const CandidateExecutionOptions& spec_of(int op) const { return dag_.specs[dag_.operations[op].spec]; }
  const ExecutionOption& option(int op, int index) const { return spec_of(op).options()[index]; }

  const PipelineDag& dag_;
  const Topology& topology_;
  const int count_;
  const int gpus_;
  PairExchange exchange_;
  StageReassignment reassignment_;
  std::vector<double> start_s_, latest_finish_s_;
  std::int64_t budget_ = 0;  // work left at the deadline being polished
};

}  // namespace kareus::pipeline::detail
