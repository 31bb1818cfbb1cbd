// Private to the search module: the batch evaluator and the record of what a strategy measured
// (batch_evaluator.cpp), shared by the strategies themselves (kareus_strategy.cpp ours,
// artifact_search.cpp the baseline, search.cpp exhaustive).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/search/evaluation_log.h"
#include "kareus/search/search.h"
#include "kareus/search/surrogate.h"

namespace kareus::search {

/// Measures batches of configs: first from the evaluation log, the rest spread over the
/// devices (one thread per device), each new measurement appended to the log as it completes.
class BatchEvaluator {
 public:
  BatchEvaluator(std::span<device::Device* const> devices, const partition::Partition& partition,
                 const SearchOptions& options);
  /// Results in the order of `configs`.
  [[nodiscard]] std::vector<Evaluation> measure(const std::vector<partition::KnobConfig>& configs);
  [[nodiscard]] std::size_t from_log() const { return from_log_; }
  [[nodiscard]] double static_power_w() const { return static_power_w_; }

 private:
  std::span<device::Device* const> devices_;
  const partition::Partition& partition_;
  std::optional<EvaluationLog> log_;
  std::size_t from_log_ = 0;
  double static_power_w_ = 0;
};

/// Fills the fronts of `result` from its evaluations and counts what came from the log.
void finish_result(SearchResult& result, const BatchEvaluator& evaluator);

/// What a strategy has measured, the one place it measures: each batch of space indices through
/// the evaluator, appended in order (evaluation k is of order()[k]), marked evaluated, counted,
/// and reported to options.progress.
class MeasuredConfigs {
 public:
  MeasuredConfigs(BatchEvaluator& evaluator, const partition::SearchSpace& space, const SearchOptions& options);
  void measure(const std::vector<std::size_t>& indices);
  [[nodiscard]] const std::vector<Evaluation>& evaluations() const { return result_.evaluations; }
  [[nodiscard]] const std::vector<std::size_t>& order() const { return order_; }
  [[nodiscard]] const std::vector<bool>& evaluated() const { return evaluated_; }
  [[nodiscard]] std::size_t batches() const { return result_.batches; }
  [[nodiscard]] double static_power_w() const { return result_.static_power_w; }
  /// The result with its fronts; stopped by `reason` unless every config was measured.
  [[nodiscard]] SearchResult finish(StopReason reason);

 private:
  BatchEvaluator& evaluator_;
  const partition::SearchSpace& space_;
  const SearchOptions& options_;
  std::vector<bool> evaluated_;
  std::vector<std::size_t> order_;  ///< evaluated indices in measurement order
  SearchResult result_;
};

/// E - P_static t, floored at 0.1% of E so that a noisy near-idle measurement has a logarithm.
[[nodiscard]] double floored_effective_energy(const Evaluation& evaluation, double static_power_w);

/// What the surrogates are fitted to: one row of features per measured config, in measurement
/// order, with log time and log (floored) effective energy.
struct Observations {
  FeatureRows rows;
  std::vector<double> log_times;
  std::vector<double> log_energies;
};

/// `features` holds config_features of every config of the space, in index order.
[[nodiscard]] Observations observe(const FeatureRows& features, const MeasuredConfigs& measured);

/// Throws InputError naming --budget unless 1 <= budget <= space_size: the one check behind
/// run_search (a std::size_t budget) and search_budget (a flag's long long).
template <typename Integer>
void check_budget_range(Integer budget, std::size_t space_size) {
  if (budget < 1 || static_cast<unsigned long long>(budget) > space_size) {
    throw InputError(fmt::format("--budget {} must be between 1 and the space size {}", budget, space_size));
  }
}

/// The artifact's strategy (docs/kareus.md section 4), seeded: random initial design, then four
/// batches split 40/20/20/20 between best predicted hypervolume improvement on (t, E), on
/// (t, E_eff), fastest predicted and most uncertain, over 5-member bootstrap ensembles of
/// gradient-boosted regression trees of log t and log E_eff.
[[nodiscard]] SearchResult run_artifact_strategy(BatchEvaluator& evaluator, const partition::SearchSpace& space,
                                                 const SearchOptions& options);

/// Ours (search.h, steps 1-3).
[[nodiscard]] SearchResult run_kareus_strategy(BatchEvaluator& evaluator, const partition::SearchSpace& space,
                                               const SearchOptions& options);

}  // namespace kareus::search
