// kareus/search/search_report.h - the budget of a partition search and its JSON report.
//
// `kareus search` (and any C or Python caller) asks search_budget for the measurement budget
// (10% of the space unless given) and prints search_report_json, the `kareus.search/1`
// document: what was searched, the two measured fronts (time_s, energy_j per config) and
// their hypervolume ratios against the exhaustive truth (rate_search in search_quality.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kareus/search/search.h"
#include "kareus/search/search_quality.h"

namespace kareus::search {

/// The measurement budget of a search over `space_size` configs: `requested`, or 10% of the
/// space (at least 1) when not given. Throws InputError naming --budget unless
/// 1 <= budget <= space_size.
[[nodiscard]] std::size_t search_budget(std::size_t space_size, std::optional<long long> requested = std::nullopt);

/// What was searched, for search_report_json.
struct SearchReportContext {
  std::string workload_json;  ///< workload::workload_to_json of the workload
  std::string gpu;            ///< preset name
  std::string partition;      ///< partition key
  std::string strategy;       ///< "kareus", "artifact" or "exhaustive"
  std::uint64_t seed = 0;
  std::size_t space_size = 0;
  std::size_t budget = 0;  ///< measurements allowed (the space size for an exhaustive run)
  double static_power_w = 0;
};

/// The `kareus.search/1` document, indented by 2: the context's fields, the evaluations, stop
/// reason, both fronts (config, time_s, energy_j) and the hypervolume ratios of `quality`.
[[nodiscard]] std::string search_report_json(const SearchReportContext& context, const SearchResult& result,
                                             const SearchQuality& quality);

}  // namespace kareus::search
