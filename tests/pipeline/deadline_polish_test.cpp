// The local search at an asked deadline (src/pipeline/pair_exchange.h, deadline_polish.h): a
// trade worked out by hand that no single-option move reaches, and the budget's and seeds' edges.
#include "pipeline/deadline_polish.h"

#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/pipeline/phillips_dessouky.h"
#include "pipeline/pair_exchange.h"

namespace kareus::pipeline::detail {
namespace {

ExecutionOption option(double time_s, double effective_energy_j) {
  return {time_s, effective_energy_j, effective_energy_j, 0, 0};
}

// One GPU's chain a -> b, no static power. a: 1 s / 10 J, 2 s / 5 J; b: 2 s / 4 J, 3 s / 1 J.
// By 4 s, a fast and b slow (11 J) is a local optimum for single moves (a slower misses the
// deadline, b faster costs more); a slower with b faster is 9 J.
PipelineDag chain_of_two() {
  PipelineDag dag;
  dag.stages = 1;
  dag.unit_time_s = 0.5;
  const std::vector<std::vector<ExecutionOption>> options = {{option(1, 10), option(2, 5)},
                                                             {option(2, 4), option(3, 1)}};
  for (int op = 0; op < 2; ++op) {
    dag.specs.emplace_back(options[op], dag.unit_time_s);
    dag.operations.push_back({OperationKind::kInstruction, {0, op, Direction::kForward, 0}, op});
  }
  dag.edges = {{0, 1}};
  return dag;
}

TEST(PairExchange, FindsTheTradeNoSingleMoveReaches) {
  const PipelineDag dag = chain_of_two();
  const Topology topology(dag);
  PairExchange exchange(dag, topology, 1);
  std::vector<int> options = {0, 1};
  std::int64_t budget = 1000;
  EXPECT_TRUE(exchange.improve(options, 4.0, budget));
  EXPECT_EQ(options, (std::vector<int>{1, 0}));
  EXPECT_DOUBLE_EQ(evaluate_plan(dag, options, 1).energy_j, 9);
  EXPECT_LT(budget, 1000);                               // it timed plans
  EXPECT_FALSE(exchange.improve(options, 4.0, budget));  // a local optimum
  // A tighter deadline leaves no room for the trade; a spent budget tries nothing.
  std::vector<int> tight = {0, 1};
  EXPECT_FALSE(exchange.improve(tight, 3.999, budget));
  EXPECT_EQ(tight, (std::vector<int>{0, 1}));
  std::vector<int> unpaid = {0, 1};
  std::int64_t spent = 0;
  EXPECT_FALSE(exchange.improve(unpaid, 4.0, spent));
  EXPECT_EQ(unpaid, (std::vector<int>{0, 1}));
}

TEST(DeadlinePolish, KeepsTheCheapestOfItsSeedsPolished) {
  const PipelineDag dag = chain_of_two();
  const Topology topology(dag);
  DeadlinePolish polish(dag, topology, 1);
  EXPECT_TRUE(polish.best_by({}, 4.0).empty());
  // From the all-fastest plan (3 s, 14 J) a slower b alone is the first cheaper move (11 J),
  // then the pair (9 J); from a plan 1 s late at 5 s, all-slowest is the cheapest (6 J).
  EXPECT_EQ(polish.best_by({{0, 0}}, 4.0), (std::vector<int>{1, 0}));
  EXPECT_EQ(polish.best_by({{0, 1}, {0, 0}}, 5.0), (std::vector<int>{1, 1}));
  // At the minimum time nothing slower fits: the seed comes back as it was.
  EXPECT_EQ(polish.best_by({{0, 0}}, 3.0), (std::vector<int>{0, 0}));
}

TEST(CheapestPlanBy, SearchesFromTheSeedsThatMeetTheDeadline) {
  const PipelineDag dag = chain_of_two();
  EXPECT_EQ(cheapest_plan_by(dag, 1, {{0, 0}}, 4.0), (std::vector<int>{1, 0}));
  // All-slowest takes 5 s: by 4 s it is no seed; alone it leaves nothing to search from.
  EXPECT_TRUE(cheapest_plan_by(dag, 1, {{1, 1}}, 4.0).empty());
  EXPECT_EQ(cheapest_plan_by(dag, 1, {{1, 1}, {0, 1}}, 4.0), (std::vector<int>{1, 0}));
  EXPECT_TRUE(cheapest_plan_by(dag, 1, {}, 4.0).empty());
  // No work: the seed comes back as it was.
  EXPECT_EQ(cheapest_plan_by(dag, 1, {{0, 0}}, 4.0, 0), (std::vector<int>{0, 0}));
}

TEST(CheapestPlanBy, BadInputIsAnInputError) {
  const PipelineDag dag = chain_of_two();
  EXPECT_THROW((void)cheapest_plan_by(dag, 0, {{0, 0}}, 4.0), InputError);
  EXPECT_THROW((void)cheapest_plan_by(dag, 1, {{0, 0}}, 0.0), InputError);
  EXPECT_THROW((void)cheapest_plan_by(dag, 1, {{0, 0}}, std::numeric_limits<double>::infinity()), InputError);
  EXPECT_THROW((void)cheapest_plan_by(dag, 1, {{0, 0, 0}}, 4.0), InputError);
  EXPECT_THROW((void)cheapest_plan_by(dag, 1, {{0, 2}}, 4.0), InputError);
  EXPECT_THROW((void)cheapest_plan_by(dag, 1, {{-1, 0}}, 4.0), InputError);
  EXPECT_THROW((void)cheapest_plan_by(dag, 1, {{0, 0}}, 4.0, -1), InputError);
}

}  // namespace
}  // namespace kareus::pipeline::detail
