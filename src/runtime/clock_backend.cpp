#include "kareus/runtime/clock_backend.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/runtime/kareusd_client.h"
#include "kareus/runtime/nvml_clock_backend.h"

namespace kareus::runtime {

RecorderClockBackend::RecorderClockBackend(std::vector<int> supported_clocks_mhz)
    : supported_mhz_(std::move(supported_clocks_mhz)) {
  if (supported_mhz_.empty()) throw InputError("recorder backend: the supported clock list is empty");
  for (int clock : supported_mhz_) {
    if (clock <= 0) throw InputError(fmt::format("recorder backend: supported clock {} MHz must be > 0", clock));
  }
  std::sort(supported_mhz_.begin(), supported_mhz_.end(), std::greater<>());
  supported_mhz_.erase(std::unique(supported_mhz_.begin(), supported_mhz_.end()), supported_mhz_.end());
}

int RecorderClockBackend::effective_locked(int freq_mhz) const {
  for (int clock : supported_mhz_) {
    if (clock <= freq_mhz) return clock;
  }
  return supported_mhz_.back();
}

void RecorderClockBackend::set_locked_clock(int freq_mhz) {
  if (freq_mhz <= 0) throw Error(fmt::format("recorder backend: cannot lock the clock to {} MHz", freq_mhz));
  std::lock_guard lock(mutex_);
  locked_mhz_ = freq_mhz;
  calls_.push_back({RecordedClockCall::Kind::kSet, freq_mhz});
}

void RecorderClockBackend::reset() {
  std::lock_guard lock(mutex_);
  locked_mhz_.reset();
  calls_.push_back({RecordedClockCall::Kind::kReset, 0});
}

int RecorderClockBackend::read_clock_mhz() {
  std::lock_guard lock(mutex_);
  return locked_mhz_ ? effective_locked(*locked_mhz_) : supported_mhz_.front();
}

std::vector<int> RecorderClockBackend::supported_clocks_mhz() {
  std::lock_guard lock(mutex_);
  return supported_mhz_;
}

std::optional<std::uint64_t> RecorderClockBackend::read_energy_mj() {
  std::lock_guard lock(mutex_);
  energy_mj_ += static_cast<std::uint64_t>(locked_mhz_ ? effective_locked(*locked_mhz_) : supported_mhz_.front());
  return energy_mj_;
}

std::vector<RecordedClockCall> RecorderClockBackend::calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

std::optional<int> RecorderClockBackend::locked_clock_mhz() const {
  std::lock_guard lock(mutex_);
  return locked_mhz_;
}

std::vector<int> RecorderClockBackend::default_clocks_mhz() {
  std::vector<int> clocks;
  for (int clock = 1980; clock >= 210; clock -= 15) clocks.push_back(clock);
  return clocks;
}

std::unique_ptr<ClockBackend> make_clock_backend(std::string_view spec, int gpu_index) {
  if (gpu_index < 0) throw InputError(fmt::format("clock backend: gpu index must be >= 0, found {}", gpu_index));
  if (spec == "recorder") return std::make_unique<RecorderClockBackend>();
  if (spec == "nvml" || spec.starts_with("nvml:")) {
    const std::string path = spec == "nvml" ? std::string(nvml::kNvmlLibraryName) : std::string(spec.substr(5));
    return std::make_unique<NvmlClockBackend>(std::make_shared<nvml::NvmlLibrary>(path), gpu_index);
  }
  if (spec.starts_with("kareusd:") && spec.size() > 8) {
    return std::make_unique<KareusdClockBackend>(std::string(spec.substr(8)), gpu_index);
  }
  throw InputError(
      fmt::format("clock backend \"{}\" is unknown: expected \"recorder\", \"nvml\", \"nvml:LIBRARY_PATH\" or "
                  "\"kareusd:SOCKET_PATH\"",
                  spec));
}

}  // namespace kareus::runtime
