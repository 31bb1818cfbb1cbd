#include "kareus/device/kernel_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace kareus::device {
namespace {

using workload::CollectiveKind;
using workload::OpKind;

/// How sharply a collective's rate bends from CTA-bound to link-bound at the CTA knee: the p
/// of the p-norm below. The form of the model, not hardware: with p = 4 the smooth minimum is
/// 16% below the hard one at the knee and 1.5% below it a factor 2 away; each preset's
/// cta_bytes_per_clock is set with this bend (data/gpus/*.json).
constexpr double kCtaKneeSharpness = 4;

/// A smooth minimum (p-norm): rates add their limits like resistors in series, so the
/// collective's speed bends over the CTA knee instead of breaking at it.
double smooth_min(double a, double b) {
  return 1.0 / std::pow(std::pow(a, -kCtaKneeSharpness) + std::pow(b, -kCtaKneeSharpness), 1.0 / kCtaKneeSharpness);
}

double activity_of(const GpuSpec& gpu, OpKind kind) {
  switch (kind) {
    case OpKind::kGemm:
      return gpu.activity_gemm;
    case OpKind::kAttention:
      return gpu.activity_attention;
    default:
      return gpu.activity_memory_bound;
  }
}

}  // namespace

ComputeResources full_resources(const GpuSpec& gpu) {
  return {static_cast<double>(gpu.sm_count), gpu.hbm_bandwidth_gbps * 1e9 * gpu.hbm_efficiency};
}

KernelRun compute_kernel(const GpuSpec& gpu, const workload::Op& op, double freq_mhz,
                         const ComputeResources& resources) {
  assert(!op.is_collective());
  const double sms = std::max(resources.sms, 1.0);
  const double bytes = op.bytes_read + op.bytes_written;
  // An SM moves at most sm_bytes_per_clock: at low clocks the SMs, not HBM, limit bandwidth.
  const double bandwidth = std::min(resources.hbm_bytes_per_s, sms * gpu.sm_bytes_per_clock * freq_mhz * 1e6);
  const double memory_time = bytes / bandwidth;
  double compute_time = 0;
  double utilization = 1;  // fraction of the SMs' time doing useful work (wave tail)
  if (op.kind == OpKind::kGemm) {
    const double tiles = std::ceil(op.gemm.m / gpu.gemm_tile_m) * std::ceil(op.gemm.n / gpu.gemm_tile_n);
    const double waves = std::ceil(tiles / std::floor(sms));
    utilization = tiles / (waves * std::floor(sms));
    const double efficiency = gpu.gemm_efficiency * op.gemm.k / (op.gemm.k + gpu.gemm_small_k_half);
    // The FLOPs are spread over whole waves of tiles; direction doubles the work in backward.
    compute_time =
        waves * std::floor(sms) * (op.flops / tiles) / (gpu.peak_flops(freq_mhz, std::floor(sms)) * efficiency);
  } else if (op.kind == OpKind::kAttention) {
    const double efficiency =
        op.direction == Direction::kForward ? gpu.attention_forward_efficiency : gpu.attention_backward_efficiency;
    compute_time = op.flops / (gpu.peak_flops(freq_mhz, sms) * efficiency);
  } else {
    // Memory-bound ops: a few FLOPs per element on CUDA cores, not tensor cores.
    compute_time = op.flops / (gpu.peak_flops(freq_mhz, sms) * gpu.cuda_core_flop_fraction);
  }
  const double busy_time = std::max(compute_time, memory_time);
  KernelRun run;
  // Each step of ring attention is a turn of the host's step loop, which the GPU waits for, idle
  // (a fitted stand-in for a host-bound step: docs/gpu-data.md section 3).
  run.time_s = busy_time + gpu.launch_latency_us * 1e-6 + op.ring_steps * gpu.cp_ring_step_us * 1e-6;
  const double sm_share = sms / gpu.sm_count;
  run.sm_activity = activity_of(gpu, op.kind) * sm_share * utilization * busy_time / run.time_s;
  run.hbm_bytes_per_s = bytes / run.time_s;
  return run;
}

CollectiveRun collective_kernel(const GpuSpec& gpu, const workload::Op& op, int ctas, double freq_mhz) {
  assert(op.is_collective() && ctas >= 1);
  const workload::Collective& collective = *op.collective;
  const double ranks = collective.group_size;
  double bus_bytes = collective.bytes;
  double steps = 1;
  switch (collective.kind) {
    case CollectiveKind::kAllReduce:
      bus_bytes = 2 * (ranks - 1) / ranks * collective.bytes;
      steps = 2 * (ranks - 1);
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      bus_bytes = (ranks - 1) / ranks * collective.bytes;
      steps = ranks - 1;
      break;
    case CollectiveKind::kSendRecv:
      break;
  }
  const double link_rate = gpu.link_bandwidth_gbps * 1e9 * gpu.link_efficiency;
  // Context parallelism exchanges K/V by send/recv between the ranks (ring attention), which
  // NCCL runs on its few channels per peer, not on the collective's CTAs.
  const double used_ctas =
      collective.group == workload::CommGroup::kCp ? std::min<double>(ctas, gpu.cp_exchange_ctas) : ctas;
  const double cta_rate = used_ctas * gpu.cta_bytes_per_clock * freq_mhz * 1e6;
  const double rate = collective.kind == CollectiveKind::kSendRecv ? link_rate : smooth_min(link_rate, cta_rate);
  const double fill_bytes = gpu.collective_fill_mib * 1024 * 1024 * (bus_bytes / std::max(collective.bytes, 1.0));
  CollectiveRun run;
  run.time_s = (bus_bytes + fill_bytes) / rate + steps * gpu.link_latency_us * 1e-6;
  run.bus_bytes_per_s = bus_bytes / run.time_s;
  run.hbm_bytes_per_s = gpu.comm_hbm_bytes_per_byte * run.bus_bytes_per_s;
  run.sms = collective.kind == CollectiveKind::kSendRecv ? 0 : used_ctas * gpu.comm_sm_share;
  return run;
}

double dynamic_scale(const GpuSpec& gpu, double freq_mhz) {
  const double voltage = gpu.voltage_v(freq_mhz) / gpu.voltage_max_v;
  return freq_mhz / gpu.clock_max_mhz * voltage * voltage;
}

double power_w(const GpuSpec& gpu, double freq_mhz, const KernelRun* compute, const CollectiveRun* collective,
               int ctas) {
  double sm_activity = 0;
  double hbm_bytes_per_s = 0;
  double link_fraction = 0;
  if (compute != nullptr) {
    sm_activity += compute->sm_activity;
    hbm_bytes_per_s += compute->hbm_bytes_per_s;
  }
  if (collective != nullptr) {
    sm_activity += gpu.activity_comm_cta * static_cast<double>(ctas) / gpu.sm_count;
    hbm_bytes_per_s += collective->hbm_bytes_per_s;
    link_fraction = collective->bus_bytes_per_s / (gpu.link_bandwidth_gbps * 1e9);
  }
  return gpu.static_power_w + gpu.sm_dynamic_power_w * std::min(sm_activity, 1.0) * dynamic_scale(gpu, freq_mhz) +
         gpu.hbm_power_w_per_tbps * hbm_bytes_per_s / 1e12 + gpu.link_power_w * std::min(link_fraction, 1.0);
}

}  // namespace kareus::device
