// kareus/device/kernel_model.h - time and power of one kernel on the emulated GPU.
//
// The physics under the emulator, one function per effect, all parameters from GpuSpec:
//  - compute kernels: roofline over the SMs and HBM bandwidth they get at a clock, GEMM wave
//    quantization over CTA tiles, an efficiency that falls for small inner dimensions; ring
//    attention (context parallelism) waits, idle, cp_ring_step_us per step;
//  - collectives: algorithm traffic (ring all-reduce 2(N-1)/N, all-gather and reduce-scatter
//    (N-1)/N) at min(link, CTAs x per-CTA copy rate(f)) (a smooth min, which gives the knee
//    in CTA count), plus pipeline fill and per-step latency;
//  - power: static + sm_dynamic_power_w x activity x (f/fmax) x (V(f)/Vmax)^2 + HBM + link.
// Units: seconds, watts, MHz, bytes.
#pragma once

#include "kareus/device/gpu_spec.h"
#include "kareus/workload/op_graph.h"

namespace kareus::device {

/// Resources a compute kernel has while it runs (less when a collective shares the GPU).
struct ComputeResources {
  double sms = 0;              ///< SMs available to compute
  double hbm_bytes_per_s = 0;  ///< HBM bandwidth available to compute
};

/// The timing of a compute kernel and what it keeps busy, for the power model.
struct KernelRun {
  double time_s = 0;
  double sm_activity = 0;  ///< activity-weighted fraction of all SMs busy (0..1)
  double hbm_bytes_per_s = 0;
};

/// Everything available: all SMs, the achievable HBM bandwidth.
[[nodiscard]] ComputeResources full_resources(const GpuSpec& gpu);

/// A compute op (not a collective) at `freq_mhz` with `resources`.
[[nodiscard]] KernelRun compute_kernel(const GpuSpec& gpu, const workload::Op& op, double freq_mhz,
                                       const ComputeResources& resources);

/// A collective's timing and load on its own GPU.
struct CollectiveRun {
  double time_s = 0;
  double bus_bytes_per_s = 0;  ///< link traffic rate while it runs
  double hbm_bytes_per_s = 0;  ///< HBM traffic it causes
  double sms = 0;              ///< SMs it takes from compute (ctas x comm_sm_share)
};

/// A collective op with `ctas` CTAs at `freq_mhz`. P2P sends (pp group) use the link
/// without the CTA limit. Precondition: ctas >= 1.
[[nodiscard]] CollectiveRun collective_kernel(const GpuSpec& gpu, const workload::Op& op, int ctas, double freq_mhz);

/// Clock and voltage factor of dynamic power: (f/fmax) x (V(f)/Vmax)^2.
[[nodiscard]] double dynamic_scale(const GpuSpec& gpu, double freq_mhz);

/// Power of the GPU while `compute` (may be null: the compute stream idles) and `collective`
/// (may be null) run at `freq_mhz`, with `ctas` communication CTAs.
[[nodiscard]] double power_w(const GpuSpec& gpu, double freq_mhz, const KernelRun* compute,
                             const CollectiveRun* collective, int ctas);

}  // namespace kareus::device
