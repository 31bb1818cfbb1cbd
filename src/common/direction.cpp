#include "kareus/common/direction.h"

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/common/json_fields.h"

namespace kareus {

std::string_view to_string(Direction direction) { return direction == Direction::kForward ? "forward" : "backward"; }

Direction parse_direction(std::string_view text, std::string_view origin) {
  if (text == "forward") return Direction::kForward;
  if (text == "backward") return Direction::kBackward;
  throw InputError(
      fmt::format("{} must be \"forward\" or \"backward\", found \"{}\"", origin, json_fields::short_text(text)));
}

}  // namespace kareus
