// kareus/interop/pfo_protocol.h - the request bodies of Zeus's pipeline frequency optimizer (PFO).
//
// Zeus 0.16's PFO clients talk JSON over HTTP (docs/kareus.md section 11); these are its pydantic
// models (zeus.optimizer.pipeline_frequency.common) as C++ structs with strict parsers, plus the
// bodies kareus adds (deadline). Used by the PFO service (pfo_service.h); transport-free, so the
// parsers are unit-tested and fuzzed directly. Every parser bounds the body size and JSON nesting,
// rejects wrong types, out-of-range integers and unknown fields, and throws RequestError naming
// the field. Units: MHz, seconds, joules.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/common/error.h"
#include "kareus/workload/workload.h"

namespace kareus::interop {

/// The largest body the protocol parses: the top of `serve --max-body-bytes` (16 MiB), which
/// bounds what the HTTP layer hands over (default 1 MiB).
inline constexpr std::size_t kMaxRequestBodyBytes = std::size_t{1} << 24;
inline constexpr int kMaxRequestJsonDepth = 16;
/// Parallel degrees, world size and ranks: the workload's GPU bound.
inline constexpr int kMaxDegree = static_cast<int>(workload::kMaxGpus);

/// A malformed request (HTTP 400); `field()` names the offending field ("" for the body itself).
class RequestError : public InputError {
 public:
  RequestError(std::string field, const std::string& message) : InputError(message), field_(std::move(field)) {}
  [[nodiscard]] const std::string& field() const { return field_; }

 private:
  std::string field_;
};

/// Zeus's JobInfo. `job_id` must be empty (the server assigns it); pp x dp x tp = world_size.
struct JobInfo {
  int pp_degree = 1;
  int dp_degree = 1;
  int tp_degree = 1;
  int world_size = 1;
  std::optional<std::string> job_metadata;
};

/// Zeus's RankInfo: the global rank, its coordinates and the clocks its GPU supports (MHz).
struct RankInfo {
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  int tp_rank = 0;
  std::vector<int> available_frequencies;
};

/// Zeus's ProfilingResult, kept as its canonical JSON for the results log after validation.
struct ProfilingResult {
  int rank = 0;
  std::vector<double> iter_time;    ///< s
  std::vector<double> iter_energy;  ///< J
  std::string json;                 ///< the validated body, compact
};

[[nodiscard]] JobInfo parse_job_info(std::string_view body);
[[nodiscard]] RankInfo parse_rank_info(std::string_view body);
[[nodiscard]] ProfilingResult parse_profiling_result(std::string_view body);
/// kareus's {"deadline_s": T}: T a positive finite number of seconds.
[[nodiscard]] double parse_deadline_request(std::string_view body);
/// The `rank` query parameter: a decimal integer in [0, kMaxDegree). nullptr = missing.
[[nodiscard]] int parse_rank_query(const std::string* value);

}  // namespace kareus::interop
