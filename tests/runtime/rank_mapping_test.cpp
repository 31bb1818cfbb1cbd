#include "kareus/runtime/rank_mapping.h"

#include <gtest/gtest.h>

#include "kareus/common/error.h"

namespace kareus::runtime {
namespace {

TEST(RankMapping, MegatronOrderTpThenCpThenDpThenPp) {
  const ParallelDegrees degrees{2, 2, 3, 2};  // tp 2, cp 2, pp 3, dp 2: 24 ranks
  struct Row {
    int rank;
    RankCoordinates expected;
  };
  const Row rows[] = {
      {0, {0, 0, 0, 0}}, {1, {1, 0, 0, 0}}, {2, {0, 1, 0, 0}},  {3, {1, 1, 0, 0}},  {4, {0, 0, 1, 0}},
      {7, {1, 1, 1, 0}}, {8, {0, 0, 0, 1}}, {13, {1, 0, 1, 1}}, {16, {0, 0, 0, 2}}, {23, {1, 1, 1, 2}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.rank);
    EXPECT_EQ(map_rank(row.rank, degrees), row.expected);
    EXPECT_EQ(map_rank(row.rank, degrees).stage, row.rank / (2 * 2 * 2));
  }
}

TEST(RankMapping, OutOfRangeRankNamesWorldSize) {
  for (int rank : {-1, 24, 100}) {
    SCOPED_TRACE(rank);
    try {
      (void)map_rank(rank, {2, 2, 3, 2});
      FAIL() << "expected InputError";
    } catch (const InputError& error) {
      EXPECT_EQ(std::string(error.what()),
                "rank " + std::to_string(rank) + " is out of range: world size is 24 (tp 2 x cp 2 x pp 3 x dp 2)");
    }
  }
}

TEST(RankMapping, NonPositiveDegreeIsNamed) {
  try {
    (void)map_rank(0, {1, 1, 0, 1});
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "parallel degree pp must be >= 1, found 0");
  }
}

TEST(RankMapping, AWorldPastTheLimitIsRefusedNotOverflowed) {
  // 2^31-1 in every degree used to overflow the 64-bit world size (and tp x cp in int).
  try {
    (void)map_rank(5, {2147483647, 2147483647, 2147483647, 2147483647});
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "world size tp 2147483647 x cp 2147483647 x pp 2147483647 x dp 2147483647 exceeds the limit of "
                 "1048576 ranks");
  }
  const RankCoordinates last = map_rank((1 << 20) - 1, {1024, 1024, 1, 1});
  EXPECT_EQ(last.tp_rank, 1023);
  EXPECT_EQ(last.cp_rank, 1023);
  EXPECT_EQ(last.stage, 0);
}

}  // namespace
}  // namespace kareus::runtime
