// kareus/runtime/nvml.h - NVIDIA's management library, loaded at run time, as a ClockBackend.
//
// kareus builds and runs without a GPU, so libnvidia-ml.so.1 is dlopen'ed rather than linked;
// the few entry points used are declared by hand from NVIDIA's NVML API reference (nvmlInit_v2,
// nvmlDeviceSetGpuLockedClocks, nvmlDeviceGetClockInfo with NVML_CLOCK_SM, supported graphics
// and memory clocks, nvmlDeviceGetTotalEnergyConsumption in mJ, nvmlErrorString). Locking
// clocks needs root or CAP_SYS_ADMIN; unprivileged jobs use the kareusd daemon instead.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/runtime/clock_backend.h"

namespace kareus::runtime {

inline constexpr std::string_view kNvmlLibraryName = "libnvidia-ml.so.1";

/// A loaded and initialized NVML (nvmlInit_v2 on construction, nvmlShutdown on destruction).
/// Shared by the backends of all GPUs of a process. Calls are thread-safe (NVML's guarantee).
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
  void set_locked_clock(int gpu_index, int freq_mhz);
  void reset_locked_clock(int gpu_index);
  [[nodiscard]] int sm_clock_mhz(int gpu_index);
  /// Graphics clocks supported at the highest supported memory clock, descending.
  [[nodiscard]] std::vector<int> supported_clocks_mhz(int gpu_index);
  [[nodiscard]] std::uint64_t total_energy_mj(int gpu_index);

 private:
  struct Api;
  void* handle_for(int gpu_index);
  [[noreturn]] void fail(int code, const std::string& call) const;

  std::string library_path_;
  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
};

/// One GPU through NVML.
class NvmlClockBackend final : public ClockBackend {
 public:
  /// Throws InputError if `gpu_index` does not exist.
  NvmlClockBackend(std::shared_ptr<NvmlLibrary> library, int gpu_index);

  void set_locked_clock(int freq_mhz) override { library_->set_locked_clock(gpu_index_, freq_mhz); }
  void reset() override { library_->reset_locked_clock(gpu_index_); }
  [[nodiscard]] int read_clock_mhz() override { return library_->sm_clock_mhz(gpu_index_); }
  [[nodiscard]] std::vector<int> supported_clocks_mhz() override { return library_->supported_clocks_mhz(gpu_index_); }
  [[nodiscard]] std::optional<std::uint64_t> read_energy_mj() override { return library_->total_energy_mj(gpu_index_); }
  [[nodiscard]] std::string describe() const override;

 private:
  std::shared_ptr<NvmlLibrary> library_;
  int gpu_index_;
};

}  // namespace kareus::runtime
