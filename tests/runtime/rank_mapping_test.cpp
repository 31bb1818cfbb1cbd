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

TEST(RankMapping, GlobalRankInvertsMapRank) {
  const ParallelDegrees degrees{2, 2, 3, 2};
  for (int rank = 0; rank < 24; ++rank) EXPECT_EQ(global_rank(map_rank(rank, degrees), degrees), rank);
  EXPECT_THROW((void)global_rank({0, 2, 0, 0}, degrees), InputError);  // cp_rank 2 of cp 2
  EXPECT_THROW((void)global_rank({0, 0, 0, 3}, degrees), InputError);  // stage 3 of pp 3
}

TEST(RankMapping, GroupsAreTheRanksThatDifferOnlyInTheirCoordinates) {
  const ParallelDegrees degrees{2, 2, 3, 1};  // tp 2, cp 2, pp 3, dp 1: 12 ranks
  using Groups = std::vector<std::vector<int>>;
  EXPECT_EQ(parallel_groups(ParallelGroup::kTensor, degrees),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}}));
  EXPECT_EQ(parallel_groups(ParallelGroup::kContext, degrees),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}}));
  EXPECT_EQ(parallel_groups(ParallelGroup::kGradient, degrees),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}}));
  EXPECT_EQ(parallel_groups(ParallelGroup::kEmbedding, degrees), (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}}));
  const ParallelDegrees with_dp{1, 2, 2, 2};  // tp 1, cp 2, pp 2, dp 2: 8 ranks
  EXPECT_EQ(parallel_groups(ParallelGroup::kGradient, with_dp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(parallel_groups(ParallelGroup::kEmbedding, {2, 1, 1, 1}), (Groups{{0}, {1}}));
  EXPECT_EQ(parse_parallel_group("gradient", "group"), ParallelGroup::kGradient);
  EXPECT_THROW((void)parse_parallel_group("pp", "group"), InputError);
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
