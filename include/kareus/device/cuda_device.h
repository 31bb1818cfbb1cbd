// kareus/device/cuda_device.h - the CUDA backend: measure partitions on a real NVIDIA GPU.
//
// A Device (device.h) whose measure() runs the partition's kernels for real: GEMMs through
// cuBLASLt in bf16 with the ops' shapes; causal attention as two strided-batched cuBLASLt GEMMs
// around a causal softmax kernel (unfused, so it moves more HBM bytes than FlashAttention; its
// backward runs the forward twice, matching the op graph's 2x FLOPs); RMSNorm, RoPE, SwiGLU and
// elementwise kernels sized from the ops' bytes; all on a compute stream; the collective on a communication stream,
// launched by an event at its slot (stream_schedule.h). Collectives run through NCCL with
// minCTAs = maxCTAs = ctas (one communicator per CTA count) when the process sees enough GPUs,
// else through a one-GPU collective proxy: a kernel of exactly `ctas` CTAs x 1024 threads that
// moves the collective's bus bytes through HBM at most at the link's rate, so SM and bandwidth
// contention are measured on one GPU. Each measurement is thermally stable, as in the Kareus
// artifact: lock the clock (NVML), wait, cool down, warm up, then repeat the partition over a
// fixed window on the NVML energy counter, checking that the clock held and nothing throttled
// (retrying a bad window). Clocks are reset on every way out (ClockLockGuard, nvml.h).
// This header is free of CUDA; the implementation is the kareus_device_cuda library, which
// builds only when CMake finds nvcc (otherwise constructing a CudaDevice throws Error).
// Units: s, J, MHz, W, C.
#pragma once

#include <memory>
#include <string>

#include "kareus/device/device.h"
#include "kareus/device/measurement_log.h"
#include "kareus/workload/workload.h"

namespace kareus::device {

enum class CollectiveBackend {
  kAuto,   ///< NCCL when the process sees group_size GPUs, else the proxy
  kNccl,   ///< NCCL across group_size GPUs (Error if fewer are visible)
  kProxy,  ///< the one-GPU proxy kernel
};

/// Parses "auto" / "nccl" / "proxy"; throws InputError naming --collective.
[[nodiscard]] CollectiveBackend parse_collective_backend(const std::string& text);

struct CudaDeviceOptions {
  int gpu_index = 0;  ///< CUDA and NVML index of the measured GPU (NCCL peers follow it)
  CollectiveBackend collective = CollectiveBackend::kAuto;
  double window_s = 5;              ///< energy window (the artifact's 5 s)
  double cooldown_s = 5;            ///< idle at the locked clock before each measurement
  double warmup_s = 0.5;            ///< partition repetitions before the window
  double clock_settle_s = 0.1;      ///< wait after locking the clock before checking it
  double clock_tolerance_mhz = 15;  ///< a window is stable if every reading is this close to the lock
  int max_retries = 2;              ///< windows thrown away per measurement before giving up (marked unstable)
  bool handle_signals = true;       ///< reset clocks on SIGINT/SIGTERM
  std::string nvml_library = "libnvidia-ml.so.1";
};

/// NVML-measured time for the SM clock to reach a new lock.
struct ClockSwitchResult {
  int from_mhz = 0;
  int to_mhz = 0;
  double call_s = 0;     ///< nvmlDeviceSetGpuLockedClocks returned after this long
  double settle_s = 0;   ///< until NVML reported the new clock (polled every 0.5 ms)
  int observed_mhz = 0;  ///< the clock read at the end
};

/// True if this build has the CUDA backend compiled in.
[[nodiscard]] bool cuda_backend_compiled();

class CudaDevice final : public Device {
 public:
  /// Opens GPU `options.gpu_index` for `workload` (attention shapes and buffer sizes come from
  /// it; GEMM backward runs the input- and weight-gradient GEMMs of the forward shape). Throws Error "no NVIDIA
  /// driver/GPU found ..." without a driver or GPU, "kareus was built without the CUDA backend ..." when not compiled
  /// in, and Error naming NVML/CUDA's message (with what to do) on permission or unsupported-GPU failures.
  CudaDevice(GpuSpec gpu, workload::Workload workload, CudaDeviceOptions options);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  [[nodiscard]] const GpuSpec& gpu() const override;
  [[nodiscard]] std::string_view kind() const override { return "cuda"; }
  /// One thermally stable measurement (see the file comment); time and energy per run.
  [[nodiscard]] Measurement measure(const partition::Partition& partition,
                                    const partition::KnobConfig& config) override;
  /// Readings of the last measure() window.
  [[nodiscard]] MeasurementDetails last_details() const;
  /// What the driver calls the GPU, e.g. "NVIDIA H200".
  [[nodiscard]] std::string device_name() const;
  /// Locks `from_mhz`, waits, then times the switch to `to_mhz` (clocks reset afterwards).
  [[nodiscard]] ClockSwitchResult measure_clock_switch(int from_mhz, int to_mhz);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kareus::device
