// The first records kareus measured on a real GPU (one H200, scripts/device-check.sh, 2026-12-04;
// tests/data/device/h200-2026-12-04, bench/RESULTS.md "First run on a GPU"): the reader takes
// what the CUDA backend wrote, the numbers are physically possible, and calibrating on them
// gives the fit recorded there, with the parameters the model cannot place marked.
#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "kareus/device/calibration.h"
#include "kareus/device/gpu_spec.h"
#include "kareus/device/measurement_log.h"

namespace kareus::device {
namespace {

const std::string kDir = std::string(KAREUS_TEST_DATA_DIR) + "/device/h200-2026-12-04/";

TEST(H200Records, ReadAndRoundTripAsTheCudaBackendWroteThem) {
  const std::vector<MeasurementRecord> kernels = read_measurements(kDir + "kernels.jsonl");
  ASSERT_EQ(kernels.size(), 170u);  // 34 kernels (12 collectives at 3 CTA counts) x 5 clocks
  const std::vector<MeasurementRecord> partitions = read_measurements(kDir + "partitions.jsonl");
  ASSERT_EQ(partitions.size(), 16u);
  for (const MeasurementRecord& record : kernels) {
    SCOPED_TRACE(record.origin);
    EXPECT_EQ(record.backend, "cuda");
    EXPECT_EQ(record.device_name, "NVIDIA H200");
    const MeasurementRecord again = parse_measurement_line(to_json_line(record), "again");
    EXPECT_EQ(again.time_s, record.time_s);
    EXPECT_EQ(again.energy_j, record.energy_j);
    EXPECT_EQ(again.details, record.details);
    EXPECT_EQ(again.config.freq_mhz, record.config.freq_mhz);
  }
}

TEST(H200Records, AreWhatAnH200CanDo) {
  for (const char* file : {"kernels.jsonl", "partitions.jsonl", "kernels_heldout.jsonl", "partitions_heldout.jsonl"}) {
    for (const MeasurementRecord& record : read_measurements(kDir + file)) {
      SCOPED_TRACE(record.origin);
      const MeasurementDetails& details = record.details;
      // Above the idle draw nvidia-smi showed (80 W); near the 700 W limit at most, which the
      // power cap holds only on average: power-capped GEMM windows of 0.4 s read up to 864 W.
      EXPECT_GT(details.power_mean_w, 80);
      EXPECT_LT(details.power_mean_w, 900);
      EXPECT_NEAR(record.energy_j, details.power_mean_w * record.time_s, 1e-3 * record.energy_j);
      // The window holds whole runs: their time fills it.
      EXPECT_NEAR(record.time_s * details.repetitions, details.window_s, 1e-3 * details.window_s);
      EXPECT_LE(details.clock_max_mhz, record.config.freq_mhz);
      // A clock that did not hold is what marks a record unstable (the power cap, here).
      if (details.stable) {
        EXPECT_EQ(details.clock_min_mhz, record.config.freq_mhz);
      }
    }
  }
}

// Faster clocks never make a kernel slower, beyond the window's noise: time is non-increasing
// in the locked clock for every kernel and CTA count, and GEMMs stop gaining where the power
// cap holds their clock (1560 MHz and up read 1510-1720 MHz).
TEST(H200Records, TimeFallsWithTheClockUntilThePowerCap) {
  std::map<std::pair<std::string, int>, std::map<int, double>> times;  // (kernel, ctas) -> MHz -> s
  for (const MeasurementRecord& record : read_measurements(kDir + "kernels.jsonl")) {
    times[{record.partition.key, record.config.ctas}][record.config.freq_mhz] = record.time_s;
  }
  ASSERT_EQ(times.size(), 34u);
  for (const auto& [kernel, by_clock] : times) {
    SCOPED_TRACE(kernel.first + " " + std::to_string(kernel.second));
    double previous = by_clock.begin()->second;
    for (const auto& [mhz, time_s] : by_clock) {
      EXPECT_LE(time_s, previous * 1.03) << mhz << " MHz";
      previous = time_s;
    }
  }
  const std::map<int, double>& fc1 = times.at({"kernel:fc1", 0});
  EXPECT_LT(fc1.at(1140) / fc1.at(1560), 1.4);        // 1.37x the clock, 1.33x the speed
  EXPECT_NEAR(fc1.at(1980) / fc1.at(1560), 1, 0.03);  // capped: no gain above 1560
}

TEST(H200Records, CalibrateFitsGemmsAndAttentionAndMarksTheLimits) {
  std::vector<MeasurementRecord> records = read_measurements(kDir + "kernels.jsonl");
  const CalibrationResult result = calibrate(load_gpu("h200"), records);
  std::map<std::string, ClassError> after;
  for (const ClassError& error : result.errors_after) after[error.kernel_class] = error;
  // bench/RESULTS.md: GEMM 9.7% / 14.4%, attention 8.6% / 10.9% (time / energy rms); the
  // memory-bound and proxy-collective classes stay at ~40%: one HBM efficiency cannot fit
  // kernels that reach 1.4-3.3 TB/s, and the proxy is bounded by the link rate it is given.
  EXPECT_LT(after.at("gemm").time_rms, 0.12);
  EXPECT_LT(after.at("attention").time_rms, 0.11);
  EXPECT_LT(after.at("gemm").energy_rms, 0.17);
  EXPECT_EQ(after.at("gemm").count, 19u);  // the 21 power-capped GEMM windows are unstable
  EXPECT_LT(result.objective_after, result.objective_before / 5);
  std::map<std::string, FittedParameter> fitted;
  for (const FittedParameter& parameter : result.parameters) fitted[parameter.name] = parameter;
  EXPECT_TRUE(fitted.at("gemm_efficiency").at_bound);
  EXPECT_EQ(fitted.at("gemm_efficiency").bound, 1);
  EXPECT_FALSE(fitted.at("hbm_power_w_per_tbps").at_bound);
  // Our unfused attention (two GEMMs around a softmax kernel) runs at a tenth of the preset's
  // FlashAttention efficiency: the CUDA backend's attention is not what a training job runs.
  EXPECT_LT(fitted.at("attention_forward_efficiency").fitted, 0.15);
}

}  // namespace
}  // namespace kareus::device
