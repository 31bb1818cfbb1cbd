#include "pipeline/max_flow.h"

#include <limits>

#include <gtest/gtest.h>

namespace kareus::pipeline::detail {
namespace {

TEST(MaxFlow, ClassicNetworkAndMinCut) {
  // CLRS figure 26.1: max flow 23; the min cut separates {s, v1, v2, v4} from {v3, t}.
  MaxFlow flow(6);
  const int s = 0, v1 = 1, v2 = 2, v3 = 3, v4 = 4, t = 5;
  const int edges[][3] = {{s, v1, 16}, {s, v2, 13}, {v1, v3, 12}, {v2, v1, 4}, {v2, v4, 14},
                          {v3, v2, 9}, {v3, t, 20}, {v4, v3, 7},  {v4, t, 4}};
  std::vector<int> ids;
  for (const auto& edge : edges) ids.push_back(flow.add_edge(edge[0], edge[1]));
  flow.finalize();
  for (std::size_t index = 0; index < ids.size(); ++index) flow.set_capacity(ids[index], edges[index][2]);
  EXPECT_DOUBLE_EQ(flow.run(s, t, 1e-12), 23);
  EXPECT_TRUE(flow.source_side(s));
  EXPECT_TRUE(flow.source_side(v1));
  EXPECT_TRUE(flow.source_side(v2));
  EXPECT_TRUE(flow.source_side(v4));
  EXPECT_FALSE(flow.source_side(v3));
  EXPECT_FALSE(flow.source_side(t));
}

TEST(MaxFlow, InfiniteArcsAndCapacityResets) {
  // s -inf-> a -2.5-> t, s -1-> b -inf-> t: flow 3.5; then change capacities in place.
  MaxFlow flow(4);
  const int sa = flow.add_edge(0, 1), at = flow.add_edge(1, 3), sb = flow.add_edge(0, 2), bt = flow.add_edge(2, 3);
  flow.finalize();
  const double infinity = std::numeric_limits<double>::infinity();
  flow.set_capacity(sa, infinity);
  flow.set_capacity(at, 2.5);
  flow.set_capacity(sb, 1);
  flow.set_capacity(bt, infinity);
  EXPECT_DOUBLE_EQ(flow.run(0, 3, 1e-12), 3.5);
  EXPECT_TRUE(flow.source_side(1));
  EXPECT_FALSE(flow.source_side(2));
  flow.set_capacity(sa, infinity);
  flow.set_capacity(at, 0.25);
  flow.set_capacity(sb, 0);
  flow.set_capacity(bt, infinity);
  EXPECT_DOUBLE_EQ(flow.run(0, 3, 1e-12), 0.25);
}

}  // namespace
}  // namespace kareus::pipeline::detail
