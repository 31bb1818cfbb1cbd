// kareus/search/search.h - per-partition multi-objective search over the discrete knob space.
//
// Fourth stage of the data flow: for one partition (partition.h) and its space of clocks x
// CTA counts x launch slots (search_space.h), find the time-energy Pareto fronts on (t, E)
// and (t, E - P_static t) with few measurements (each ~10 s on a real GPU). Our strategy:
//   1. a maximin Latin initial design over the normalised grid (CTA counts on a log scale);
//   2. batches chosen by exact 2-D expected hypervolume improvement (hypervolume_improvement.h)
//      under Gaussian-process posteriors (surrogate.h) of log t and log effective energy,
//      improving on the fronts of the posterior means at the measured configs (so noise does
//      not hide a region), batches built by the Kriging believer, alternating (t, E) and
//      (t, E_eff);
//   3. a refinement pass (the last refinement_fraction of the budget, or earlier when the
//      predicted gain falls below min_relative_gain): a local search over the untried CTA /
//      slot neighbours (then clock neighbours) of the measured front, starting at the front
//      points with the largest hypervolume contribution. It stops when the budget is spent,
//      or with kConverged when no neighbour is left and no config promises a gain.
// The artifact's strategy (docs/kareus.md section 4: random design, 40/20/20/20 quota batches
// over a bootstrap ensemble of gradient-boosted trees) is kept as a baseline, and exhaustive
// search gives the ground truth (search_quality.h rates a search against it). Every measurement
// can go through an EvaluationLog, so a killed search resumes where it stopped; a batch is
// measured in parallel over several devices.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/device/device.h"
#include "kareus/partition/search_space.h"
#include "kareus/search/evaluation_log.h"
#include "kareus/search/pareto.h"

namespace kareus::search {

enum class Strategy {
  kKareus,    ///< GP + EHVI, multi-pass (ours)
  kArtifact,  ///< random design + quota batches on boosted-tree ensembles (baseline)
};

/// Parses "kareus" / "artifact"; throws InputError naming --strategy.
[[nodiscard]] Strategy parse_strategy(const std::string& text);
[[nodiscard]] std::string_view to_string(Strategy strategy);

enum class StopReason {
  kBudget,          ///< the budget of measurements was spent
  kConverged,       ///< predicted hypervolume gain below the threshold, no neighbour left to refine
  kSpaceExhausted,  ///< every config was measured
};

[[nodiscard]] std::string_view to_string(StopReason reason);

struct SearchOptions {
  std::size_t budget = 0;  ///< measurements, 1..space size
  std::uint64_t seed = 0;
  Strategy strategy = Strategy::kKareus;
  std::size_t batch_size = 2;         ///< configs chosen per batch (measured in parallel)
  std::size_t initial_design = 0;     ///< 0 = automatic (25% of the budget, at least 8)
  double refinement_fraction = 0.25;  ///< share of the budget kept for the refinement pass
  /// Stop when the best expected hypervolume improvement, relative to the hypervolume of the
  /// current front (reference 1.1 x the worst measured point), is below this.
  double min_relative_gain = 1e-5;
  /// Measurements up to which every batch refits the surrogates' hyperparameters (O(n^3) per
  /// likelihood evaluation); past it they are refitted when the measurements have grown by a
  /// quarter since the last fit, and only conditioned on new data in between. 192 covers every
  /// search at 10% of the artifact's spaces (at most 162 measurements).
  std::size_t refit_every_batch_up_to = 192;
  /// Optional evaluation log (resume); its header needs the workload.
  std::optional<std::filesystem::path> log_path;
  std::string workload_json;  ///< for the log header
  WarningCallback warn;       ///< warnings (corrupt log tail, ...)
  /// Called after every measured batch with the evaluations so far.
  std::function<void(std::size_t evaluations, std::size_t budget)> progress;
};

struct SearchResult {
  std::vector<Evaluation> evaluations;             ///< every measurement, in the order chosen
  std::vector<Evaluation> energy_front;            ///< pareto_front(.., kEnergy)
  std::vector<Evaluation> effective_energy_front;  ///< pareto_front(.., kEffectiveEnergy)
  StopReason stop_reason = StopReason::kBudget;
  std::size_t batches = 0;
  std::size_t surrogate_fits = 0;  ///< hyperparameter fits (our strategy; each fits both GPs)
  std::size_t from_log = 0;        ///< measurements taken from the log instead of the device
  double static_power_w = 0;
};

/// Runs the search of `options.strategy` on `devices` (a batch is spread over them, one
/// thread each). Throws InputError if the budget is outside 1..space size, if there is no
/// device, or for a bad log; Error from the devices.
[[nodiscard]] SearchResult run_search(std::span<device::Device* const> devices, const partition::Partition& partition,
                                      const partition::SearchSpace& space, const SearchOptions& options);
[[nodiscard]] SearchResult run_search(device::Device& device, const partition::Partition& partition,
                                      const partition::SearchSpace& space, const SearchOptions& options);

/// Measures every config of `space` (options.budget is ignored; the log is used as in run_search).
[[nodiscard]] SearchResult run_exhaustive(std::span<device::Device* const> devices,
                                          const partition::Partition& partition, const partition::SearchSpace& space,
                                          const SearchOptions& options);
[[nodiscard]] SearchResult run_exhaustive(device::Device& device, const partition::Partition& partition,
                                          const partition::SearchSpace& space, const SearchOptions& options);

/// Normalised features of config `index` of `space`: clock, CTA count and slot index, each
/// scaled to [0, 1] over the space's values (0.5 for a single value).
[[nodiscard]] std::vector<double> config_features(const partition::SearchSpace& space, std::size_t index);

}  // namespace kareus::search
