// The frontier record (src/pipeline/frontier_record.h): which offered points stay.
#include "pipeline/frontier_record.h"

#include <vector>

#include <gtest/gtest.h>

namespace kareus::pipeline::detail {
namespace {

TEST(FrontierRecord, KeepsOnlyWhatNothingElseIsAsFastAndAsCheapAs) {
  FrontierRecord record;
  EXPECT_TRUE(record.offer(2.0, 10.0, 0));
  EXPECT_FALSE(record.offer(2.5, 10.0, 1));  // slower, no cheaper
  EXPECT_FALSE(record.offer(2.0, 10.0, 2));  // equal: the first offered stays
  EXPECT_TRUE(record.offer(3.0, 8.0, 3));
  EXPECT_TRUE(record.offer(1.0, 12.0, 4));
  EXPECT_EQ(record.indices(), (std::vector<int>{4, 0, 3}));
  // Faster and cheaper than 0 and 3: both go, 4 stays (faster still).
  EXPECT_TRUE(record.offer(1.5, 7.0, 5));
  EXPECT_EQ(record.indices(), (std::vector<int>{4, 5}));
  EXPECT_TRUE(record.dominated(1.5, 7.0));
  EXPECT_TRUE(record.dominated(4.0, 7.5));
  EXPECT_FALSE(record.dominated(1.2, 11.0));
  EXPECT_FALSE(record.dominated(0.5, 100.0));  // faster than everything kept
}

TEST(FrontierRecord, EqualWithinRoundingIsDominated) {
  FrontierRecord record;
  record.offer(1.0, 5.0, 0);
  EXPECT_TRUE(record.dominated(1.0 * (1 - 1e-14), 5.0 * (1 - 1e-14)));
  EXPECT_FALSE(record.dominated(1.0, 5.0 * (1 - 1e-9)));
}

}  // namespace
}  // namespace kareus::pipeline::detail
