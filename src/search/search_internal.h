// Private to the search module: the batch evaluator shared by the strategies, and the
// strategies themselves (search.cpp holds ours and exhaustive, artifact_search.cpp the baseline).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/search/evaluation_log.h"
#include "kareus/search/search.h"

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

/// Fills the fronts of `result` from its evaluations.
void finish_result(SearchResult& result);

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

}  // namespace kareus::search
