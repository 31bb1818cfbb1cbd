#include "kareus/planner/method.h"

#include <array>
#include <cstddef>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kareus/common/error.h"

namespace kareus::planner {

namespace {

// Indexed by the enum, whose values are the run order (kMethods); to_string and parse_method
// both read it.
constexpr std::array<std::string_view, kMethods.size()> kMethodNames = {"megatron", "perseus", "nanobatch_perseus",
                                                                        "kareus"};

}  // namespace

std::string_view to_string(Method method) { return kMethodNames.at(static_cast<std::size_t>(method)); }

Method parse_method(std::string_view text) {
  for (Method method : kMethods) {
    if (to_string(method) == text) return method;
  }
  throw InputError(fmt::format("--methods: unknown method \"{}\" (methods: {})", text, fmt::join(kMethodNames, ", ")));
}

std::optional<device::OverlapMode> overlap_of(Method method) {
  switch (method) {
    case Method::kMegatron:
    case Method::kPerseus:
      return device::OverlapMode::kNone;
    case Method::kNanobatchPerseus:
      return device::OverlapMode::kNanobatch;
    case Method::kKareus:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace kareus::planner
