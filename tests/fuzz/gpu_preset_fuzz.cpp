// libFuzzer target for the GPU preset parser (data/gpus/*.json format): any bytes parse or throw
// InputError, and a parsed preset's clock range is consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kareus/common/error.h"
#include "kareus/device/gpu_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const kareus::device::GpuSpec gpu = kareus::device::parse_gpu(text, "fuzz.json");
    if (!gpu.supports_clock(gpu.clock_default_mhz) || gpu.clock_max_mhz < gpu.clock_min_mhz) std::abort();
  } catch (const kareus::InputError&) {
  }
  return 0;
}
