#include "kareus/device/gpu_spec.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/embedded_data.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::device {
namespace {

namespace jf = json_fields;

struct DoubleField {
  const char* key;
  double GpuSpec::*member;
  double min;
  double max;
};

struct IntField {
  const char* key;
  int GpuSpec::*member;
};

// The preset schema: every parameter, its plausible range, and where it goes.
constexpr DoubleField kDoubleFields[] = {
    {"clock_switch_latency_ms", &GpuSpec::clock_switch_latency_ms, 0, 1000},
    {"flop_per_clock_per_sm", &GpuSpec::flop_per_clock_per_sm, 1, 1e6},
    {"cuda_core_flop_fraction", &GpuSpec::cuda_core_flop_fraction, 1e-3, 1},
    {"gemm_efficiency", &GpuSpec::gemm_efficiency, 0.01, 1},
    {"gemm_tile_m", &GpuSpec::gemm_tile_m, 1, 4096},
    {"gemm_tile_n", &GpuSpec::gemm_tile_n, 1, 4096},
    {"gemm_small_k_half", &GpuSpec::gemm_small_k_half, 0, 1e6},
    {"attention_forward_efficiency", &GpuSpec::attention_forward_efficiency, 0.01, 1},
    {"attention_backward_efficiency", &GpuSpec::attention_backward_efficiency, 0.01, 1},
    {"launch_latency_us", &GpuSpec::launch_latency_us, 0, 1000},
    {"hbm_bandwidth_gbps", &GpuSpec::hbm_bandwidth_gbps, 1, 1e6},
    {"hbm_efficiency", &GpuSpec::hbm_efficiency, 0.01, 1},
    {"sm_bytes_per_clock", &GpuSpec::sm_bytes_per_clock, 0.01, 1e4},
    {"link_bandwidth_gbps", &GpuSpec::link_bandwidth_gbps, 0.01, 1e6},
    {"link_efficiency", &GpuSpec::link_efficiency, 0.01, 1},
    {"link_latency_us", &GpuSpec::link_latency_us, 0, 1e4},
    {"collective_fill_mib", &GpuSpec::collective_fill_mib, 0, 1e4},
    {"cta_bytes_per_clock", &GpuSpec::cta_bytes_per_clock, 0.01, 1e4},
    {"comm_sm_share", &GpuSpec::comm_sm_share, 0, 1},
    {"comm_hbm_bytes_per_byte", &GpuSpec::comm_hbm_bytes_per_byte, 0, 100},
    {"comm_overlap_slowdown", &GpuSpec::comm_overlap_slowdown, 0, 10},
    {"partition_sync_us", &GpuSpec::partition_sync_us, 0, 1e5},
    {"partition_host_us", &GpuSpec::partition_host_us, 0, 1e5},
    {"cp_exchange_ctas", &GpuSpec::cp_exchange_ctas, 1, 1e4},
    {"cp_ring_step_us", &GpuSpec::cp_ring_step_us, 0, 1e5},
    {"power_limit_w", &GpuSpec::power_limit_w, 1, 1e4},
    {"static_power_w", &GpuSpec::static_power_w, 0, 1e4},
    {"idle_power_w", &GpuSpec::idle_power_w, 0, 1e4},
    {"voltage_min_v", &GpuSpec::voltage_min_v, 0.1, 5},
    {"voltage_max_v", &GpuSpec::voltage_max_v, 0.1, 5},
    {"sm_dynamic_power_w", &GpuSpec::sm_dynamic_power_w, 0, 1e4},
    {"hbm_power_w_per_tbps", &GpuSpec::hbm_power_w_per_tbps, 0, 1e4},
    {"link_power_w", &GpuSpec::link_power_w, 0, 1e4},
    {"activity_gemm", &GpuSpec::activity_gemm, 0, 2},
    {"activity_attention", &GpuSpec::activity_attention, 0, 2},
    {"activity_memory_bound", &GpuSpec::activity_memory_bound, 0, 2},
    {"activity_comm_cta", &GpuSpec::activity_comm_cta, 0, 2},
    {"noise_time_fraction", &GpuSpec::noise_time_fraction, 0, 0.5},
    {"noise_energy_fraction", &GpuSpec::noise_energy_fraction, 0, 0.5},
    {"energy_counter_period_ms", &GpuSpec::energy_counter_period_ms, 0, 1e4},
    {"energy_counter_resolution_mj", &GpuSpec::energy_counter_resolution_mj, 0, 1e6},
};

constexpr IntField kIntFields[] = {
    {"sm_count", &GpuSpec::sm_count},
    {"clock_min_mhz", &GpuSpec::clock_min_mhz},
    {"clock_max_mhz", &GpuSpec::clock_max_mhz},
    {"clock_step_mhz", &GpuSpec::clock_step_mhz},
    {"clock_default_mhz", &GpuSpec::clock_default_mhz},
    {"default_comm_ctas", &GpuSpec::default_comm_ctas},
    {"voltage_knee_mhz", &GpuSpec::voltage_knee_mhz},
};

/// A parameter is {"value": V, "source": "..."}: a preset value without a source is refused.
const nlohmann::json& sourced_value(const nlohmann::json& parameters, const char* key, const std::string& origin) {
  const nlohmann::json& entry = jf::require(parameters, key, origin + ": parameters");
  const std::string entry_origin = fmt::format("{}: parameters.{}", origin, key);
  jf::reject_unknown(entry, {"value", "source"}, entry_origin);
  if (jf::require_string(entry, "source", entry_origin).empty()) {
    throw InputError(fmt::format("{}: 'source' must say where the value comes from", entry_origin));
  }
  return jf::require(entry, "value", entry_origin);
}

}  // namespace

std::vector<int> GpuSpec::supported_clocks_mhz() const {
  std::vector<int> clocks;
  for (int clock = clock_min_mhz; clock <= clock_max_mhz; clock += clock_step_mhz) clocks.push_back(clock);
  return clocks;
}

bool GpuSpec::supports_clock(int freq_mhz) const {
  return freq_mhz >= clock_min_mhz && freq_mhz <= clock_max_mhz && (freq_mhz - clock_min_mhz) % clock_step_mhz == 0;
}

double GpuSpec::peak_flops(double freq_mhz, double sms) const { return sms * flop_per_clock_per_sm * freq_mhz * 1e6; }

double GpuSpec::voltage_v(double freq_mhz) const {
  if (freq_mhz <= voltage_knee_mhz) return voltage_min_v;
  const double fraction = (freq_mhz - voltage_knee_mhz) / (clock_max_mhz - voltage_knee_mhz);
  return voltage_min_v + fraction * (voltage_max_v - voltage_min_v);
}

std::optional<ParameterRef> find_parameter(GpuSpec& gpu, std::string_view key) {
  for (const DoubleField& field : kDoubleFields) {
    if (key == field.key) return ParameterRef{&(gpu.*field.member), field.min, field.max};
  }
  return std::nullopt;
}

std::vector<std::string> gpu_preset_names() { return embedded_names("gpus"); }

GpuSpec parse_gpu(std::string_view json_text, std::string_view origin_view) {
  const std::string origin(origin_view);
  const nlohmann::json document = parse_json(json_text, origin);
  jf::reject_unknown(document, {"name", "description", "parameters"}, origin);
  GpuSpec gpu;
  gpu.name = jf::require_string(document, "name", origin);
  gpu.description = document.contains("description") ? jf::require_string(document, "description", origin) : "";
  const nlohmann::json& parameters = jf::require(document, "parameters", origin);
  std::vector<std::string_view> known;
  for (const DoubleField& field : kDoubleFields) {
    known.push_back(field.key);
    const nlohmann::json& value = sourced_value(parameters, field.key, origin);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < field.min ||
        value.get<double>() > field.max) {
      throw InputError(fmt::format("{}: parameters.{} must be a number in [{}, {}], found {}", origin, field.key,
                                   field.min, field.max, jf::excerpt(value)));
    }
    gpu.*field.member = value.get<double>();
  }
  for (const IntField& field : kIntFields) {
    known.push_back(field.key);
    const nlohmann::json& value = sourced_value(parameters, field.key, origin);
    if (!value.is_number_integer() || value.get<long long>() < 1 || value.get<long long>() > 100000) {
      throw InputError(fmt::format("{}: parameters.{} must be an integer in [1, 100000], found {}", origin, field.key,
                                   jf::excerpt(value)));
    }
    gpu.*field.member = value.get<int>();
  }
  jf::reject_unknown(parameters, known, origin + ": parameters");
  if (gpu.clock_max_mhz < gpu.clock_min_mhz || (gpu.clock_max_mhz - gpu.clock_min_mhz) % gpu.clock_step_mhz != 0) {
    throw InputError(fmt::format("{}: clock range {}..{} MHz is not a whole number of {} MHz steps", origin,
                                 gpu.clock_min_mhz, gpu.clock_max_mhz, gpu.clock_step_mhz));
  }
  if (!gpu.supports_clock(gpu.clock_default_mhz) || !gpu.supports_clock(gpu.voltage_knee_mhz)) {
    throw InputError(fmt::format(
        "{}: clock_default_mhz {} and voltage_knee_mhz {} must be supported clocks ({}..{} step {})", origin,
        gpu.clock_default_mhz, gpu.voltage_knee_mhz, gpu.clock_min_mhz, gpu.clock_max_mhz, gpu.clock_step_mhz));
  }
  if (gpu.voltage_max_v < gpu.voltage_min_v) {
    throw InputError(
        fmt::format("{}: voltage_max_v {} is below voltage_min_v {}", origin, gpu.voltage_max_v, gpu.voltage_min_v));
  }
  // Static and idle power are what the GPU draws doing nothing: at or above the power limit no
  // clock could run work, and every energy the emulator predicts would be meaningless.
  using Watts = std::pair<std::string_view, double>;
  for (const auto& [key, watts] :
       {Watts{"static_power_w", gpu.static_power_w}, Watts{"idle_power_w", gpu.idle_power_w}}) {
    if (watts >= gpu.power_limit_w) {
      throw InputError(
          fmt::format("{}: {} {} W is not below power_limit_w {} W", origin, key, watts, gpu.power_limit_w));
    }
  }
  if (gpu.default_comm_ctas > gpu.sm_count) {
    throw InputError(
        fmt::format("{}: default_comm_ctas {} exceeds sm_count {}", origin, gpu.default_comm_ctas, gpu.sm_count));
  }
  return gpu;
}

GpuSpec load_gpu(std::string_view name_or_path) {
  if (auto preset = read_preset(name_or_path, "gpus")) return parse_gpu(preset->text, preset->origin);
  throw InputError(fmt::format("--gpu {}: unknown GPU (presets: {}; or a path to a preset .json file)", name_or_path,
                               fmt::join(gpu_preset_names(), ", ")));
}

void require_supported_clock(const GpuSpec& gpu, int freq_mhz, std::string_view flag) {
  if (!gpu.supports_clock(freq_mhz)) {
    throw InputError(fmt::format("{} {}: {} supports {}..{} MHz in {} MHz steps", flag, freq_mhz, gpu.name,
                                 gpu.clock_min_mhz, gpu.clock_max_mhz, gpu.clock_step_mhz));
  }
}

std::vector<int> artifact_clocks(const GpuSpec& gpu) {
  std::vector<int> clocks;
  for (int clock = gpu.clock_max_mhz - 17 * 30; clock <= gpu.clock_max_mhz; clock += 30) {
    if (gpu.supports_clock(clock)) clocks.push_back(clock);
  }
  return clocks;
}

std::vector<int> clocks_in_range(const GpuSpec& gpu, int min_mhz, int max_mhz, int step_mhz, std::string_view flag) {
  if (min_mhz > max_mhz || step_mhz < 1) {
    throw InputError(
        fmt::format("{} {}:{}:{}: expected MIN:MAX:STEP in MHz with MIN <= MAX and STEP >= 1, e.g. "
                    "900:1410:30",
                    flag, min_mhz, max_mhz, step_mhz));
  }
  std::vector<int> clocks;
  // In long long: a step near INT_MAX past max_mhz would overflow an int.
  for (long long clock = min_mhz; clock <= max_mhz; clock += step_mhz) {
    require_supported_clock(gpu, static_cast<int>(clock), flag);
    clocks.push_back(static_cast<int>(clock));
  }
  return clocks;
}

}  // namespace kareus::device
