// kareus/device/gpu_spec.h - one GPU model as the emulator sees it: a preset file in data/gpus/.
//
// Every parameter of the emulator lives here, read from data/gpus/<name>.json where each
// value carries its source (spec sheet, measurement, or calibration fit). Units are in the
// names: MHz, W, GB/s (1e9 bytes/s), us, ms, V. Nothing about a GPU is a literal in code.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::device {

struct GpuSpec {
  std::string name;
  std::string description;
  int sm_count = 0;

  // Clocks: supported SM clocks are clock_min_mhz..clock_max_mhz in clock_step_mhz steps.
  int clock_min_mhz = 0;
  int clock_max_mhz = 0;
  int clock_step_mhz = 0;
  int clock_default_mhz = 0;  ///< what the driver runs under load when nothing is locked
  double clock_switch_latency_ms = 0;

  // Compute.
  double flop_per_clock_per_sm = 0;    ///< dense bf16 tensor-core FLOP per cycle per SM
  double cuda_core_flop_fraction = 0;  ///< FP32 CUDA-core FLOP/s over dense bf16 tensor-core FLOP/s
  double gemm_efficiency = 0;          ///< fraction of peak a large, aligned GEMM reaches
  double gemm_tile_m = 0;              ///< CTA tile, for wave quantization
  double gemm_tile_n = 0;
  double gemm_small_k_half = 0;              ///< a GEMM with inner dimension k runs at k/(k+this) of gemm_efficiency
  double attention_forward_efficiency = 0;   ///< causal fused attention, fraction of peak
  double attention_backward_efficiency = 0;  ///< with the 2x-forward FLOP convention
  double launch_latency_us = 0;              ///< per kernel, on the critical path of its stream

  // Memory.
  double hbm_bandwidth_gbps = 0;  ///< peak
  double hbm_efficiency = 0;      ///< fraction of peak a streaming kernel reaches
  double sm_bytes_per_clock = 0;  ///< what one SM can move to/from HBM per cycle

  // Interconnect and collectives.
  double link_bandwidth_gbps = 0;      ///< NVLink, per direction
  double link_efficiency = 0;          ///< asymptotic bus bandwidth of NCCL rings / link bandwidth
  double link_latency_us = 0;          ///< per ring step
  double collective_fill_mib = 0;      ///< pipeline fill: a collective of S bytes runs as S + this at full rate
  double cta_bytes_per_clock = 0;      ///< bus bytes one communication CTA moves per cycle
  int default_comm_ctas = 0;           ///< NCCL's default channel count on this GPU
  double comm_sm_share = 0;            ///< fraction of an SM's compute a communication CTA takes (1 = exclusive)
  double comm_hbm_bytes_per_byte = 0;  ///< HBM traffic per bus byte a collective moves (reads + writes)
  double comm_overlap_slowdown = 0;    ///< L2 contention: beside compute a collective takes (1 + this) x as long
  double partition_sync_us = 0;        ///< per overlapped partition: stream events, waits, nanobatch dispatch
  double partition_host_us = 0;  ///< host time to issue one overlapped partition: a partition the GPU runs faster waits
  double cp_exchange_ctas = 0;   ///< CTAs of the context-parallel K/V exchange: NCCL send/recv channels per peer
  double cp_ring_step_us = 0;    ///< GPU idle per step of context-parallel (ring) attention: the host's step loop

  // Power.
  double power_limit_w = 0;
  double static_power_w = 0;  ///< a GPU blocked in a P2P receive (clock held, nothing computing)
  double idle_power_w = 0;    ///< no process, idle clock
  double voltage_min_v = 0;   ///< flat floor up to voltage_knee_mhz
  double voltage_max_v = 0;   ///< at clock_max_mhz
  int voltage_knee_mhz = 0;
  double sm_dynamic_power_w = 0;  ///< all SMs at full tensor-core activity, at max clock and voltage
  double hbm_power_w_per_tbps = 0;
  double link_power_w = 0;  ///< links busy at full rate
  // Activity of the SMs by work kind (fraction of sm_dynamic_power_w at full occupancy).
  double activity_gemm = 0;
  double activity_attention = 0;
  double activity_memory_bound = 0;
  double activity_comm_cta = 0;  ///< one communication CTA, relative to one fully busy SM

  // Measurement realism.
  double noise_time_fraction = 0;       ///< sigma of multiplicative noise on measured time
  double noise_energy_fraction = 0;     ///< sigma of multiplicative noise on measured energy
  double energy_counter_period_ms = 0;  ///< NVML energy counter update period
  double energy_counter_resolution_mj = 0;

  /// Every supported SM clock, ascending.
  [[nodiscard]] std::vector<int> supported_clocks_mhz() const;
  /// True if `freq_mhz` is a supported clock.
  [[nodiscard]] bool supports_clock(int freq_mhz) const;
  /// Peak dense bf16 FLOP/s at `freq_mhz` over `sms` SMs.
  [[nodiscard]] double peak_flops(double freq_mhz, double sms) const;
  /// Core voltage at `freq_mhz` (flat floor, then linear to max).
  [[nodiscard]] double voltage_v(double freq_mhz) const;
};

/// A floating-point preset parameter by its JSON key, with the range a preset may give it.
struct ParameterRef {
  double* value = nullptr;
  double min = 0;
  double max = 0;
};

/// The parameter `key` of `gpu` (e.g. "gemm_efficiency"), for calibration; nullopt if `key` is
/// not a floating-point parameter of the preset schema.
[[nodiscard]] std::optional<ParameterRef> find_parameter(GpuSpec& gpu, std::string_view key);

/// Names of the built-in presets, sorted.
[[nodiscard]] std::vector<std::string> gpu_preset_names();

/// A preset by name, or a preset file when `name_or_path` ends in ".json".
/// Throws InputError naming `--gpu` and the presets, or the file and the bad field.
[[nodiscard]] GpuSpec load_gpu(std::string_view name_or_path);

/// Parses a preset document; `origin` names it in errors.
[[nodiscard]] GpuSpec parse_gpu(std::string_view json_text, std::string_view origin);

/// Throws InputError if `freq_mhz` is not a supported clock, naming `flag` and the range.
void require_supported_clock(const GpuSpec& gpu, int freq_mhz, std::string_view flag);

/// The 18 clocks the Kareus artifact searched, from the max down in 30 MHz steps (A100:
/// 900..1410), those `gpu` supports, ascending.
[[nodiscard]] std::vector<int> artifact_clocks(const GpuSpec& gpu);

/// min_mhz..max_mhz in step_mhz steps, ascending. Throws InputError naming `flag` when the
/// range is empty or the step not positive, or naming the first clock `gpu` does not support.
[[nodiscard]] std::vector<int> clocks_in_range(const GpuSpec& gpu, int min_mhz, int max_mhz, int step_mhz,
                                               std::string_view flag);

}  // namespace kareus::device
