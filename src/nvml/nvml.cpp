#include "kareus/nvml/nvml.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <functional>
#include <iterator>
#include <utility>

#include <dlfcn.h>
#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::nvml {
namespace {

// From NVIDIA's NVML API reference (nvml.h); only what kareus calls.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
constexpr nvmlReturn_t kNvmlErrorNoPermission = 4;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
constexpr nvmlReturn_t kNvmlErrorDriverNotLoaded = 9;
constexpr nvmlReturn_t kNvmlErrorGpuIsLost = 15;
constexpr int kNvmlClockSm = 1;               // nvmlClockType_t NVML_CLOCK_SM
constexpr int kNvmlTemperatureGpu = 0;        // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
constexpr unsigned int kNvmlNameLength = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

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
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*clock_event_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
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
    throw Error(
        fmt::format("no NVIDIA driver found: {} could not be loaded ({}); install the NVIDIA "
                    "driver, or on a machine without a GPU use the emulator (--backend emulator) or the "
                    "runtime's \"recorder\" clock backend",
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
    bind(library_, "nvmlDeviceGetPowerUsage", api_->power_usage, library_path);
    bind(library_, "nvmlDeviceGetTemperature", api_->temperature, library_path);
    bind(library_, "nvmlDeviceGetName", api_->name, library_path);
    // Renamed in R535; drivers before it only have the "Throttle" spelling (same signature).
    if (void* symbol = ::dlsym(library_, "nvmlDeviceGetCurrentClocksEventReasons"); symbol != nullptr) {
      api_->clock_event_reasons = reinterpret_cast<decltype(api_->clock_event_reasons)>(symbol);
    } else {
      bind(library_, "nvmlDeviceGetCurrentClocksThrottleReasons", api_->clock_event_reasons, library_path);
    }
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
    message +=
        "; changing GPU clocks needs root or CAP_SYS_ADMIN: run as root, or run the kareusd daemon and use the "
        "\"kareusd:SOCKET_PATH\" clock backend";
  } else if (code == kNvmlErrorNotSupported) {
    message +=
        "; this GPU or driver does not support the call (clock locking and the energy counter need Volta "
        "or newer and a recent driver; use the emulator for other GPUs)";
  } else if (code == kNvmlErrorDriverNotLoaded) {
    message += "; no NVIDIA driver is loaded: install it, or use the emulator (--backend emulator)";
  } else if (code == kNvmlErrorGpuIsLost) {
    message += "; the GPU fell off the bus: check dmesg and reset or reboot the node";
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

template <typename Value, typename Get>
Value NvmlLibrary::read(int gpu_index, std::string_view call, std::string_view detail, Get get) {
  const auto device = static_cast<nvmlDevice_t>(handle_for(gpu_index));
  Value value = 0;
  if (const nvmlReturn_t code = get(device, &value); code != kNvmlSuccess) {
    fail(code, fmt::format("{}(gpu {}{})", call, gpu_index, detail));
  }
  return value;
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
  return static_cast<int>(read<unsigned int>(
      gpu_index, "nvmlDeviceGetClockInfo", ", NVML_CLOCK_SM",
      [&](nvmlDevice_t device, unsigned int* clock) { return api_->clock_info(device, kNvmlClockSm, clock); }));
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
  const auto memory = query(
      [&](unsigned int* count, unsigned int* values) { return api_->supported_memory_clocks(device, count, values); },
      fmt::format("nvmlDeviceGetSupportedMemoryClocks(gpu {})", gpu_index));
  if (memory.empty()) throw Error(fmt::format("gpu {}: NVML reports no supported memory clocks", gpu_index));
  const unsigned int memory_mhz = *std::max_element(memory.begin(), memory.end());
  const auto graphics =
      query([&](unsigned int* count,
                unsigned int* values) { return api_->supported_graphics_clocks(device, memory_mhz, count, values); },
            fmt::format("nvmlDeviceGetSupportedGraphicsClocks(gpu {}, memory {} MHz)", gpu_index, memory_mhz));
  std::vector<int> clocks(graphics.begin(), graphics.end());
  std::sort(clocks.begin(), clocks.end(), std::greater<>());
  return clocks;
}

std::uint64_t NvmlLibrary::total_energy_mj(int gpu_index) {
  return read<unsigned long long>(gpu_index, "nvmlDeviceGetTotalEnergyConsumption", "", api_->total_energy);
}

unsigned int NvmlLibrary::power_mw(int gpu_index) {
  return read<unsigned int>(gpu_index, "nvmlDeviceGetPowerUsage", "", api_->power_usage);
}

unsigned int NvmlLibrary::temperature_c(int gpu_index) {
  return read<unsigned int>(gpu_index, "nvmlDeviceGetTemperature", ", NVML_TEMPERATURE_GPU",
                            [&](nvmlDevice_t device, unsigned int* celsius) {
                              return api_->temperature(device, kNvmlTemperatureGpu, celsius);
                            });
}

std::uint64_t NvmlLibrary::clock_event_reasons(int gpu_index) {
  return read<unsigned long long>(gpu_index, "nvmlDeviceGetCurrentClocksEventReasons", "", api_->clock_event_reasons);
}

std::string NvmlLibrary::name(int gpu_index) {
  const auto device = static_cast<nvmlDevice_t>(handle_for(gpu_index));
  char buffer[kNvmlNameLength] = {};
  if (const nvmlReturn_t code = api_->name(device, buffer, kNvmlNameLength); code != kNvmlSuccess) {
    fail(code, fmt::format("nvmlDeviceGetName(gpu {})", gpu_index));
  }
  buffer[kNvmlNameLength - 1] = '\0';
  return buffer;
}

namespace {

// What a signal handler may touch: a lock-free flag, and the handlers to put back.
std::atomic<int> pending_signal{0};
std::atomic<bool> guard_active{false};
struct sigaction previous_int {};
struct sigaction previous_term {};

extern "C" void kareus_clock_guard_signal(int signal_number) { pending_signal.store(signal_number); }

}  // namespace

ClockLockGuard::ClockLockGuard(NvmlLibrary& nvml, std::vector<int> gpu_indices, bool handle_signals)
    : nvml_(nvml), gpus_(std::move(gpu_indices)), handle_signals_(handle_signals) {
  for (int gpu : gpus_) nvml_.check_device(gpu);
  if (!handle_signals_) return;
  if (guard_active.exchange(true)) throw Error("a clock lock guard is already active in this process");
  pending_signal.store(0);
  struct sigaction action {};
  action.sa_handler = kareus_clock_guard_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;  // a second signal takes the default action
  ::sigaction(SIGINT, &action, &previous_int);
  ::sigaction(SIGTERM, &action, &previous_term);
}

ClockLockGuard::~ClockLockGuard() {
  try {
    reset();
  } catch (...) {
    // A destructor must not throw; the clocks stay locked only if NVML itself fails.
  }
  if (handle_signals_) {
    ::sigaction(SIGINT, &previous_int, nullptr);
    ::sigaction(SIGTERM, &previous_term, nullptr);
    guard_active.store(false);
  }
}

void ClockLockGuard::lock(int freq_mhz) {
  locked_mhz_ = freq_mhz;  // set first, so a failure part-way still resets on the way out
  for (int gpu : gpus_) nvml_.set_locked_clock(gpu, freq_mhz);
}

void ClockLockGuard::reset() {
  if (locked_mhz_ == 0) return;
  locked_mhz_ = 0;
  for (int gpu : gpus_) nvml_.reset_locked_clock(gpu);
}

int ClockLockGuard::interrupted() { return pending_signal.load(); }

void ClockLockGuard::throw_if_interrupted() {
  if (const int signal_number = pending_signal.load(); signal_number != 0) {
    throw Error(fmt::format("interrupted by signal {}; GPU clocks are reset on the way out", signal_number));
  }
}

std::vector<std::string> clock_event_names(std::uint64_t reasons) {
  static constexpr std::pair<std::uint64_t, const char*> kNames[] = {
      {clock_event::kGpuIdle, "gpu_idle"},
      {clock_event::kApplicationsClocksSetting, "applications_clocks_setting"},
      {clock_event::kSwPowerCap, "sw_power_cap"},
      {clock_event::kHwSlowdown, "hw_slowdown"},
      {clock_event::kSyncBoost, "sync_boost"},
      {clock_event::kSwThermalSlowdown, "sw_thermal_slowdown"},
      {clock_event::kHwThermalSlowdown, "hw_thermal_slowdown"},
      {clock_event::kHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {clock_event::kDisplayClockSetting, "display_clock_setting"},
  };
  std::vector<std::string> names;
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t mask = std::uint64_t{1} << bit;
    if ((reasons & mask) == 0) continue;
    const auto* known =
        std::find_if(std::begin(kNames), std::end(kNames), [&](const auto& entry) { return entry.first == mask; });
    names.push_back(known != std::end(kNames) ? known->second : fmt::format("bit_{}", bit));
  }
  return names;
}

}  // namespace kareus::nvml
