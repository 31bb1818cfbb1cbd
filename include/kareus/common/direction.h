// kareus/common/direction.h - forward or backward: the pass of an op, a partition and a
// pipeline instruction alike, spelled once.
#pragma once

#include <string_view>

namespace kareus {

enum class Direction { kForward, kBackward };

/// "forward" or "backward" (the spelling of plans, profiles and measurement logs).
[[nodiscard]] std::string_view to_string(Direction direction);

/// Parses "forward" / "backward"; otherwise throws InputError "<origin> must be ...".
[[nodiscard]] Direction parse_direction(std::string_view text, std::string_view origin);

}  // namespace kareus
