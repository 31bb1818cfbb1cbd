// The passes on real times (src/pipeline/real_time_walks.h) and plan realization
// (src/pipeline/plan_realization.h) on DAGs small enough to work out by hand.
#include "pipeline/real_time_walks.h"

#include <vector>

#include <gtest/gtest.h>

#include "pipeline/plan_realization.h"

namespace kareus::pipeline::detail {
namespace {

ExecutionOption option(double time_s, double effective_energy_j) {
  return {time_s, effective_energy_j, effective_energy_j, 0, 0};
}

PipelineDag dag_of(const std::vector<std::vector<ExecutionOption>>& options,
                   const std::vector<std::pair<int, int>>& edges, double static_power_w) {
  PipelineDag dag;
  dag.stages = 1;
  dag.unit_time_s = 0.1;
  dag.static_power_w = static_power_w;
  for (int op = 0; op < static_cast<int>(options.size()); ++op) {
    dag.specs.emplace_back(options[op], dag.unit_time_s);
    dag.operations.push_back({OperationKind::kInstruction, {}, op});
  }
  dag.edges = edges;
  return dag;
}

TEST(PlanRealization, EvaluatesAndReclaimsTheShortBranchsSlack) {
  // 0 -> 1 and 0 -> 2: 1 is long (3 s), 2 has 1.5 s of float at its fastest.
  const PipelineDag dag =
      dag_of({{option(1, 4)}, {option(3, 6)}, {option(1.5, 9), option(2.5, 5), option(3.5, 2)}}, {{0, 1}, {0, 2}}, 2.0);
  const Topology topology(dag);
  std::vector<double> start(3), latest_finish(3);
  std::vector<int> options = {0, 0, 0};
  const PlanEvaluation fastest = evaluate(dag, topology, options, 1, start);
  EXPECT_DOUBLE_EQ(fastest.time_s, 4.0);
  EXPECT_DOUBLE_EQ(fastest.energy_j, 4 + 6 + 9 + 2.0 * 4.0);
  reclaim_slack(dag, topology, options, start, latest_finish, true);
  EXPECT_EQ(options, (std::vector<int>{0, 0, 1}));  // 2.5 s fits its 3 s window, 3.5 s does not
  EXPECT_DOUBLE_EQ(evaluate_plan(dag, options, 1).energy_j, 4 + 6 + 5 + 2.0 * 4.0);
}

TEST(RealTimeWalks, RepairSpeedsUpTheCheapestCriticalOperationFirst) {
  // A chain 0 -> 1; the minimum is 1 + 1 = 2 s. From the slowest plan (4 s), 0 is cheaper per
  // second saved (1 J/s against 3 J/s) but both must reach their fastest to make 2 s.
  const PipelineDag dag =
      dag_of({{option(1, 7), option(2, 6), option(3, 5)}, {option(1, 8), option(2, 5)}}, {{0, 1}}, 0.0);
  const Topology topology(dag);
  RealTimeWalks walks(dag, topology, 1, false);
  std::vector<int> options = {2, 1};
  walks.repair_to_minimum_time(options);
  EXPECT_EQ(options, (std::vector<int>{0, 0}));
  // With a short 1 in parallel, it is never on a critical path: it keeps its slower option.
  const PipelineDag parallel =
      dag_of({{option(1, 7), option(2, 6), option(3, 5)}, {option(0.5, 8), option(0.8, 5)}}, {}, 0.0);
  const Topology parallel_topology(parallel);
  RealTimeWalks parallel_walks(parallel, parallel_topology, 1, false);
  options = {2, 1};
  parallel_walks.repair_to_minimum_time(options);
  EXPECT_EQ(options, (std::vector<int>{0, 1}));
}

TEST(RealTimeWalks, WalkSlowerKeepsEveryNewPlanInRateOrder) {
  // One operation, four options: from the fastest, each step one option slower; with no static
  // power every step saves energy, so every plan is new.
  const PipelineDag dag = dag_of({{option(1, 10), option(2, 7), option(3, 5), option(4, 4)}}, {}, 0.0);
  const Topology topology(dag);
  RealTimeWalks walks(dag, topology, 1, false);
  FrontierRecord frontier;
  frontier.offer(1, 10, 0);
  std::vector<std::pair<double, double>> kept;
  const RealTimeWalks::KeepPlan keep = [&](std::span<const int> options, const PlanEvaluation& evaluated) {
    EXPECT_EQ(options.size(), 1U);
    kept.emplace_back(evaluated.time_s, evaluated.energy_j);
    frontier.offer(evaluated.time_s, evaluated.energy_j, static_cast<int>(kept.size()));
  };
  walks.walk_slower(std::vector<int>{0}, 10, 10, frontier, keep);
  EXPECT_EQ(kept, (std::vector<std::pair<double, double>>{{2, 7}, {3, 5}, {4, 4}}));
  // Static power 1.5 W: the steps save 3 - 1.5, 2 - 1.5 and 1 - 1.5 J, so the walk stops
  // before the last.
  const PipelineDag powered = dag_of({{option(1, 10), option(2, 7), option(3, 5), option(4, 4)}}, {}, 1.5);
  const Topology powered_topology(powered);
  RealTimeWalks powered_walks(powered, powered_topology, 1, false);
  FrontierRecord powered_frontier;
  kept.clear();
  const RealTimeWalks::KeepPlan keep_powered = [&](std::span<const int>, const PlanEvaluation& evaluated) {
    kept.emplace_back(evaluated.time_s, evaluated.energy_j);
    powered_frontier.offer(evaluated.time_s, evaluated.energy_j, static_cast<int>(kept.size()));
  };
  powered_walks.walk_slower(std::vector<int>{0}, 10, 10, powered_frontier, keep_powered);
  EXPECT_EQ(kept, (std::vector<std::pair<double, double>>{{2, 7 + 3}, {3, 5 + 4.5}}));
}

TEST(RealTimeWalks, WalkFasterFromTheSlowestKeepsEveryStepToTheMinimum) {
  // A chain 0 -> 1 from the slowest plan (5 s, 10 J): 0 is the cheaper to speed up (1 J/s
  // against 3 J/s) until it is at its fastest, then 1.
  const PipelineDag dag =
      dag_of({{option(1, 7), option(2, 6), option(3, 5)}, {option(1, 8), option(2, 5)}}, {{0, 1}}, 0.0);
  const Topology topology(dag);
  RealTimeWalks walks(dag, topology, 1, false);
  FrontierRecord frontier;
  std::vector<std::pair<double, double>> kept;
  const RealTimeWalks::KeepPlan keep = [&](std::span<const int>, const PlanEvaluation& evaluated) {
    kept.emplace_back(evaluated.time_s, evaluated.energy_j);
    frontier.offer(evaluated.time_s, evaluated.energy_j, static_cast<int>(kept.size()));
  };
  walks.walk_faster(std::vector<int>{2, 1}, 10, frontier, keep);
  EXPECT_EQ(kept, (std::vector<std::pair<double, double>>{{4, 11}, {3, 12}, {2, 15}}));
}

}  // namespace
}  // namespace kareus::pipeline::detail
