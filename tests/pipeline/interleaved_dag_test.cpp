// The interleaved 1F1B DAG: its edges on a case small enough to list by hand, its makespan
// against a hand-run schedule, and against the iteration simulator on every small shape.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/pipeline/pipeline_dag.h"

namespace kareus::pipeline {
namespace {

ExecutionOption option(double time_s, double energy_j) { return make_execution_option(time_s, energy_j, 0, 0); }

/// Every chunk's F and B take `unit_s` (one option each).
OneFOneBConfig unit_config(int stages, int chunks, int microbatches, double unit_s = 1) {
  OneFOneBConfig config;
  config.microbatches = microbatches;
  config.unit_time_s = 1;
  config.chunks = chunks;
  config.stages.assign(static_cast<std::size_t>(stages * chunks), {{option(unit_s, 1)}, {option(unit_s, 1)}});
  return config;
}

/// "s0 F2c1": stage 0's forward of microbatch 2 on chunk 1.
std::string name(const Operation& operation) {
  const Instruction& i = operation.instruction;
  return fmt::format("s{} {}{}c{}", i.stage, i.type == Direction::kForward ? "F" : "B", i.microbatch, i.chunk);
}

/// The makespan of the DAG when every operation takes its first option: the longest path,
/// relaxed over the edges until nothing changes (no topological order assumed).
double longest_path_s(const PipelineDag& dag) {
  std::vector<double> end(dag.operations.size(), 0);
  for (std::size_t op = 0; op < dag.operations.size(); ++op)
    end[op] = dag.specs[dag.operations[op].spec].options().front().time_s;
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [before, after] : dag.edges) {
      const double start = end[before];
      const double finish = start + dag.specs[dag.operations[after].spec].options().front().time_s;
      if (finish > end[after]) {
        end[after] = finish;
        changed = true;
      }
    }
  }
  return *std::max_element(end.begin(), end.end());
}

TEST(InterleavedDag, TwoStagesTwoChunksFourMicrobatchesHasTheHandListedEdges) {
  const PipelineDag dag = build_one_f_one_b_dag(unit_config(2, 2, 4));
  EXPECT_EQ(dag.stages, 2);
  EXPECT_EQ(dag.chunks, 2);
  ASSERT_EQ(dag.operations.size(), 32U);
  // Megatron's order (warmup 4 on stage 0, 2 on stage 1; groups of 2 microbatches per chunk).
  const std::vector<std::vector<std::string>> orders = {
      {"s0 F0c0", "s0 F1c0", "s0 F0c1", "s0 F1c1", "s0 F2c0", "s0 B0c1", "s0 F3c0", "s0 B1c1", "s0 F2c1", "s0 B0c0",
       "s0 F3c1", "s0 B1c0", "s0 B2c1", "s0 B3c1", "s0 B2c0", "s0 B3c0"},
      {"s1 F0c0", "s1 F1c0", "s1 F0c1", "s1 B0c1", "s1 F1c1", "s1 B1c1", "s1 F2c0", "s1 B0c0", "s1 F3c0", "s1 B1c0",
       "s1 F2c1", "s1 B2c1", "s1 F3c1", "s1 B3c1", "s1 B2c0", "s1 B3c0"}};
  std::vector<std::string> names;
  for (const Operation& operation : dag.operations) names.push_back(name(operation));
  std::vector<std::string> expected_names = orders[0];
  expected_names.insert(expected_names.end(), orders[1].begin(), orders[1].end());
  EXPECT_EQ(names, expected_names);

  std::set<std::pair<std::string, std::string>> expected;
  for (const auto& order : orders) {
    for (std::size_t index = 0; index + 1 < order.size(); ++index) expected.emplace(order[index], order[index + 1]);
  }
  // Forward: s0 c0 -> s1 c0 -> s0 c1 -> s1 c1; backward the reverse.
  for (const auto& edge : std::vector<std::pair<const char*, const char*>>{
           {"s0 F0c0", "s1 F0c0"}, {"s0 F1c0", "s1 F1c0"}, {"s0 F2c0", "s1 F2c0"}, {"s0 F3c0", "s1 F3c0"},
           {"s1 F0c0", "s0 F0c1"}, {"s1 F1c0", "s0 F1c1"}, {"s1 F2c0", "s0 F2c1"}, {"s1 F3c0", "s0 F3c1"},
           {"s0 F0c1", "s1 F0c1"}, {"s0 F1c1", "s1 F1c1"}, {"s0 F2c1", "s1 F2c1"}, {"s0 F3c1", "s1 F3c1"},
           {"s1 B0c1", "s0 B0c1"}, {"s1 B1c1", "s0 B1c1"}, {"s1 B2c1", "s0 B2c1"}, {"s1 B3c1", "s0 B3c1"},
           {"s0 B0c1", "s1 B0c0"}, {"s0 B1c1", "s1 B1c0"}, {"s0 B2c1", "s1 B2c0"}, {"s0 B3c1", "s1 B3c0"},
           {"s1 B0c0", "s0 B0c0"}, {"s1 B1c0", "s0 B1c0"}, {"s1 B2c0", "s0 B2c0"}, {"s1 B3c0", "s0 B3c0"}}) {
    expected.emplace(edge.first, edge.second);
  }
  ASSERT_EQ(expected.size(), 30U + 24U);
  std::set<std::pair<std::string, std::string>> found;
  for (const auto& [before, after] : dag.edges)
    found.emplace(name(dag.operations[before]), name(dag.operations[after]));
  EXPECT_EQ(dag.edges.size(), found.size()) << "an edge twice";
  EXPECT_EQ(found, expected);
  // Each chunk's instructions take their own options: chunk v's F is spec 2v, its B 2v + 1.
  for (const Operation& operation : dag.operations) {
    const Instruction& i = operation.instruction;
    EXPECT_EQ(operation.spec, 2 * (i.chunk * 2 + i.stage) + (i.type == Direction::kBackward)) << name(operation);
  }
}

TEST(InterleavedDag, UnitDurationsGiveTheHandRunMakespan) {
  // Run by hand (every F and B one unit) in the orders above: stage 0's last backward B3c0
  // runs in [17, 18]. Without interleaving the same work (F and B of 2 units, the chunks of a
  // stage together) takes (4 + 2 - 1) x 4 = 20: interleaving halves the 4-unit bubble.
  const PipelineDag dag = build_one_f_one_b_dag(unit_config(2, 2, 4));
  EXPECT_DOUBLE_EQ(longest_path_s(dag), 18);
  const std::vector<int> fastest(dag.operations.size(), 0);
  EXPECT_DOUBLE_EQ(evaluate_plan(dag, fastest, 2).time_s, 18);
  EXPECT_DOUBLE_EQ(longest_path_s(build_one_f_one_b_dag(unit_config(2, 1, 4, 2))), 20);
}

TEST(InterleavedDag, MakespanEqualsTheIterationSimulatorOnEverySmallShape) {
  // Two independent readings of the same schedule: the DAG's longest path and the simulator's
  // event loop, with durations that differ per stage, chunk and direction.
  for (int stages = 2; stages <= 4; ++stages) {
    for (int chunks = 1; chunks <= 3; ++chunks) {
      for (int microbatches : {stages, 2 * stages, 3 * stages}) {
        SCOPED_TRACE(fmt::format("pp {} vpp {} microbatches {}", stages, chunks, microbatches));
        auto time_of = [&](int stage, int chunk, Direction type) {
          return 1.0 + 0.25 * stage + 0.5 * chunk + (type == Direction::kBackward ? 1.0 : 0.0);
        };
        OneFOneBConfig config;
        config.microbatches = microbatches;
        config.unit_time_s = 0.25;
        config.chunks = chunks;
        for (int position = 0; position < stages * chunks; ++position) {
          const int stage = position % stages, chunk = position / stages;
          config.stages.push_back({{option(time_of(stage, chunk, Direction::kForward), 1)},
                                   {option(time_of(stage, chunk, Direction::kBackward), 1)}});
        }
        const PipelineDag dag = build_one_f_one_b_dag(config);
        const IterationRun run = simulate_interleaved_one_f_one_b(
            stages, chunks, microbatches,
            [&](const Instruction& i) {
              return InstructionCost{time_of(i.stage, i.chunk, i.type), 1};
            },
            0, 1);
        EXPECT_NEAR(longest_path_s(dag), run.time_s, 1e-9);
        for (const StageRun& stage : run.stages) {
          EXPECT_EQ(stage.instructions.size(), static_cast<std::size_t>(2 * chunks * microbatches));
        }
      }
    }
  }
}

TEST(InterleavedDag, SolverFrontierRunsOnIt) {
  // Two options per instruction (1 unit at 3 J or 2 units at 1 J): the solver's fastest plan
  // is the all-fast makespan 18 and its slowest the all-slow one, 36 (every time doubled).
  OneFOneBConfig config = unit_config(2, 2, 4);
  for (StageOptions& stage : config.stages) {
    stage.forward = {option(1, 3), option(2, 1)};
    stage.backward = {option(1, 3), option(2, 1)};
  }
  const PhillipsDessoukyResult result = PhillipsDessouky(build_one_f_one_b_dag(config), {}).run();
  ASSERT_FALSE(result.iterations.empty());
  EXPECT_DOUBLE_EQ(result.iterations.front().time_s, 36);
  EXPECT_DOUBLE_EQ(result.iterations.back().time_s, 18);
}

TEST(InterleavedDag, RefusesShapesMegatronDoesNotRun) {
  auto message = [](const OneFOneBConfig& config) {
    try {
      (void)build_one_f_one_b_dag(config);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  OneFOneBConfig odd = unit_config(2, 2, 4);
  odd.stages.pop_back();
  EXPECT_EQ(message(odd), "1f1b dag: 3 chunk option lists are not 2 chunks per stage");
  EXPECT_EQ(message(unit_config(2, 2, 3)),
            "1f1b dag: 2 chunks per stage need >= 2 stages and microbatches divisible by the stages, found 2 stages "
            "and 3 microbatches");
  EXPECT_EQ(message(unit_config(1, 2, 4)),
            "1f1b dag: 2 chunks per stage need >= 2 stages and microbatches divisible by the stages, found 1 stages "
            "and 4 microbatches");
  OneFOneBConfig empty = unit_config(2, 2, 4);
  empty.stages[3].backward.clear();
  EXPECT_EQ(message(empty), "1f1b dag: stage 1 chunk 1 has no backward options");
  OneFOneBConfig zero = unit_config(2, 1, 4);
  zero.chunks = 0;
  EXPECT_EQ(message(zero), "1f1b dag: chunks must be >= 1, found 0");
}

}  // namespace
}  // namespace kareus::pipeline
