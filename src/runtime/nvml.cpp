#include "kareus/runtime/nvml.h"

#include <algorithm>
#include <functional>

#include <dlfcn.h>
#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::runtime {
namespace {

// From NVIDIA's NVML API reference (nvml.h); only what kareus calls.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
constexpr nvmlReturn_t kNvmlErrorNoPermission = 4;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM

}  // namespace

struct NvmlLibrary::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*device_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*set_locked_clocks)(nvmlDevice_t, unsigned int, unsigned int) = nullptr;
  nvmlReturn_t (*reset_locked_clocks)(nvmlDevice_t) = nullptr;
  nvmlReturn_t (*clock_info)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*supported_memory_clocks)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*supported_graphics_clocks)(nvmlDevice_t, unsigned int, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*total_energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
};

namespace {

template <typename Function>
void bind(void* library, const char* name, Function*& target, const std::string& path) {
  void* symbol = ::dlsym(library, name);
  if (symbol == nullptr) {
    throw Error(fmt::format("{} has no entry point {} (driver too old?)", path, name));
  }
  target = reinterpret_cast<Function*>(symbol);
}

}  // namespace

NvmlLibrary::NvmlLibrary(const std::string& library_path) : library_path_(library_path), api_(std::make_unique<Api>()) {
  library_ = ::dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    const char* reason = ::dlerror();
    throw Error(fmt::format("no NVIDIA driver found: {} could not be loaded ({}); on a machine without a GPU use the "
                            "\"recorder\" clock backend",
                            library_path, reason != nullptr ? reason : "unknown reason"));
  }
  try {
    bind(library_, "nvmlInit_v2", api_->init, library_path);
    bind(library_, "nvmlShutdown", api_->shutdown, library_path);
    bind(library_, "nvmlDeviceGetCount_v2", api_->device_count, library_path);
    bind(library_, "nvmlDeviceGetHandleByIndex_v2", api_->handle_by_index, library_path);
    bind(library_, "nvmlDeviceSetGpuLockedClocks", api_->set_locked_clocks, library_path);
    bind(library_, "nvmlDeviceResetGpuLockedClocks", api_->reset_locked_clocks, library_path);
    bind(library_, "nvmlDeviceGetClockInfo", api_->clock_info, library_path);
    bind(library_, "nvmlDeviceGetSupportedMemoryClocks", api_->supported_memory_clocks, library_path);
    bind(library_, "nvmlDeviceGetSupportedGraphicsClocks", api_->supported_graphics_clocks, library_path);
    bind(library_, "nvmlDeviceGetTotalEnergyConsumption", api_->total_energy, library_path);
    bind(library_, "nvmlErrorString", api_->error_string, library_path);
    if (const nvmlReturn_t code = api_->init(); code != kNvmlSuccess) fail(code, "nvmlInit_v2");
  } catch (...) {
    ::dlclose(library_);
    throw;
  }
}

NvmlLibrary::~NvmlLibrary() {
  api_->shutdown();
  ::dlclose(library_);
}

void NvmlLibrary::fail(int code, const std::string& call) const {
  const char* text = api_->error_string != nullptr ? api_->error_string(code) : nullptr;
  std::string message = fmt::format("{} failed: {} (NVML error {})", call, text != nullptr ? text : "unknown", code);
  if (code == kNvmlErrorNoPermission) {
    message += "; changing GPU clocks needs root or CAP_SYS_ADMIN: run as root, or run the kareusd daemon and use the "
               "\"kareusd:SOCKET_PATH\" clock backend";
  } else if (code == kNvmlErrorNotSupported) {
    message += "; this GPU does not support locking clocks (Volta or newer is needed)";
  }
  throw Error(message);
}

int NvmlLibrary::device_count() {
  unsigned int count = 0;
  if (const nvmlReturn_t code = api_->device_count(&count); code != kNvmlSuccess) fail(code, "nvmlDeviceGetCount_v2");
  return static_cast<int>(count);
}

void NvmlLibrary::check_device(int gpu_index) {
  const int count = device_count();
  if (gpu_index < 0 || gpu_index >= count) {
    throw InputError(fmt::format("gpu index {} is out of range: NVML sees {} GPUs", gpu_index, count));
  }
}

void* NvmlLibrary::handle_for(int gpu_index) {
  nvmlDevice_t device = nullptr;
  if (const nvmlReturn_t code = api_->handle_by_index(static_cast<unsigned int>(gpu_index), &device);
      code != kNvmlSuccess) {
    fail(code, fmt::format("nvmlDeviceGetHandleByIndex_v2(gpu {})", gpu_index));
  }
  return device;
}

void NvmlLibrary::set_locked_clock(int gpu_index, int freq_mhz) {
  const auto device = static_cast<nvmlDevice_t>(handle_for(gpu_index));
  const auto clock = static_cast<unsigned int>(freq_mhz);
  if (const nvmlReturn_t code = api_->set_locked_clocks(device, clock, clock); code != kNvmlSuccess) {
    fail(code, fmt::format("nvmlDeviceSetGpuLockedClocks(gpu {}, {} MHz)", gpu_index, freq_mhz));
  }
}

void NvmlLibrary::reset_locked_clock(int gpu_index) {
  const auto device = static_cast<nvmlDevice_t>(handle_for(gpu_index));
  if (const nvmlReturn_t code = api_->reset_locked_clocks(device); code != kNvmlSuccess) {
    fail(code, fmt::format("nvmlDeviceResetGpuLockedClocks(gpu {})", gpu_index));
  }
}

int NvmlLibrary::sm_clock_mhz(int gpu_index) {
  const auto device = static_cast<nvmlDevice_t>(handle_for(gpu_index));
  unsigned int clock = 0;
  if (const nvmlReturn_t code = api_->clock_info(device, kNvmlClockSm, &clock); code != kNvmlSuccess) {
    fail(code, fmt::format("nvmlDeviceGetClockInfo(gpu {}, NVML_CLOCK_SM)", gpu_index));
  }
  return static_cast<int>(clock);
}

std::vector<int> NvmlLibrary::supported_clocks_mhz(int gpu_index) {
  const auto device = static_cast<nvmlDevice_t>(handle_for(gpu_index));
  // Ask for the count first; NVML answers INSUFFICIENT_SIZE with the count it needs.
  auto query = [&](auto&& call, const std::string& name) {
    unsigned int count = 0;
    nvmlReturn_t code = call(&count, nullptr);
    std::vector<unsigned int> values(count);
    if (code == kNvmlErrorInsufficientSize || code == kNvmlSuccess) code = call(&count, values.data());
    if (code != kNvmlSuccess) fail(code, name);
    values.resize(count);
    return values;
  };
  const auto memory = query([&](unsigned int* count, unsigned int* values) {
    return api_->supported_memory_clocks(device, count, values);
  }, fmt::format("nvmlDeviceGetSupportedMemoryClocks(gpu {})", gpu_index));
  if (memory.empty()) throw Error(fmt::format("gpu {}: NVML reports no supported memory clocks", gpu_index));
  const unsigned int memory_mhz = *std::max_element(memory.begin(), memory.end());
  const auto graphics = query([&](unsigned int* count, unsigned int* values) {
    return api_->supported_graphics_clocks(device, memory_mhz, count, values);
  }, fmt::format("nvmlDeviceGetSupportedGraphicsClocks(gpu {}, memory {} MHz)", gpu_index, memory_mhz));
  std::vector<int> clocks(graphics.begin(), graphics.end());
  std::sort(clocks.begin(), clocks.end(), std::greater<>());
  return clocks;
}

std::uint64_t NvmlLibrary::total_energy_mj(int gpu_index) {
  const auto device = static_cast<nvmlDevice_t>(handle_for(gpu_index));
  unsigned long long energy_mj = 0;
  if (const nvmlReturn_t code = api_->total_energy(device, &energy_mj); code != kNvmlSuccess) {
    fail(code, fmt::format("nvmlDeviceGetTotalEnergyConsumption(gpu {})", gpu_index));
  }
  return energy_mj;
}

NvmlClockBackend::NvmlClockBackend(std::shared_ptr<NvmlLibrary> library, int gpu_index)
    : library_(std::move(library)), gpu_index_(gpu_index) {
  library_->check_device(gpu_index_);
}

std::string NvmlClockBackend::describe() const { return fmt::format("nvml gpu {}", gpu_index_); }

}  // namespace kareus::runtime
