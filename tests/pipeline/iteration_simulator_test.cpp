#include "kareus/pipeline/iteration_simulator.h"

#include <gtest/gtest.h>

namespace kareus::pipeline {
namespace {

TEST(IterationSimulator, HandComputedTwoStagePipeline) {
  // F = 1 s, B = 2 s on both stages, 2 microbatches. Stage 0: F0 F1 B0 B1, stage 1: F0 B0 F1 B1.
  // Stage 1: F0 [1,2] B0 [2,4] F1 [4,5] (F1 of stage 0 ended at 2) B1 [5,7].
  // Stage 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]. Makespan 9 s.
  auto cost = [](const Instruction& instruction) {
    return instruction.type == Direction::kForward ? InstructionCost{1, 100} : InstructionCost{2, 300};
  };
  const IterationRun run = simulate_one_f_one_b(2, 2, cost, 50, 4);
  EXPECT_DOUBLE_EQ(run.time_s, 9);
  EXPECT_DOUBLE_EQ(run.stages[1].instructions.back().end_s, 7);
  EXPECT_DOUBLE_EQ(run.stages[0].instructions[2].start_s, 4);
  // Each stage: 800 J of work over 6 busy seconds, 3 idle seconds at 50 W; 4 GPUs per stage.
  EXPECT_DOUBLE_EQ(run.energy_j, 2 * 4 * (800 + 3 * 50));
  EXPECT_DOUBLE_EQ(run.avg_power_w, run.energy_j / (9 * 8));
}

}  // namespace
}  // namespace kareus::pipeline
