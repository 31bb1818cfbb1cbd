#include "kareus/common/direction.h"

#include <string>

#include <gtest/gtest.h>

#include "input_error.h"

namespace kareus {
namespace {

TEST(Direction, SpellingRoundTrips) {
  for (const Direction direction : {Direction::kForward, Direction::kBackward}) {
    EXPECT_EQ(parse_direction(to_string(direction), "test"), direction);
  }
  EXPECT_EQ(to_string(Direction::kForward), "forward");
  EXPECT_EQ(to_string(Direction::kBackward), "backward");
}

TEST(Direction, AnythingElseIsNamedWithItsOrigin) {
  // Case and abbreviations are refused: plans, profiles and logs spell it one way.
  for (const std::string text : {"Forward", "fwd", "", "backward "}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(test_common::error_of(
                  [&] { (void)parse_direction(text, "plan.json: stages[0].instructions[3]: field 'type'"); }),
              "plan.json: stages[0].instructions[3]: field 'type' must be \"forward\" or \"backward\", found \"" +
                  text + "\"");
  }
}

}  // namespace
}  // namespace kareus
