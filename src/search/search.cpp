#include "kareus/search/search.h"

// The search's entry points: the strategy by name, the features every strategy models, and
// run_search / run_exhaustive over the batch evaluator (batch_evaluator.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "search_internal.h"

namespace kareus::search {

Strategy parse_strategy(const std::string& text) {
  if (text == "kareus") return Strategy::kKareus;
  if (text == "artifact") return Strategy::kArtifact;
  throw InputError(fmt::format("--strategy {}: expected \"kareus\" or \"artifact\"", text));
}

std::string_view to_string(Strategy strategy) { return strategy == Strategy::kKareus ? "kareus" : "artifact"; }

std::string_view to_string(StopReason reason) {
  // Indexed by the enum (budget, converged, space exhausted).
  static constexpr std::array<std::string_view, 3> kNames = {"budget", "converged", "space_exhausted"};
  return kNames.at(static_cast<std::size_t>(reason));
}

std::vector<double> config_features(const partition::SearchSpace& space, std::size_t index) {
  const partition::KnobConfig config = space.at(index);
  const auto scale = [](double value, double low, double high) {
    return high > low ? (value - low) / (high - low) : 0.5;
  };
  const std::vector<int>& clocks = space.clocks_mhz();
  const std::vector<int>& ctas = space.ctas();
  const auto [clock_low, clock_high] = std::minmax_element(clocks.begin(), clocks.end());
  const auto [cta_low, cta_high] = std::minmax_element(ctas.begin(), ctas.end());
  // CTA counts on a log scale: a collective's time goes as 1/CTAs up to its knee, so 1 -> 2 CTAs
  // matters as much as 10 -> 20. (ctas is 0 only for a partition without a collective: one value.)
  const auto log_ctas = [](int value) { return std::log(std::max(value, 1)); };
  const std::size_t slot = space.coordinates(index).slot;
  return {scale(config.freq_mhz, *clock_low, *clock_high),
          scale(log_ctas(config.ctas), log_ctas(*cta_low), log_ctas(*cta_high)),
          scale(static_cast<double>(slot), 0, static_cast<double>(space.slots().size() - 1))};
}

SearchResult run_search(std::span<device::Device* const> devices, const partition::Partition& partition,
                        const partition::SearchSpace& space, const SearchOptions& options) {
  check_budget_range(options.budget, space.size());
  if (options.batch_size < 1) throw InputError("--batch must be >= 1");
  BatchEvaluator evaluator(devices, partition, options);
  if (options.strategy == Strategy::kArtifact) return run_artifact_strategy(evaluator, space, options);
  return run_kareus_strategy(evaluator, space, options);
}

SearchResult run_search(device::Device& device, const partition::Partition& partition,
                        const partition::SearchSpace& space, const SearchOptions& options) {
  device::Device* devices[] = {&device};
  return run_search(devices, partition, space, options);
}

SearchResult run_exhaustive(std::span<device::Device* const> devices, const partition::Partition& partition,
                            const partition::SearchSpace& space, const SearchOptions& options) {
  BatchEvaluator evaluator(devices, partition, options);
  SearchResult result;
  result.static_power_w = evaluator.static_power_w();
  // Chunks of a few configs per device, so progress is reported and a kill loses little.
  const std::size_t chunk = 8 * devices.size();
  for (std::size_t start = 0; start < space.size(); start += chunk) {
    std::vector<partition::KnobConfig> configs;
    for (std::size_t index = start; index < std::min(space.size(), start + chunk); ++index) {
      configs.push_back(space.at(index));
    }
    for (Evaluation& evaluation : evaluator.measure(configs)) result.evaluations.push_back(std::move(evaluation));
    ++result.batches;
    if (options.progress) options.progress(result.evaluations.size(), space.size());
  }
  result.stop_reason = StopReason::kSpaceExhausted;
  finish_result(result, evaluator);
  return result;
}

SearchResult run_exhaustive(device::Device& device, const partition::Partition& partition,
                            const partition::SearchSpace& space, const SearchOptions& options) {
  device::Device* devices[] = {&device};
  return run_exhaustive(devices, partition, space, options);
}

}  // namespace kareus::search
