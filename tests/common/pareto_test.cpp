#include "kareus/common/pareto.h"

#include <gtest/gtest.h>

namespace kareus {
namespace {

struct Point {
  double time_s;
  double cost;
  int id;
};

TEST(ParetoFilter, KeepsTheUndominatedFirstOfEqualsTimeAscending) {
  // (1, 9) (2, 5) (2, 4) (3, 6) (4, 4) (5, 1) (5, 1)': (2, 5) loses to (2, 4), (3, 6) to (2, 4),
  // (4, 4) ties (2, 4)'s cost so is dominated, and of the two (5, 1) the first stays.
  const std::vector<Point> front = pareto_filter(
      std::vector<Point>{{3, 6, 3}, {5, 1, 5}, {2, 5, 1}, {1, 9, 0}, {4, 4, 4}, {2, 4, 2}, {5, 1, 6}},
      [](const Point& point) { return point.time_s; }, [](const Point& point) { return point.cost; });
  std::vector<int> ids;
  for (const Point& point : front) ids.push_back(point.id);
  EXPECT_EQ(ids, (std::vector<int>{0, 2, 5}));
  EXPECT_TRUE(pareto_filter(
                  std::vector<Point>{}, [](const Point& p) { return p.time_s; }, [](const Point& p) { return p.cost; })
                  .empty());
}

}  // namespace
}  // namespace kareus
