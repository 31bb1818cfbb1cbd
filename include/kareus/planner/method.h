// kareus/planner/method.h - the methods `kareus plan` compares and how each runs an instruction.
//
// megatron (default clock, no overlap), perseus (per-instruction clocks, no overlap),
// nanobatch_perseus (overlap with the default collective resources, per-instruction clocks) and
// kareus (clocks, overlap and per-partition comm configs): docs/kareus.md section 6.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "kareus/device/instruction.h"

namespace kareus::planner {

/// In the order the plan job runs them.
enum class Method {
  kMegatron,          ///< default clock, no overlap
  kPerseus,           ///< per-instruction clocks, no overlap
  kNanobatchPerseus,  ///< nanobatched with the default comm configs, per-instruction clocks
  kKareus,            ///< per-instruction clocks, overlap and per-partition comm configs
};
inline constexpr std::array<Method, 4> kMethods = {Method::kMegatron, Method::kPerseus, Method::kNanobatchPerseus,
                                                   Method::kKareus};

/// "megatron", "perseus", "nanobatch_perseus", "kareus": the names in summaries and plan folders.
[[nodiscard]] std::string_view to_string(Method method);
/// Parses a method name; throws InputError naming --methods and the names.
[[nodiscard]] Method parse_method(std::string_view text);
/// How every instruction of the method runs; nullopt when the method chooses per instruction.
[[nodiscard]] std::optional<device::OverlapMode> overlap_of(Method method);

}  // namespace kareus::planner
