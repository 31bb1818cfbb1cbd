// kareus plan with interleaved 1F1B (--vpp > 1): every method plans every chunk, the plans
// simulate to what the summary reports, and a chunk's instruction costs what its layers do.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "../common/plan_methods.h"
#include "kareus/device/emulator.h"
#include "kareus/device/instruction.h"
#include "kareus/planner/emulator_devices.h"
#include "kareus/planner/plan_job.h"
#include "kareus/planner/plan_simulator.h"
#include "kareus/workload/model.h"

namespace kareus::planner {
namespace {

using test_common::method;

workload::Workload llama_pp2(int vpp) {
  workload::Parallelism parallel;
  parallel.tp = 8;
  parallel.pp = 2;
  parallel.vpp = vpp;
  parallel.mbs = 4;
  parallel.seq = 4096;
  parallel.microbatches = 4;
  return workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
}

PlanJobOptions quick_options(const device::GpuSpec& gpu) {
  PlanJobOptions options;
  options.clocks_mhz = {1110, 1230, 1350, gpu.clock_default_mhz};
  options.space.tp_ctas = {6, 30, 6};
  options.space.cp_ctas = {2, 20, 6};
  options.max_plans = 4;
  return options;
}

TEST(InterleavedPlanJob, ChunkStagesCarryTheLayersEmbeddingAndHeadWhereMegatronPutsThem) {
  // 28 layers, pp 2, vpp 2: chunks of 7; pipeline order s0c0 s1c0 s0c1 s1c1.
  const workload::Workload workload = llama_pp2(2);
  const workload::Workload chunks = workload::chunk_stages(workload);
  EXPECT_EQ(chunks.parallel.pp, 4);
  EXPECT_EQ(chunks.parallel.vpp, 1);
  EXPECT_EQ(chunks.stage_layers, (std::vector<int>{7, 7, 7, 7}));
  EXPECT_EQ(workload.virtual_stage(1, 0), 1);
  EXPECT_EQ(workload.virtual_stage(0, 1), 2);
  // On the emulator at one clock: the embedding makes chunk (0, 0)'s forward dearer than
  // chunk (0, 1)'s, the head makes chunk (1, 1)'s dearer than chunk (1, 0)'s, and the middle
  // chunks cost the same. Stage 0's two chunks together are less than stage 0 of vpp 1 plus
  // one more send (each chunk sends its activations on).
  device::EmulatedDevice emulator = device::exact_emulator(device::load_gpu("a100-40gb"));
  auto forward_s = [&](const workload::Workload& w, int stage) {
    return device::run_instruction(emulator, w, stage, Direction::kForward, 1410, workload::OverlapMode::kNone).time_s;
  };
  EXPECT_GT(forward_s(chunks, 0), forward_s(chunks, 2));
  EXPECT_GT(forward_s(chunks, 3), forward_s(chunks, 1));
  EXPECT_NEAR(forward_s(chunks, 1), forward_s(chunks, 2), 1e-12);
  const workload::Workload plain = llama_pp2(1);
  EXPECT_GT(forward_s(chunks, 0) + forward_s(chunks, 2), forward_s(plain, 0));
}

TEST(InterleavedPlanJob, EveryMethodPlansTheChunksAndKareusIsNowhereAboveItsBaselines) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const workload::Workload workload = llama_pp2(2);
  EmulatorDevices emulator(gpu, 1);
  const PlanJobResult result = run_plan_job(emulator.devices(), workload, quick_options(gpu));
  for (const MethodResult& one : result.methods) {
    SCOPED_TRACE(to_string(one.method));
    ASSERT_FALSE(one.frontier.empty());
    for (const MethodPoint& point : one.frontier) {
      EXPECT_EQ(plan::chunk_count(point.plan), 2);
      EXPECT_NO_THROW(check_plan_fits(point.plan, workload, gpu, "plan"));
      // The summary's numbers are what the plan simulates to.
      device::EmulatedDevice again = device::exact_emulator(gpu);
      const pipeline::IterationRun run = simulate_plan(again, workload, point.plan);
      EXPECT_DOUBLE_EQ(run.time_s, point.time_s);
      EXPECT_DOUBLE_EQ(run.energy_j, point.energy_j);
      if (one.method == Method::kMegatron) continue;
      EXPECT_NEAR(point.time_s / point.predicted_time_s, 1, 0.03);
      EXPECT_NEAR(point.energy_j / point.predicted_energy_j, 1, 0.03);
    }
  }
  const double kareus_s = method(result, "kareus").frontier.front().time_s;
  EXPECT_LE(kareus_s, method(result, "perseus").frontier.front().time_s * 1.001);
  EXPECT_LE(kareus_s, method(result, "nanobatch_perseus").frontier.front().time_s * 1.001);
  // Interleaving shrinks Megatron's bubble: the same job at vpp 1 is slower.
  PlanJobOptions megatron_only = quick_options(gpu);
  megatron_only.methods = {Method::kMegatron};
  EmulatorDevices plain_emulator(gpu, 1);
  const PlanJobResult plain = run_plan_job(plain_emulator.devices(), llama_pp2(1), megatron_only);
  EXPECT_LT(method(result, "megatron").frontier.front().time_s, method(plain, "megatron").frontier.front().time_s);
}

}  // namespace
}  // namespace kareus::planner
