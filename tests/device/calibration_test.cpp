// Calibration recovers known emulator parameters from emulator "measurements" of kernels, and
// the recovered preset predicts held-out partitions.
#include "kareus/device/calibration.h"

#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/workloads.h"
#include "kareus/common/error.h"
#include "kareus/device/emulator.h"
#include "kareus/device/profile.h"
#include "kareus/workload/model.h"

namespace kareus::device {
namespace {

using test_common::llama_3b_15_13;

/// What a perfect GPU described by `truth` would have measured (noise-free emulator).
std::vector<MeasurementRecord> measure(const GpuSpec& truth, const std::vector<ProfileJob>& jobs) {
  std::vector<MeasurementRecord> records;
  for (const ProfileJob& job : jobs) {
    MeasurementRecord record;
    record.backend = "emulator";
    record.gpu = truth.name;
    record.partition = job.partition;
    record.config = job.config;
    const PartitionRun run = run_partition(truth, job.partition, job.config);
    record.time_s = run.time_s;
    record.energy_j = run.energy_j;
    records.push_back(std::move(record));
  }
  return records;
}

TEST(Calibration, HoldoutSplitsPartitionsFromKernelsInOrder) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  const workload::Workload workload = llama_3b_15_13();
  const std::vector<MeasurementRecord> kernels = measure(gpu, plan_kernel_sweep(workload, {1410}, {8}));
  const std::vector<MeasurementRecord> partitions =
      measure(gpu, plan_partition_sweep(workload, {"fwd_attn", "bwd_mlp"}, {1410}, 3, 7));
  ASSERT_FALSE(kernels.empty());
  ASSERT_FALSE(partitions.empty());
  // Interleaved: partition, kernel, partition, kernel, ...
  std::vector<MeasurementRecord> records;
  for (std::size_t index = 0; index < std::max(kernels.size(), partitions.size()); ++index) {
    if (index < partitions.size()) records.push_back(partitions[index]);
    if (index < kernels.size()) records.push_back(kernels[index]);
  }
  const CalibrationSplit split = split_for_calibration(records, Holdout::kPartition);
  ASSERT_EQ(split.fit.size(), kernels.size());
  ASSERT_EQ(split.held_out.size(), partitions.size());
  for (std::size_t index = 0; index < kernels.size(); ++index) {
    EXPECT_EQ(split.fit[index].time_s, kernels[index].time_s);  // order kept
    EXPECT_NE(split.fit[index].kernel_class(), "partition");
  }
  for (std::size_t index = 0; index < partitions.size(); ++index) {
    EXPECT_EQ(split.held_out[index].time_s, partitions[index].time_s);
  }
  const CalibrationSplit all = split_for_calibration(records, Holdout::kNone);
  EXPECT_EQ(all.fit.size(), records.size());
  EXPECT_TRUE(all.held_out.empty());
  // Only partitions and the default holdout: nothing to fit.
  try {
    (void)split_for_calibration(partitions, Holdout::kPartition);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("--measurements: no records to fit"), std::string::npos);
  }
  EXPECT_EQ(parse_holdout("none"), Holdout::kNone);
  try {
    (void)parse_holdout("kernels");
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "--holdout kernels: expected partition or none");
  }
}

TEST(Calibration, RecoversPerturbedParametersFromKernelMeasurements) {
  const GpuSpec truth = load_gpu("h200");
  const workload::Workload workload = llama_3b_15_13();
  const std::vector<int> clocks = {1080, 1380, 1680, 1980};
  const std::vector<MeasurementRecord> kernels = measure(truth, plan_kernel_sweep(workload, clocks, {2, 8, 24, 64}));
  const std::vector<MeasurementRecord> held_out =
      measure(truth, plan_partition_sweep(workload, {"fwd_attn", "fwd_mlp", "bwd_attn", "bwd_mlp"}, clocks, 5, 7));

  GpuSpec start = truth;
  const std::vector<std::pair<std::string, double>> perturbation = {{"gemm_efficiency", 1.15},
                                                                    {"gemm_small_k_half", 0.7},
                                                                    {"attention_forward_efficiency", 1.2},
                                                                    {"attention_backward_efficiency", 0.85},
                                                                    {"hbm_efficiency", 0.9},
                                                                    {"cta_bytes_per_clock", 1.3},
                                                                    {"link_efficiency", 0.85},
                                                                    {"sm_dynamic_power_w", 1.2},
                                                                    {"hbm_power_w_per_tbps", 0.75}};
  for (const auto& [name, factor] : perturbation) *find_parameter(start, name)->value *= factor;

  const CalibrationResult result = calibrate(start, kernels);
  EXPECT_LT(result.objective_after, 1e-6);
  EXPECT_LT(result.objective_after, result.objective_before * 1e-3);
  GpuSpec recovered_truth = truth;
  for (const FittedParameter& parameter : result.parameters) {
    SCOPED_TRACE(parameter.name);
    const double expected = *find_parameter(recovered_truth, parameter.name)->value;
    EXPECT_NEAR(parameter.fitted / expected, 1, 0.02) << parameter.fitted << " vs " << expected;
  }
  for (const ClassError& error : result.errors_after) {
    SCOPED_TRACE(error.kernel_class);
    EXPECT_LT(error.time_rms, 0.005);
    EXPECT_LT(error.energy_rms, 0.005);
  }
  // Partitions were never fitted; the recovered preset predicts them, the perturbed one did not.
  double worst_before = 0;
  for (const ClassError& error : fit_errors(start, held_out)) worst_before = std::max(worst_before, error.time_rms);
  const std::vector<ClassError> after = fit_errors(result.gpu, held_out);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].kernel_class, "partition");
  EXPECT_EQ(after[0].count, held_out.size());
  EXPECT_LT(after[0].time_rms, 0.01);
  EXPECT_LT(after[0].energy_rms, 0.01);
  EXPECT_GT(worst_before, 0.03);
}

TEST(Calibration, WritesFittedValuesWithTheirSource) {
  const GpuSpec truth = load_gpu("h200");
  const std::vector<MeasurementRecord> kernels = measure(truth, plan_kernel_sweep(llama_3b_15_13(), {1380, 1980}, {8}));
  GpuSpec start = truth;
  *find_parameter(start, "hbm_efficiency")->value = 0.7;
  CalibrationOptions options;
  options.parameters = {"hbm_efficiency"};
  const CalibrationResult result = calibrate(start, kernels, options);
  ASSERT_EQ(result.parameters.size(), 1u);
  EXPECT_NEAR(result.parameters[0].fitted, truth.hbm_efficiency, 1e-3);
  const std::string preset =
      write_calibrated_preset(gpu_preset_text("h200"), result, "[F] kareus calibrate on a.jsonl");
  const nlohmann::json document = nlohmann::json::parse(preset);
  EXPECT_EQ(document["parameters"]["hbm_efficiency"]["source"], "[F] kareus calibrate on a.jsonl");
  EXPECT_NEAR(document["parameters"]["hbm_efficiency"]["value"].get<double>(), truth.hbm_efficiency, 1e-3);
  EXPECT_NE(document["parameters"]["gemm_efficiency"]["source"], "[F] kareus calibrate on a.jsonl");
  // The written preset is a valid preset.
  EXPECT_NEAR(parse_gpu(preset, "calibrated").hbm_efficiency, truth.hbm_efficiency, 1e-3);
}

// The H200's device check fitted gemm_efficiency and link_efficiency to their upper limit 1:
// the fit says so instead of passing the limit off as a measurement.
TEST(Calibration, AFitEndingOnTheSchemasLimitIsMarked) {
  GpuSpec truth = load_gpu("h200");
  truth.gemm_efficiency = 1;
  truth.flop_per_clock_per_sm *= 1.3;  // GEMMs faster than any efficiency <= 1 explains
  const std::vector<MeasurementRecord> kernels = measure(truth, plan_kernel_sweep(llama_3b_15_13(), {1380, 1980}, {8}));
  CalibrationOptions options;
  options.parameters = {"gemm_efficiency", "hbm_efficiency"};
  const CalibrationResult result = calibrate(load_gpu("h200"), kernels, options);
  ASSERT_EQ(result.parameters.size(), 2u);
  EXPECT_EQ(result.parameters[0].fitted, 1);
  EXPECT_TRUE(result.parameters[0].at_bound);
  EXPECT_EQ(result.parameters[0].bound, 1);
  EXPECT_FALSE(result.parameters[1].at_bound) << result.parameters[1].fitted;
}

TEST(Calibration, RefusesUnknownParametersAndUnstableOnlyData) {
  const GpuSpec gpu = load_gpu("h200");
  std::vector<MeasurementRecord> records = measure(gpu, plan_kernel_sweep(llama_3b_15_13(), {1980}, {8}));
  CalibrationOptions options;
  options.parameters = {"warp_speed"};
  EXPECT_THROW((void)calibrate(gpu, records, options), InputError);
  for (MeasurementRecord& record : records) record.details.stable = false;
  EXPECT_THROW((void)calibrate(gpu, records), InputError);
}

TEST(Profile, SampleConfigsIsASeededSubsetInIndexOrder) {
  const partition::Partition fwd_attn = partition::representative_partition(llama_3b_15_13(), "fwd_attn");
  const partition::SearchSpace space = partition::make_search_space(fwd_attn, {1380, 1680, 1980}, {});
  const std::vector<partition::KnobConfig> sample = sample_configs(space, 10, 3);
  ASSERT_EQ(sample.size(), 10u);
  EXPECT_EQ(sample, sample_configs(space, 10, 3));
  EXPECT_NE(sample, sample_configs(space, 10, 4));
  for (std::size_t index = 1; index < sample.size(); ++index) {
    EXPECT_LT(space.index_of(sample[index - 1]), space.index_of(sample[index]));
  }
  EXPECT_EQ(sample_configs(space, space.size() + 5, 3).size(), space.size());
}

TEST(Profile, RunProfileRecordsEveryJobOnTheEmulator) {
  EmulatedDevice device(load_gpu("a100-40gb"), {false, 0, 5});
  const std::vector<ProfileJob> jobs = plan_partition_sweep(llama_3b_15_13(), {"fwd_mlp"}, {1200, 1410}, 3, 1);
  ASSERT_EQ(jobs.size(), 3u);
  std::size_t calls = 0;
  ProfileSink sink;
  sink.progress = [&](const MeasurementRecord&, std::size_t done, std::size_t total) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(total, 3u);
  };
  const std::vector<MeasurementRecord> records = run_profile(device, jobs, sink);
  ASSERT_EQ(records.size(), 3u);
  for (std::size_t index = 0; index < jobs.size(); ++index) {
    const PartitionRun exact = run_partition(device.gpu(), jobs[index].partition, jobs[index].config);
    EXPECT_DOUBLE_EQ(records[index].time_s, exact.time_s);
    EXPECT_DOUBLE_EQ(records[index].energy_j, exact.energy_j);
    EXPECT_EQ(records[index].backend, "emulator");
  }
}

}  // namespace
}  // namespace kareus::device
