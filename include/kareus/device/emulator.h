// kareus/device/emulator.h - the GPU emulator: partitions and instructions on a modelled GPU.
//
// A partition runs on two streams: compute ops in order, and the collective, launched when
// its slot's op begins, on the communication stream. While both run, compute gets the SMs
// the collective's CTAs leave, the two share HBM in proportion to their demands when these
// exceed it, and the collective is slowed by L2 contention (comm_overlap_slowdown); each
// partition also pays a fixed partition_sync_us (event wait, collective launch, rank skew) and
// lasts at least partition_host_us, the host's time to issue it (a shorter one waits, idle).
// Context-parallel attention waits cp_ring_step_us per step of its K/V ring, idle, in every
// instruction (kernel_model.h).
// Power is piecewise constant over the resulting timeline and energy is its integral. A clock
// above what the power limit allows is throttled per interval (so an unlocked GPU's clock
// fluctuates).
// Measurements add seeded multiplicative noise and the NVML energy counter's granularity.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kareus/device/device.h"
#include "kareus/device/kernel_model.h"

namespace kareus::device {

/// One piece of a timeline with constant power.
struct PowerInterval {
  double start_s = 0;
  double end_s = 0;
  double power_w = 0;
  double freq_mhz = 0;     ///< effective clock (below the requested one when throttled)
  std::string compute_op;  ///< empty while the compute stream idles
  bool comm_active = false;
};

struct PartitionRun {
  double time_s = 0;
  double energy_j = 0;
  double comm_start_s = 0;  ///< 0 and 0 when there is no collective
  double comm_end_s = 0;
  double compute_end_s = 0;
  std::vector<PowerInterval> timeline;
};

/// Exact (noise-free) run of `partition` at `config`, starting at t = 0.
[[nodiscard]] PartitionRun run_partition(const GpuSpec& gpu, const partition::Partition& partition,
                                         const partition::KnobConfig& config);

/// Ops run one after another with nothing overlapped (collectives block the compute stream,
/// with `ctas` CTAs), at `freq_mhz`: Megatron without nanobatching, and nonpartition work.
[[nodiscard]] PartitionRun run_serial(const GpuSpec& gpu, const std::vector<workload::Op>& ops, int freq_mhz, int ctas);

struct EmulatorOptions {
  bool noise = true;
  std::uint64_t seed = 0;
  double window_s = 5;  ///< measurement window on the energy counter (the artifact's 5 s)
};

class EmulatedDevice final : public Device {
 public:
  EmulatedDevice(GpuSpec gpu, EmulatorOptions options);

  [[nodiscard]] const GpuSpec& gpu() const override { return gpu_; }
  [[nodiscard]] std::string_view kind() const override { return "emulator"; }
  [[nodiscard]] Measurement measure(const partition::Partition& partition,
                                    const partition::KnobConfig& config) override;
  /// run_serial of the work (exact: nothing overlaps), with the same measurement noise.
  [[nodiscard]] Measurement measure_serial(const SerialWork& work, int freq_mhz) override;

 private:
  Measurement with_noise(const PartitionRun& run, const std::string& key, int nanobatch,
                         const partition::KnobConfig& config);

  GpuSpec gpu_;
  EmulatorOptions options_;
  std::map<std::uint64_t, int> repetitions_;  ///< measurements so far per noise seed
};

/// The noise-free emulator: what the plan simulator runs plans on.
[[nodiscard]] inline EmulatedDevice exact_emulator(GpuSpec gpu) { return {std::move(gpu), {false, 0, 5}}; }

}  // namespace kareus::device
