// The emulator against real A100 runs (REFERENCE.md section 9): Megatron+Perseus and
// Nanobatching+Perseus fastest plans of Llama 3.2 3B on 2x8 A100-40GB.
#include <gtest/gtest.h>

#include "kareus/device/emulator.h"
#include "kareus/planner/plan_simulator.h"
#include "kareus/workload/model.h"

namespace kareus::planner {

using pipeline::IterationRun;
namespace {

struct Target {
  int cp, tp, mbs, seq;
  double perseus_time_s, perseus_power_w, nanobatch_time_s, nanobatch_power_w;
};

TEST(EmulatorCalibration, LlamaFastestPlansWithinTenPercentOfA100) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  device::EmulatedDevice emulator = device::exact_emulator(gpu);
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
    const IterationRun megatron = simulate_locked_clock(emulator, workload, 1410, device::OverlapMode::kNone);
    const IterationRun nanobatch = simulate_locked_clock(emulator, workload, 1410, device::OverlapMode::kNanobatch);
    EXPECT_NEAR(megatron.time_s / target.perseus_time_s, 1, 0.10);
    EXPECT_NEAR(megatron.avg_power_w / target.perseus_power_w, 1, 0.10);
    EXPECT_NEAR(nanobatch.time_s / target.nanobatch_time_s, 1, 0.10);
    EXPECT_NEAR(nanobatch.avg_power_w / target.nanobatch_power_w, 1, 0.10);
  }
}

}  // namespace
}  // namespace kareus::planner
