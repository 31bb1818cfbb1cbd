// The CUDA backend. Without a GPU (CI) only its refusal is checked; with one, a short
// measurement of a GEMM and of the collective proxy (needs root or CAP_SYS_ADMIN for clocks).
#include "kareus/device/cuda_device.h"

#include <stdexcept>

#include <gtest/gtest.h>

#include "common/workloads.h"
#include "kareus/common/error.h"
#include "kareus/device/energy_window.h"
#include "kareus/device/profile.h"
#include "kareus/nvml/nvml.h"
#include "kareus/workload/model.h"

namespace kareus::device {
namespace {

using test_common::llama_3b_15_13;

std::string open_failure(const GpuSpec& gpu, const CudaDeviceOptions& options) {
  try {
    CudaDevice device(gpu, llama_3b_15_13(), options);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

/// A short-window device on GPU 0 with the preset matching it, or a skip reason.
struct GpuUnderTest {
  std::unique_ptr<CudaDevice> device;
  std::string skip;
};

GpuUnderTest open_gpu() {
  if (!cuda_backend_compiled()) return {nullptr, "the CUDA backend is not compiled in"};
  std::string name;
  try {
    nvml::NvmlLibrary nvml;
    name = nvml.name(0);
    // Locking clocks needs root or CAP_SYS_ADMIN; without it there is nothing to measure.
    nvml.set_locked_clock(0, nvml.supported_clocks_mhz(0).front());
    nvml.reset_locked_clock(0);
  } catch (const Error& error) {
    return {nullptr, std::string("no GPU or no permission to lock its clocks: ") + error.what()};
  }
  const std::string preset = name.find("H200") != std::string::npos   ? "h200"
                             : name.find("H100") != std::string::npos ? "h100-sxm"
                             : name.find("A100") != std::string::npos ? "a100-40gb"
                                                                      : "";
  if (preset.empty()) return {nullptr, "no preset for " + name};
  CudaDeviceOptions options;
  options.window_s = 0.3;
  options.cooldown_s = 0.1;
  options.warmup_s = 0.1;
  options.collective = CollectiveBackend::kProxy;
  options.handle_signals = false;
  try {
    return {std::make_unique<CudaDevice>(load_gpu(preset), llama_3b_15_13(), options), ""};
  } catch (const Error& error) {
    return {nullptr, std::string("cannot open GPU 0: ") + error.what()};
  }
}

/// The kernel or collective partition `key` of the test workload's layer (profile.h).
partition::Partition kernel_partition(const std::string& key) {
  for (partition::Partition& kernel : kernel_partitions(llama_3b_15_13())) {
    if (kernel.key == key) return kernel;
  }
  throw std::logic_error("no kernel partition " + key);
}

TEST(CudaDevice, WithoutDriverSaysSoOrThatItIsNotCompiledIn) {
  CudaDeviceOptions options;
  options.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  options.handle_signals = false;
  const std::string message = open_failure(load_gpu("h200"), options);
  if (cuda_backend_compiled()) {
    EXPECT_NE(message.find("no NVIDIA driver found"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("built without the CUDA backend"), std::string::npos) << message;
  }
  EXPECT_NE(message.find("--backend emulator"), std::string::npos) << message;
}

TEST(CudaDevice, WindowIsStableOnlyWhenTheClockHeld) {
  struct Row {
    const char* name;
    double clock_min_mhz, clock_max_mhz;
    std::uint64_t clock_events;
    bool energy_moved, stable;
  };
  const Row rows[] = {
      {"held", 1500, 1500, 0, true, true},
      {"within tolerance", 1485, 1515, 0, true, true},
      {"idle between chunks is fine", 1500, 1500, nvml::clock_event::kGpuIdle, true, true},
      {"dipped below", 1470, 1500, 0, true, false},
      {"boosted above", 1500, 1530, 0, true, false},
      {"power cap", 1500, 1500, nvml::clock_event::kSwPowerCap, true, false},
      {"hw thermal", 1500, 1500, nvml::clock_event::kHwThermalSlowdown | nvml::clock_event::kGpuIdle, true, false},
      {"energy counter did not move", 1500, 1500, 0, false, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    MeasurementDetails details;
    details.clock_min_mhz = row.clock_min_mhz;
    details.clock_max_mhz = row.clock_max_mhz;
    details.clock_events = row.clock_events;
    EXPECT_EQ(window_is_stable(details, 1500, 15, row.energy_moved), row.stable);
  }
}

TEST(CudaDevice, ParsesCollectiveBackends) {
  EXPECT_EQ(parse_collective_backend("auto"), CollectiveBackend::kAuto);
  EXPECT_EQ(parse_collective_backend("nccl"), CollectiveBackend::kNccl);
  EXPECT_EQ(parse_collective_backend("proxy"), CollectiveBackend::kProxy);
  EXPECT_THROW((void)parse_collective_backend("mpi"), InputError);
}

TEST(CudaDeviceGpu, GemmMeasurementIsPlausible) {
  GpuUnderTest gpu = open_gpu();
  if (!gpu.device) GTEST_SKIP() << gpu.skip;
  const GpuSpec& spec = gpu.device->gpu();
  const partition::Partition kernel = kernel_partition("kernel:fc1");
  const Measurement measurement = gpu.device->measure(kernel, {spec.clock_max_mhz, 0, ""});
  const MeasurementDetails details = gpu.device->last_details();
  const double flops = kernel.compute_ops[0].flops;
  // Between 20% and 100% of the peak at the locked clock.
  EXPECT_GT(flops / measurement.time_s, 0.2 * spec.peak_flops(spec.clock_max_mhz, spec.sm_count));
  EXPECT_LT(flops / measurement.time_s, spec.peak_flops(spec.clock_max_mhz, spec.sm_count));
  EXPECT_GT(measurement.energy_j, spec.idle_power_w * 0.5 * measurement.time_s);
  EXPECT_GT(details.repetitions, 0);
  EXPECT_GT(details.clock_mean_mhz, 0);
}

TEST(CudaDeviceGpu, CollectiveProxyNeverBeatsTheLinkAndSlowsWithFewCtas) {
  GpuUnderTest gpu = open_gpu();
  if (!gpu.device) GTEST_SKIP() << gpu.skip;
  const GpuSpec& spec = gpu.device->gpu();
  const partition::Partition collective = kernel_partition("collective:attn_all_reduce");
  const workload::Collective& c = *collective.collective->collective;
  const double bus_bytes = 2.0 * (c.group_size - 1) / c.group_size * c.bytes;
  const double link_s = bus_bytes / (spec.link_bandwidth_gbps * 1e9 * spec.link_efficiency);
  const Measurement many = gpu.device->measure(collective, {spec.clock_max_mhz, 32, "start"});
  const Measurement few = gpu.device->measure(collective, {spec.clock_max_mhz, 1, "start"});
  EXPECT_GT(many.time_s, 0.95 * link_s);
  EXPECT_GT(few.time_s, 1.5 * many.time_s);
}

TEST(CudaDeviceGpu, ClockSwitchSettles) {
  GpuUnderTest gpu = open_gpu();
  if (!gpu.device) GTEST_SKIP() << gpu.skip;
  const GpuSpec& spec = gpu.device->gpu();
  const ClockSwitchResult result = gpu.device->measure_clock_switch(spec.clock_max_mhz, spec.clock_max_mhz - 600);
  EXPECT_LT(result.settle_s, 1.0);
  EXPECT_NEAR(result.observed_mhz, spec.clock_max_mhz - 600, 15);
}

}  // namespace
}  // namespace kareus::device
