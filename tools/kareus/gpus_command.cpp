// kareus gpus: the built-in GPU presets of the emulator, with their headline numbers.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "kareus/device/gpu_spec.h"
#include "listing_command.h"

namespace kareus::cli {
namespace {

void print_gpus(bool json) {
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  if (!json) {
    fmt::print("{:<10} {:>4} {:>16} {:>12} {:>9} {:>9} {:>8} {:>9}  {}\n", "name", "SMs", "clocks MHz", "bf16 TFLOP/s",
               "HBM GB/s", "link GB/s", "limit W", "static W", "description");
  }
  for (const std::string& name : device::gpu_preset_names()) {
    const device::GpuSpec gpu = device::load_gpu(name);
    const double peak_tflops = gpu.peak_flops(gpu.clock_max_mhz, gpu.sm_count) / 1e12;
    if (json) {
      gpus.push_back({{"name", gpu.name},
                      {"description", gpu.description},
                      {"sm_count", gpu.sm_count},
                      {"clock_min_mhz", gpu.clock_min_mhz},
                      {"clock_max_mhz", gpu.clock_max_mhz},
                      {"clock_step_mhz", gpu.clock_step_mhz},
                      {"bf16_peak_tflops", peak_tflops},
                      {"hbm_bandwidth_gbps", gpu.hbm_bandwidth_gbps},
                      {"link_bandwidth_gbps", gpu.link_bandwidth_gbps},
                      {"power_limit_w", gpu.power_limit_w},
                      {"static_power_w", gpu.static_power_w}});
      continue;
    }
    const std::string clocks = fmt::format("{}..{}/{}", gpu.clock_min_mhz, gpu.clock_max_mhz, gpu.clock_step_mhz);
    fmt::print("{:<10} {:>4} {:>16} {:>12.1f} {:>9.0f} {:>9.0f} {:>8.0f} {:>9.0f}  {}\n", gpu.name, gpu.sm_count,
               clocks, peak_tflops, gpu.hbm_bandwidth_gbps, gpu.link_bandwidth_gbps, gpu.power_limit_w,
               gpu.static_power_w, gpu.description);
  }
  if (json) fmt::print("{}\n", nlohmann::ordered_json{{"gpus", gpus}}.dump(2));
}

}  // namespace

void add_gpus_command(CLI::App& app) {
  add_listing_command(app, "gpus", "list the GPU presets of the emulator (peak at the max clock)", print_gpus);
}

}  // namespace kareus::cli
