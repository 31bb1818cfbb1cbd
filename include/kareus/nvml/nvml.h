// kareus/nvml/nvml.h - NVIDIA's management library, loaded at run time.
//
// kareus's window on a real GPU's clocks, power and energy: the CUDA backend locks the SM clock
// and reads the energy counter through it, and the runtime's NVML clock backend
// (runtime/nvml_clock_backend.h) wraps it. Its own library (kareus_nvml, needing only
// common/error.h), so the runtime reaches NVML without the device layer's emulator. kareus builds
// and runs without a GPU, so libnvidia-ml.so.1 is dlopen'ed rather than linked; the entry points used are declared by
// hand from NVIDIA's NVML API reference (nvmlInit_v2, nvmlDeviceSetGpuLockedClocks, nvmlDeviceGetClockInfo with
// NVML_CLOCK_SM, supported graphics and memory clocks, nvmlDeviceGetTotalEnergyConsumption in mJ,
// nvmlDeviceGetPowerUsage in mW, nvmlDeviceGetTemperature in C, nvmlDeviceGetCurrentClocksEventReasons (formerly
// ...ThrottleReasons), nvmlDeviceGetName, nvmlErrorString). Locking clocks needs root or
// CAP_SYS_ADMIN; unprivileged jobs use the kareusd daemon instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::nvml {

inline constexpr std::string_view kNvmlLibraryName = "libnvidia-ml.so.1";

/// Bits of nvmlClocksEventReasons (NVML's nvmlClocksEventReason* / nvmlClocksThrottleReason*).
namespace clock_event {
inline constexpr std::uint64_t kGpuIdle = 0x1;
inline constexpr std::uint64_t kApplicationsClocksSetting = 0x2;
inline constexpr std::uint64_t kSwPowerCap = 0x4;
inline constexpr std::uint64_t kHwSlowdown = 0x8;
inline constexpr std::uint64_t kSyncBoost = 0x10;
inline constexpr std::uint64_t kSwThermalSlowdown = 0x20;
inline constexpr std::uint64_t kHwThermalSlowdown = 0x40;
inline constexpr std::uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr std::uint64_t kDisplayClockSetting = 0x100;
/// Reasons that mean the clock did not hold what was locked: power cap, thermal, HW slowdowns.
inline constexpr std::uint64_t kThrottling =
    kSwPowerCap | kHwSlowdown | kSwThermalSlowdown | kHwThermalSlowdown | kHwPowerBrakeSlowdown;
}  // namespace clock_event

/// Names of the set bits of a clock-event mask, e.g. {"sw_power_cap", "hw_thermal_slowdown"};
/// unknown bits are named "bit_N".
[[nodiscard]] std::vector<std::string> clock_event_names(std::uint64_t reasons);

/// A loaded and initialized NVML (nvmlInit_v2 on construction, nvmlShutdown on destruction).
/// Shared by all users of a process. Calls are thread-safe (NVML's guarantee). Every call
/// throws Error with NVML's message and what to do (permission, unsupported GPU, driver).
class NvmlLibrary {
 public:
  /// Loads `library_path` (a name for the loader's search, or a path). Throws Error "no NVIDIA
  /// driver found: libnvidia-ml.so.1 could not be loaded (...)" when dlopen fails, and Error with
  /// NVML's message when an entry point is missing or nvmlInit_v2 fails.
  explicit NvmlLibrary(const std::string& library_path = std::string(kNvmlLibraryName));
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  /// Number of GPUs NVML sees.
  [[nodiscard]] int device_count();
  /// Checks `gpu_index` exists (throws InputError naming the index and the count otherwise).
  void check_device(int gpu_index);
  /// The product name, e.g. "NVIDIA H200".
  [[nodiscard]] std::string name(int gpu_index);
  /// Locks the SM clock to `freq_mhz` (min = max). Needs root or CAP_SYS_ADMIN.
  void set_locked_clock(int gpu_index, int freq_mhz);
  /// Releases a lock; the driver picks clocks again.
  void reset_locked_clock(int gpu_index);
  /// The SM clock in effect now (MHz).
  [[nodiscard]] int sm_clock_mhz(int gpu_index);
  /// Graphics clocks supported at the highest supported memory clock, descending.
  [[nodiscard]] std::vector<int> supported_clocks_mhz(int gpu_index);
  /// Energy since the driver loaded (mJ); Volta or newer.
  [[nodiscard]] std::uint64_t total_energy_mj(int gpu_index);
  /// Board power draw (mW); on Ampere and newer (except GA100) an average over ~1 s.
  [[nodiscard]] unsigned int power_mw(int gpu_index);
  /// GPU die temperature (C).
  [[nodiscard]] unsigned int temperature_c(int gpu_index);
  /// Active clock-event (throttle) reasons, a mask of clock_event bits.
  [[nodiscard]] std::uint64_t clock_event_reasons(int gpu_index);

 private:
  struct Api;
  void* handle_for(int gpu_index);
  [[noreturn]] void fail(int code, const std::string& call) const;
  // One NVML getter for a GPU: `get(device, &value)`; an error names "<call>(gpu N<detail>)".
  template <typename Value, typename Get>
  Value read(int gpu_index, std::string_view call, std::string_view detail, Get get);

  std::string library_path_;
  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
};

/// Locks the SM clock of some GPUs for a scope and resets them on every way out: the destructor
/// (normal return and exceptions), and SIGINT/SIGTERM, whose handler only sets a flag that the
/// measurement loop polls through interrupted() (NVML is not async-signal-safe), so the loop
/// throws, unwinds and the destructor resets; the handler is one-shot, so a second signal kills
/// the process the default way. One guard per process at a time (throws Error otherwise); the
/// previous signal handlers are restored on destruction.
class ClockLockGuard {
 public:
  ClockLockGuard(NvmlLibrary& nvml, std::vector<int> gpu_indices, bool handle_signals = true);
  ~ClockLockGuard();
  ClockLockGuard(const ClockLockGuard&) = delete;
  ClockLockGuard& operator=(const ClockLockGuard&) = delete;

  /// Locks every GPU of the guard to `freq_mhz`.
  void lock(int freq_mhz);
  /// Resets every GPU now (the destructor does it again, harmlessly).
  void reset();
  /// The clock last locked, 0 when none.
  [[nodiscard]] int locked_mhz() const { return locked_mhz_; }
  /// The signal that arrived since the guard was made, or 0.
  [[nodiscard]] static int interrupted();
  /// Throws Error("interrupted by signal N; GPU clocks were reset") when a signal arrived.
  static void throw_if_interrupted();

 private:
  NvmlLibrary& nvml_;
  std::vector<int> gpus_;
  bool handle_signals_;
  int locked_mhz_ = 0;
};

}  // namespace kareus::nvml
