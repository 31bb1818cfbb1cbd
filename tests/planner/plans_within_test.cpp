// kareus's plans within the baselines' achieved times (src/planner/plans_within.h), against a
// stand-in simulator whose plans run a fixed fraction slower than the solver predicts (as clock
// switches make them): each time gets a plan that runs within it, as cheap as the search at the
// deadline that overshoot leaves, and never costlier than the frontier's plans that run within it.
#include "planner/plans_within.h"

#include <algorithm>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kareus/planner/solved_plan.h"

namespace kareus::planner {
namespace {

constexpr double kOvershoot = 1.003;  // achieved time over predicted
constexpr int kGpus = 2;

// Two stages x four microbatches; six options per instruction, each 10% slower than the last
// and cheaper by a convex step.
pipeline::PipelineDag two_stage_dag() {
  pipeline::OneFOneBConfig config;
  config.microbatches = 4;
  config.unit_time_s = 0.001;
  config.static_power_w = 50;
  auto options = [](double time_s, double energy_j) {
    std::vector<pipeline::ExecutionOption> made;
    for (int k = 0; k < 6; ++k) {
      const double step = static_cast<double>(k);
      made.push_back({time_s * (1 + 0.1 * step), energy_j * (1 - 0.15 * step + 0.012 * step * step), 0, k, 0});
    }
    return made;
  };
  config.stages.push_back({options(0.05, 10), options(0.1, 20)});
  config.stages.push_back({options(0.06, 12), options(0.11, 21)});
  return pipeline::build_one_f_one_b_dag(config);
}

pipeline::PhillipsDessoukyResult solve(const pipeline::PipelineDag& dag) {
  pipeline::PhillipsDessoukyOptions solver;
  solver.gpus = kGpus;
  return pipeline::PhillipsDessouky(dag, solver).run();
}

// The plan as a stand-in simulator runs it: `overshoot` x the predicted time, the predicted energy.
MethodPoint run_slower(const pipeline::PipelineDag& dag, std::span<const int> options, double overshoot) {
  const pipeline::PlanEvaluation predicted = pipeline::evaluate_plan(dag, options, kGpus);
  MethodPoint point;
  point.predicted_time_s = predicted.time_s;
  point.predicted_energy_j = predicted.energy_j;
  point.time_s = predicted.time_s * overshoot;
  point.energy_j = predicted.energy_j;
  return point;
}

double least_energy_within(const std::vector<MethodPoint>& points, double time_s) {
  double least = std::numeric_limits<double>::infinity();
  for (const MethodPoint& point : points) {
    if (point.time_s <= time_s) least = std::min(least, point.energy_j);
  }
  return least;
}

TEST(PlansWithin, EachTimeGetsThePlanSearchedAtTheDeadlineItsOvershootLeaves) {
  const pipeline::PipelineDag dag = two_stage_dag();
  const pipeline::PhillipsDessoukyResult solved = solve(dag);
  const RunPlan run = [&dag](std::span<const int> options) { return run_slower(dag, options, kOvershoot); };
  std::vector<MethodPoint> frontier;
  for (const int index : solved.frontier) frontier.push_back(run(solved.options_of(index)));
  const double fastest_s = frontier.front().time_s;
  const double slowest_s = frontier.back().time_s;
  std::vector<double> times_s;
  for (int k = 0; k <= 8; ++k) times_s.push_back(fastest_s + (slowest_s - fastest_s) * k / 8);
  times_s.push_back(fastest_s * 0.99);  // faster than any plan runs: nothing for it

  const std::vector<MethodPoint> points = plans_within(dag, solved, kGpus, times_s, run);
  EXPECT_EQ(least_energy_within(points, fastest_s * 0.99), std::numeric_limits<double>::infinity());
  int cheaper = 0;
  for (int k = 0; k <= 8; ++k) {
    const double time_s = times_s[k];
    SCOPED_TRACE(time_s);
    const double found_j = least_energy_within(points, time_s);
    // Never above the frontier's plans that run within the time (what the job kept before).
    const double frontier_j = least_energy_within(frontier, time_s);
    ASSERT_LE(found_j, frontier_j * (1 + 1e-12));
    cheaper += found_j < frontier_j * (1 - 1e-9);
    // As cheap as the search at the deadline the overshoot leaves, from the frontier's plan by it.
    const double deadline_s = time_s / kOvershoot;
    const int seed = frontier_position_by(solved, deadline_s);
    ASSERT_GE(seed, 0);
    const std::vector<int> searched =
        pipeline::cheapest_plan_by(dag, kGpus, {solved.options_of(solved.frontier[seed])}, deadline_s, kSearchWork);
    EXPECT_LE(found_j, pipeline::evaluate_plan(dag, searched, kGpus).energy_j * (1 + 1e-9));
  }
  // The frontier's plan by each time runs past it; the search finds cheaper plans within.
  EXPECT_GE(cheaper, 4);
}

TEST(PlansWithin, KeepsEveryPlanItRanWhenOvershootsDiffer) {
  // As with clock switches: the more operations whose option differs from the next one's, the
  // more a plan overshoots (0.2% to 1%). A plan that ran past one time may be the cheapest
  // within a slower one, so every plan run comes back, and each time still gets one within it.
  const pipeline::PipelineDag dag = two_stage_dag();
  const pipeline::PhillipsDessoukyResult solved = solve(dag);
  int runs = 0;
  const RunPlan run = [&dag, &runs](std::span<const int> options) {
    ++runs;
    int switches = 0;
    for (std::size_t op = 0; op + 1 < options.size(); ++op) switches += options[op] != options[op + 1];
    return run_slower(dag, options, 1.002 + 0.008 * switches / static_cast<double>(options.size() - 1));
  };
  std::vector<MethodPoint> frontier;
  for (const int index : solved.frontier) frontier.push_back(run(solved.options_of(index)));
  const double fastest_s = frontier.front().time_s;
  const double slowest_s = frontier.back().time_s;
  std::vector<double> times_s;
  for (int k = 1; k <= 8; ++k) times_s.push_back(fastest_s + (slowest_s - fastest_s) * k / 8);
  runs = 0;
  const std::vector<MethodPoint> points = plans_within(dag, solved, kGpus, times_s, run);
  EXPECT_EQ(static_cast<int>(points.size()), runs);
  EXPECT_GT(runs, static_cast<int>(2 * times_s.size()));  // it searched, and some searches again
  for (const double time_s : times_s) {
    SCOPED_TRACE(time_s);
    EXPECT_LE(least_energy_within(points, time_s), least_energy_within(frontier, time_s) * (1 + 1e-12));
  }
}

}  // namespace
}  // namespace kareus::planner
