#include "kareus/common/evenly_spread.h"

#include <gtest/gtest.h>

namespace kareus {
namespace {

TEST(EvenlySpread, KeepsBothEndsAndRoundsEvenSteps) {
  // 11 items, 5 samples: steps of 10/4 = 2.5, rounded half away from zero.
  EXPECT_EQ(evenly_spread_positions(11, 5), (std::vector<std::size_t>{0, 3, 5, 8, 10}));
  EXPECT_EQ(evenly_spread_positions(10, 4), (std::vector<std::size_t>{0, 3, 6, 9}));
  EXPECT_EQ(evenly_spread_positions(7, 2), (std::vector<std::size_t>{0, 6}));
  EXPECT_EQ(evenly_spread_positions(7, 1), (std::vector<std::size_t>{0}));
  EXPECT_TRUE(evenly_spread_positions(7, 0).empty());
  EXPECT_TRUE(evenly_spread_positions(0, 3).empty());
  // More samples than items: every item once.
  EXPECT_EQ(evenly_spread_positions(3, 8), (std::vector<std::size_t>{0, 1, 2}));
}

TEST(EvenlySpread, DistinctAscendingAndAsManyAsAsked) {
  for (std::size_t count = 1; count <= 60; ++count) {
    for (std::size_t samples = 1; samples <= count; ++samples) {
      const std::vector<std::size_t> positions = evenly_spread_positions(count, samples);
      ASSERT_EQ(positions.size(), samples) << count << " " << samples;
      EXPECT_EQ(positions.front(), 0u);
      if (samples > 1) {
        EXPECT_EQ(positions.back(), count - 1);
      }
      for (std::size_t index = 1; index < positions.size(); ++index) ASSERT_LT(positions[index - 1], positions[index]);
    }
  }
}

}  // namespace
}  // namespace kareus
