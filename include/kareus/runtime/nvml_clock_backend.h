// kareus/runtime/nvml_clock_backend.h - one GPU's clocks through NVML, as a runtime ClockBackend.
//
// The NVML loader itself is its own library (nvml/nvml.h), which the CUDA backend also
// uses to lock clocks and read the energy counter; the runtime wraps it for its frequency
// controller and the kareusd daemon. Units: MHz and mJ.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kareus/nvml/nvml.h"
#include "kareus/runtime/clock_backend.h"

namespace kareus::runtime {

/// One GPU through NVML.
class NvmlClockBackend final : public ClockBackend {
 public:
  /// Throws InputError if `gpu_index` does not exist.
  NvmlClockBackend(std::shared_ptr<nvml::NvmlLibrary> library, int gpu_index);

  void set_locked_clock(int freq_mhz) override { library_->set_locked_clock(gpu_index_, freq_mhz); }
  void reset() override { library_->reset_locked_clock(gpu_index_); }
  [[nodiscard]] int read_clock_mhz() override { return library_->sm_clock_mhz(gpu_index_); }
  [[nodiscard]] std::vector<int> supported_clocks_mhz() override { return library_->supported_clocks_mhz(gpu_index_); }
  [[nodiscard]] std::optional<std::uint64_t> read_energy_mj() override { return library_->total_energy_mj(gpu_index_); }
  [[nodiscard]] std::string describe() const override;

 private:
  std::shared_ptr<nvml::NvmlLibrary> library_;
  int gpu_index_;
};

}  // namespace kareus::runtime
