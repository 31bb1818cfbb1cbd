#include "kareus/planner/solved_plan.h"

#include <vector>

#include <gtest/gtest.h>

namespace kareus::planner {
namespace {

// Two stages x two microbatches; forwards have knobs 10/11, backwards 20/21/22 (slowest last).
pipeline::PipelineDag two_stage_dag() {
  pipeline::OneFOneBConfig config;
  config.microbatches = 2;
  config.unit_time_s = 0.001;
  for (int stage = 0; stage < 2; ++stage) {
    config.stages.push_back({{{0.010, 5, 0, 10, 0}, {0.020, 4, 0, 11, 0}},
                             {{0.020, 9, 0, 20, 0}, {0.030, 8, 0, 21, 0}, {0.040, 7, 0, 22, 0}}});
  }
  return pipeline::build_one_f_one_b_dag(config);
}

TEST(PlanFromOptions, EachInstructionGetsItsOwnOptionsKnobInOneFOneBOrder) {
  const pipeline::PipelineDag dag = two_stage_dag();
  // Option index = microbatch for forwards, 2 - microbatch for backwards.
  std::vector<int> options;
  for (const pipeline::Operation& operation : dag.operations) {
    const int microbatch = operation.instruction.microbatch;
    options.push_back(operation.instruction.type == Direction::kForward ? microbatch : 2 - microbatch);
  }
  std::vector<KnobChoice> seen;
  const plan::Plan solved = plan_from_options(dag, options, "{\"x\":1}",
                                              [&](const KnobChoice& choice, plan::PlannedInstruction& instruction) {
                                                seen.push_back(choice);
                                                instruction.freq_mhz = 1000 + choice.knob + 100 * choice.stage;
                                              });
  EXPECT_EQ(solved.workload_json, "{\"x\":1}");
  EXPECT_EQ(solved.predicted_time_s, 0);
  ASSERT_EQ(solved.stages.size(), 2U);
  ASSERT_EQ(seen.size(), 8U);
  // Stage 1 (last) runs F0 B0 F1 B1; stage 0 runs F0 F1 B0 B1.
  const std::vector<std::pair<Direction, int>> stage0 = {
      {Direction::kForward, 0}, {Direction::kForward, 1}, {Direction::kBackward, 0}, {Direction::kBackward, 1}};
  const std::vector<int> stage0_clocks = {1010, 1011, 1022, 1021};
  const std::vector<int> stage1_clocks = {1110, 1122, 1111, 1121};
  for (int stage = 0; stage < 2; ++stage) {
    const plan::StagePlan& planned = solved.stages[stage];
    EXPECT_EQ(planned.stage, stage);
    ASSERT_EQ(planned.instructions.size(), 4U);
    for (std::size_t index = 0; index < 4; ++index) {
      EXPECT_EQ(planned.instructions[index].freq_mhz, (stage == 0 ? stage0_clocks : stage1_clocks)[index]);
    }
  }
  for (std::size_t index = 0; index < 4; ++index) {
    EXPECT_EQ(solved.stages[0].instructions[index].type, stage0[index].first);
    EXPECT_EQ(solved.stages[0].instructions[index].microbatch, stage0[index].second);
  }
}

}  // namespace
}  // namespace kareus::planner
