#include "kareus/common/nelder_mead.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kareus {
namespace {

TEST(NelderMead, FindsTheMinimumOfAShiftedQuadraticAndCountsEvaluations) {
  int calls = 0;
  auto bowl = [&](const std::vector<double>& x) {
    ++calls;
    return (x[0] - 3) * (x[0] - 3) + 10 * (x[1] + 1) * (x[1] + 1) + 2;
  };
  int evaluations = 0;
  const std::vector<double> best = nelder_mead(bowl, {0, 0}, 1, 2000, 1e-14, evaluations);
  EXPECT_NEAR(best[0], 3, 1e-4);
  EXPECT_NEAR(best[1], -1, 1e-4);
  EXPECT_EQ(evaluations, calls);
  EXPECT_LE(evaluations, 2000 + 2);  // the budget may be overrun by at most one shrink (dims + 1 - 1)
}

TEST(NelderMead, StopsAtTheBudgetAndAddsToTheCountGiven) {
  int evaluations = 100;                                           // evaluations of an earlier restart
  auto slope = [](const std::vector<double>& x) { return x[0]; };  // no minimum: only the budget stops it
  (void)nelder_mead(slope, {0}, 1, 150, 1e-12, evaluations);
  EXPECT_GE(evaluations, 150);
  EXPECT_LE(evaluations, 152);
}

}  // namespace
}  // namespace kareus
