// The emulator against real A100 runs (planner/overlap_calibration.h): Megatron+Perseus and
// Nanobatching+Perseus fastest plans of Llama 3.2 3B and Qwen3 1.7B on 2x8 A100-40GB, and the
// overlap gain between them.
#include <cmath>

#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/planner/overlap_calibration.h"

namespace kareus::planner {
namespace {

TEST(EmulatorCalibration, FastestPlansOfBothModelsWithinTenPercentOfA100) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  ASSERT_EQ(a100_targets().size(), 6u);
  for (const OverlapTarget& target : a100_targets()) {
    SCOPED_TRACE(target.name());
    const OverlapRun run = run_overlap_target(gpu, target);
    EXPECT_NEAR(run.none_time_s / target.perseus_time_s, 1, 0.10);
    EXPECT_NEAR(run.none_power_w / target.perseus_power_w, 1, 0.10);
    EXPECT_NEAR(run.nanobatch_time_s / target.nanobatch_time_s, 1, 0.10);
    EXPECT_NEAR(run.nanobatch_power_w / target.nanobatch_power_w, 1, 0.10);
    // What overlap saves: T(N+P fastest) / T(Perseus fastest) within 1.5 points (0.905..1.130;
    // the worst, 1.3, Llama CP2 mbs8 4k and mbs16 4k: bench/RESULTS.md).
    EXPECT_NEAR(run.ratio(), target.ratio(), 0.015);
  }
}

TEST(EmulatorCalibration, SlowestEndsAtTheLowestClock) {
  // The slowest (minimum-energy) plans run mostly at 900 MHz. There, every instruction at 900
  // MHz, the emulator's T(N+P) / T(Perseus) meets Llama CP1 TP8 (0.898 vs 0.881) but misses the
  // CP2 configurations and Qwen3 CP1 by 3.6-6.4 points (bench/RESULTS.md, "The slowest ends"):
  // the fixed per-partition and per-ring-step waits persist at 900 MHz while the real runs'
  // overlap penalty is gone there. Asserted within 6.5 points; the 1.5-point goal is open.
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  int with_slowest = 0;
  for (const OverlapTarget& target : a100_targets()) {
    if (!target.has_slowest()) continue;
    ++with_slowest;
    SCOPED_TRACE(target.name());
    const OverlapRun slow = run_overlap_target_at(gpu, target, kSlowestClockMhz);
    const OverlapRun fast = run_overlap_target(gpu, target);
    EXPECT_GT(slow.none_time_s, fast.none_time_s * 1.2);  // 900 of 1410 MHz: compute-bound work 1.57x
    EXPECT_NEAR(slow.ratio(), target.slowest_ratio(), 0.065);
  }
  EXPECT_EQ(with_slowest, 5);  // Llama CP2 8k's Perseus slowest is anomalous in the source
}

TEST(EmulatorCalibration, OverlapFitPredictsEachConfigurationLeftOut) {
  // Fitted on three Llama configurations, the overlap parameters but the host's predict the
  // fourth's ratio within 2.5 points (worst fold -2.0, CP2 mbs16 4k; 3.1 before the ring-step
  // cost: bench/RESULTS.md). The host's partition time stays the preset's:
  // no Llama partition is shorter than it, so Llama alone cannot place it (the six-target and
  // leave-one-model-out tables are bench/overlap_calibration_bench's). Four folds, ~6 s.
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  std::vector<BoundedParameter> parameters;
  for (const BoundedParameter& parameter : overlap_fit_parameters()) {
    if (parameter.name != "partition_host_us") parameters.push_back(parameter);
  }
  ASSERT_EQ(parameters.size(), 4u);
  const std::vector<OverlapTarget> llama = targets_of(a100_targets(), "llama3.2-3b");
  const std::vector<LeaveOneOutFold> folds = leave_one_out(gpu, llama, parameters);
  ASSERT_EQ(folds.size(), 4u);
  for (const LeaveOneOutFold& fold : folds) {
    SCOPED_TRACE(fold.held_out.name());
    EXPECT_LE(std::abs(fold.error_points()), 2.5);
    EXPECT_LE(fold.fit.rms_error_points, 1.5);
  }
}

TEST(EmulatorCalibration, OverlapFitRecoversParametersItWasGivenAndRejectsBadInput) {
  // A preset whose ratios are made the targets is its own best fit: starting elsewhere, the fit
  // returns to it (ground truth by construction).
  device::GpuSpec truth = device::load_gpu("a100-40gb");
  truth.partition_sync_us = 60;
  truth.comm_overlap_slowdown = 0.2;
  std::vector<OverlapTarget> targets = a100_targets();
  for (OverlapTarget& target : targets) {
    const OverlapRun run = run_overlap_target(truth, target);
    target.perseus_time_s = run.none_time_s;
    target.nanobatch_time_s = run.nanobatch_time_s;
    target.perseus_power_w = run.none_power_w;
    target.nanobatch_power_w = run.nanobatch_power_w;
    if (target.has_slowest()) {
      const OverlapRun slow = run_overlap_target_at(truth, target, kSlowestClockMhz);
      target.perseus_slowest_time_s = slow.none_time_s;
      target.nanobatch_slowest_time_s = slow.nanobatch_time_s;
    }
  }
  const OverlapFit fit = fit_overlap(device::load_gpu("a100-40gb"), targets, overlap_fit_parameters());
  EXPECT_LT(fit.rms_error_points, 0.05);
  EXPECT_NEAR(fit.gpu.partition_sync_us, 60, 6);
  EXPECT_NEAR(fit.gpu.comm_overlap_slowdown, 0.2, 0.05);
  // Fitting both ends at once finds the same truth, and its rms counts the slowest ends too: a
  // target whose slowest ratio is off by 10 points leaves it at 10 / sqrt(11) for 11 ratios.
  device::GpuSpec sync_off = truth;
  sync_off.partition_sync_us = 217;
  const OverlapFit both = fit_overlap(sync_off, targets, {{"partition_sync_us", 0, 400}}, FitEnds::kBoth);
  EXPECT_LT(both.rms_error_points, 0.05);
  EXPECT_NEAR(both.gpu.partition_sync_us, 60, 6);
  std::vector<OverlapTarget> one_off = targets;
  one_off[0].nanobatch_slowest_time_s *= 1 + 0.10 / one_off[0].slowest_ratio();  // +10 points
  const OverlapFit pinned = fit_overlap(truth, one_off, {{"partition_sync_us", 59.999, 60.001}}, FitEnds::kBoth);
  EXPECT_NEAR(pinned.rms_error_points, 10 / std::sqrt(11.0), 0.01);
  EXPECT_THROW((void)fit_overlap(truth, {}, overlap_fit_parameters()), InputError);
  EXPECT_THROW((void)fit_overlap(truth, targets, {{"no_such_parameter", 0, 1}}), InputError);
  EXPECT_THROW((void)fit_overlap(truth, targets, {{"partition_sync_us", 5, 5}}), InputError);
}

}  // namespace
}  // namespace kareus::planner
