// Incremental re-timing (src/pipeline/dag_timing.h) and the walks' incremental slack
// reclamation (src/pipeline/plan_retimer.h) against full passes written out here.
#include "pipeline/plan_retimer.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/dag_timing.h"

namespace kareus::pipeline::detail {
namespace {

ExecutionOption option(double time_s, double effective_energy_j) {
  return {time_s, effective_energy_j, effective_energy_j, 0, 0};
}

// A random DAG: `count` operations, each edge from a lower to a higher index of a random
// permutation (so acyclic, in no particular index order), each operation its own options
// (2-7 random ones, Pareto-filtered; a coarse unit so some options share a quantized time and
// are not representatives).
PipelineDag random_dag(std::mt19937& random, int count) {
  PipelineDag dag;
  dag.stages = 1;
  dag.unit_time_s = std::uniform_real_distribution<double>(0.05, 0.6)(random);
  dag.static_power_w = std::uniform_real_distribution<double>(0, 3)(random);
  std::vector<int> rank(count);
  for (int op = 0; op < count; ++op) rank[op] = op;
  std::shuffle(rank.begin(), rank.end(), random);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int op = 0; op < count; ++op) {
    std::vector<ExecutionOption> options;
    const int option_count = std::uniform_int_distribution<int>(2, 7)(random);
    for (int index = 0; index < option_count; ++index)
      options.push_back(option(0.1 + 2 * unit(random), 1 + 9 * unit(random)));
    dag.specs.emplace_back(options, dag.unit_time_s);
    dag.operations.push_back({OperationKind::kInstruction, {}, op});
  }
  const double density = std::uniform_real_distribution<double>(0.5, 3)(random) / count;
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b < count; ++b) {
      if (rank[a] < rank[b] && unit(random) < density) dag.edges.emplace_back(a, b);
    }
  }
  return dag;
}

double time_of(const PipelineDag& dag, int op, int index) { return dag.specs[op].options()[index].time_s; }

// Full passes over the whole DAG, the straightforward way: starts forward in topological order,
// then tails (longest path from an operation's end to the end) backward.
struct FullTimes {
  std::vector<double> start_s, tail_s;
  double makespan_s = 0;
};

FullTimes full_times(const PipelineDag& dag, const Topology& topology, const std::vector<int>& options) {
  FullTimes times;
  times.start_s.assign(options.size(), 0);
  times.tail_s.assign(options.size(), 0);
  for (const int op : topology.order) {
    for (const auto& [before, after] : dag.edges) {
      if (after == op)
        times.start_s[op] = std::max(times.start_s[op], times.start_s[before] + time_of(dag, before, options[before]));
    }
    times.makespan_s = std::max(times.makespan_s, times.start_s[op] + time_of(dag, op, options[op]));
  }
  for (auto op = topology.order.rbegin(); op != topology.order.rend(); ++op) {
    for (const auto& [before, after] : dag.edges) {
      if (before == *op)
        times.tail_s[*op] = std::max(times.tail_s[*op], time_of(dag, after, options[after]) + times.tail_s[after]);
    }
  }
  return times;
}

// The rule PlanRetimer::slow_down follows, over the whole DAG: one option slower for `op`, then
// a pass over the representatives and one over every option, each visiting every operation
// latest first with its window (makespan - tail) - start from full passes.
std::vector<int> full_slow_down(const PipelineDag& dag, const Topology& topology, std::vector<int> options, int op) {
  ++options[op];
  for (const bool representatives_only : {true, false}) {
    const FullTimes before = full_times(dag, topology, options);
    std::vector<double> tail_s(options.size(), 0);
    for (auto at = topology.order.rbegin(); at != topology.order.rend(); ++at) {
      const int visited = *at;
      for (const auto& [from, to] : dag.edges) {
        if (from == visited) tail_s[visited] = std::max(tail_s[visited], time_of(dag, to, options[to]) + tail_s[to]);
      }
      const double window_s = (before.makespan_s - tail_s[visited]) - before.start_s[visited];
      const std::vector<ExecutionOption>& choices = dag.specs[visited].options();
      const std::vector<int>& representatives = dag.specs[visited].representatives();
      for (int index = options[visited] + 1;
           index < static_cast<int>(choices.size()) && choices[index].time_s <= window_s; ++index) {
        const bool representative =
            std::find(representatives.begin(), representatives.end(), index) != representatives.end();
        if (!representatives_only || representative) options[visited] = index;
      }
    }
  }
  return options;
}

double full_energy(const PipelineDag& dag, const std::vector<int>& options, double makespan_s) {
  double effective = 0;
  for (std::size_t op = 0; op < options.size(); ++op)
    effective += dag.specs[op].options()[options[op]].effective_energy_j;
  return effective + dag.static_power_w * makespan_s * 1;
}

void expect_times_equal(const IncrementalTiming& timing, const FullTimes& full) {
  EXPECT_EQ(timing.makespan_s(), full.makespan_s);
  for (std::size_t op = 0; op < full.start_s.size(); ++op) {
    ASSERT_EQ(timing.start_s(static_cast<int>(op)), full.start_s[op]) << "start of " << op;
    ASSERT_EQ(timing.tail_s(static_cast<int>(op)), full.tail_s[op]) << "tail of " << op;
  }
}

std::vector<int> options_of(const PlanRetimer& retimer) { return {retimer.options().begin(), retimer.options().end()}; }

TEST(PlanRetimer, SlowingOneOperationLetsAParallelOneReclaimItsNewSlack) {
  // A and B in parallel, static power 0: A 1.0 s -> 2.0 s raises the makespan to 2.0 s, and B,
  // at 1.5 s, then fits its 2.0 s option (the next, 2.5 s, does not).
  PipelineDag dag;
  dag.stages = 1;
  dag.unit_time_s = 0.5;
  dag.specs.emplace_back(std::vector<ExecutionOption>{option(1.0, 10), option(2.0, 8), option(3.0, 7)}, 0.5);
  dag.specs.emplace_back(
      std::vector<ExecutionOption>{option(1.0, 10), option(1.5, 9), option(2.0, 8.5), option(2.5, 8)}, 0.5);
  dag.operations = {{OperationKind::kInstruction, {}, 0}, {OperationKind::kInstruction, {}, 1}};
  const Topology topology(dag);
  PlanRetimer retimer(dag, topology, 1, false);
  retimer.load(std::vector<int>{0, 1});
  EXPECT_DOUBLE_EQ(retimer.evaluation().time_s, 1.5);
  EXPECT_DOUBLE_EQ(retimer.evaluation().energy_j, 19);
  const PlanEvaluation slower = retimer.slow_down(0);
  EXPECT_EQ(options_of(retimer), (std::vector<int>{1, 2}));
  EXPECT_DOUBLE_EQ(slower.time_s, 2.0);
  EXPECT_DOUBLE_EQ(slower.energy_j, 16.5);
  retimer.rollback();
  EXPECT_EQ(options_of(retimer), (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(retimer.evaluation().time_s, 1.5);
}

TEST(IncrementalTiming, EqualsFullPassesAfterEveryChange) {
  std::mt19937 random(11);
  for (int instance = 0; instance < 40; ++instance) {
    const PipelineDag dag = random_dag(random, std::uniform_int_distribution<int>(1, 40)(random));
    const Topology topology(dag);
    const int count = static_cast<int>(dag.operations.size());
    std::vector<int> options(count, 0);
    std::vector<double> duration_s(count);
    for (int op = 0; op < count; ++op) duration_s[op] = time_of(dag, op, 0);
    IncrementalTiming timing(topology);
    timing.assign(duration_s);
    expect_times_equal(timing, full_times(dag, topology, options));
    const std::vector<int> committed = options;
    for (int change = 0; change < 10; ++change) {
      // A few operations one option slower, then re-timed.
      for (int moved = 0; moved < 3; ++moved) {
        const int op = std::uniform_int_distribution<int>(0, count - 1)(random);
        if (options[op] + 1 < static_cast<int>(dag.specs[op].options().size())) ++options[op];
        timing.set_duration(op, time_of(dag, op, options[op]));
      }
      timing.retime_starts();
      timing.retime_tails({}, [](int) {});
      expect_times_equal(timing, full_times(dag, topology, options));
    }
    timing.rollback();
    expect_times_equal(timing, full_times(dag, topology, committed));
  }
}

TEST(PlanRetimer, IncrementalReclaimEqualsFullPassesOnRandomDags) {
  std::mt19937 random(5);
  int moves = 0, reclaimed = 0;
  for (int instance = 0; instance < 60; ++instance) {
    const PipelineDag dag = random_dag(random, std::uniform_int_distribution<int>(2, 40)(random));
    const Topology topology(dag);
    const int count = static_cast<int>(dag.operations.size());
    PlanRetimer retimer(dag, topology, 1, true);
    std::vector<int> plan(count);
    for (int op = 0; op < count; ++op)
      plan[op] = std::uniform_int_distribution<int>(0, static_cast<int>(dag.specs[op].options().size()) - 1)(random);
    retimer.load(plan);
    // A walk: each step tries every possible move (rolled back), then keeps one of them.
    for (int step = 0; step < 6; ++step) {
      std::vector<int> movable;
      for (int op = 0; op < count; ++op) {
        if (plan[op] + 1 < static_cast<int>(dag.specs[op].options().size())) movable.push_back(op);
      }
      if (movable.empty()) break;
      for (const int op : movable) {
        const std::vector<int> expected = full_slow_down(dag, topology, plan, op);
        const FullTimes expected_times = full_times(dag, topology, expected);
        const PlanEvaluation got = retimer.slow_down(op);
        ASSERT_EQ(options_of(retimer), expected) << "instance " << instance << " step " << step << " op " << op;
        EXPECT_EQ(got.time_s, expected_times.makespan_s);
        EXPECT_EQ(got.energy_j, full_energy(dag, expected, expected_times.makespan_s));
        expect_times_equal(retimer.timing(), expected_times);
        ++moves;
        for (int other = 0; other < count; ++other) reclaimed += other != op && expected[other] != plan[other];
        retimer.rollback();
        ASSERT_EQ(options_of(retimer), plan);
        expect_times_equal(retimer.timing(), full_times(dag, topology, plan));
      }
      // Keep one: committed as tried, or saved, rolled back and restored (as the walks do).
      const int kept = movable[std::uniform_int_distribution<std::size_t>(0, movable.size() - 1)(random)];
      retimer.slow_down(kept);
      if (step % 2 == 0) {
        retimer.commit();
      } else {
        retimer.save();
        retimer.rollback();
        retimer.restore();
      }
      plan = full_slow_down(dag, topology, plan, kept);
      ASSERT_EQ(options_of(retimer), plan);
      expect_times_equal(retimer.timing(), full_times(dag, topology, plan));
    }
  }
  // The instances exercise the reclamation, not only the moves themselves.
  EXPECT_GT(moves, 500);
  EXPECT_GT(reclaimed, 50);
}

}  // namespace
}  // namespace kareus::pipeline::detail
