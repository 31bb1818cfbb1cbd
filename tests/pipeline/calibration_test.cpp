// The emulator against real A100 runs (REFERENCE.md section 9): Megatron+Perseus and
// Nanobatching+Perseus fastest plans of Llama 3.2 3B on 2x8 A100-40GB.
#include <gtest/gtest.h>

#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/workload/model.h"

namespace kareus::pipeline {
namespace {

struct Target {
  int cp, tp, mbs, seq;
  double perseus_time_s, perseus_power_w, nanobatch_time_s, nanobatch_power_w;
};

TEST(EmulatorCalibration, LlamaFastestPlansWithinTenPercentOfA100) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const Target targets[] = {
      {1, 8, 8, 4096, 5.113, 275.2, 4.627, 284.4},
      {2, 4, 8, 4096, 4.205, 303.9, 4.275, 294.3},
      {2, 4, 8, 8192, 9.053, 285.7, 8.680, 313.6},
      {2, 4, 16, 4096, 7.981, 290.2, 7.777, 311.3},
  };
  for (const Target& target : targets) {
    SCOPED_TRACE(testing::Message() << "cp" << target.cp << " tp" << target.tp << " mbs" << target.mbs << " seq"
                                    << target.seq);
    workload::Parallelism parallel;
    parallel.cp = target.cp;
    parallel.tp = target.tp;
    parallel.mbs = target.mbs;
    parallel.seq = target.seq;
    parallel.layers_per_stage = {15, 13};
    const workload::Workload workload = workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
    const IterationRun megatron = simulate_locked_clock(gpu, workload, 1410, device::OverlapMode::kNone);
    const IterationRun nanobatch = simulate_locked_clock(gpu, workload, 1410, device::OverlapMode::kNanobatch);
    EXPECT_NEAR(megatron.time_s / target.perseus_time_s, 1, 0.10);
    EXPECT_NEAR(megatron.avg_power_w / target.perseus_power_w, 1, 0.10);
    EXPECT_NEAR(nanobatch.time_s / target.nanobatch_time_s, 1, 0.10);
    EXPECT_NEAR(nanobatch.avg_power_w / target.nanobatch_power_w, 1, 0.10);
  }
}

TEST(IterationSimulator, HandComputedTwoStagePipeline) {
  // F = 1 s, B = 2 s on both stages, 2 microbatches. Stage 0: F0 F1 B0 B1, stage 1: F0 B0 F1 B1.
  // Stage 1: F0 [1,2] B0 [2,4] F1 [4,5] (F1 of stage 0 ended at 2) B1 [5,7].
  // Stage 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]. Makespan 9 s.
  auto cost = [](const Instruction& instruction) {
    return instruction.type == InstructionType::kForward ? InstructionCost{1, 100} : InstructionCost{2, 300};
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
