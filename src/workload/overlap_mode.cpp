// How a pipeline instruction runs; its own file so the plan format's fuzzer links it alone.
#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/workload/workload.h"

namespace kareus::workload {

std::string_view to_string(OverlapMode overlap) { return overlap == OverlapMode::kNone ? "none" : "nanobatch"; }

OverlapMode parse_overlap_mode(std::string_view text, std::string_view origin) {
  if (text == "none") return OverlapMode::kNone;
  if (text == "nanobatch") return OverlapMode::kNanobatch;
  throw InputError(fmt::format("{} {}: expected \"none\" (Megatron) or \"nanobatch\"", origin, text));
}

}  // namespace kareus::workload
