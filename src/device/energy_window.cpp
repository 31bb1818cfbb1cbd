#include "kareus/device/energy_window.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::device {

using Clock = std::chrono::steady_clock;

void sleep_interruptible(double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    nvml::ClockLockGuard::throw_if_interrupted();
    std::this_thread::sleep_for(
        std::min(std::chrono::duration<double>(0.05), std::chrono::duration<double>(until - Clock::now())));
  }
  nvml::ClockLockGuard::throw_if_interrupted();
}

void EnergyWindow::begin() {
  temperature_start_c_ = nvml_.temperature_c(gpu_index_);
  energy_start_mj_ = nvml_.total_energy_mj(gpu_index_);
  wall_start_ = Clock::now();
}

void EnergyWindow::sample() {
  const double clock_mhz = nvml_.sm_clock_mhz(gpu_index_);
  clock_min_mhz_ = clock_readings_ == 0 ? clock_mhz : std::min(clock_min_mhz_, clock_mhz);
  clock_max_mhz_ = std::max(clock_max_mhz_, clock_mhz);
  clock_sum_mhz_ += clock_mhz;
  ++clock_readings_;
  clock_events_ |= nvml_.clock_event_reasons(gpu_index_);
  nvml::ClockLockGuard::throw_if_interrupted();
}

void EnergyWindow::end() {
  wall_s_ = std::chrono::duration<double>(Clock::now() - wall_start_).count();
  energy_end_mj_ = nvml_.total_energy_mj(gpu_index_);
  sample();
  temperature_end_c_ = nvml_.temperature_c(gpu_index_);
}

double EnergyWindow::energy_j() const {
  return energy_moved() ? static_cast<double>(energy_end_mj_ - energy_start_mj_) * 1e-3 : 0;
}

MeasurementDetails EnergyWindow::details() const {
  MeasurementDetails details;
  details.window_s = wall_s_;
  details.clock_min_mhz = clock_min_mhz_;
  details.clock_max_mhz = clock_max_mhz_;
  details.clock_mean_mhz = clock_readings_ > 0 ? clock_sum_mhz_ / clock_readings_ : 0;
  details.clock_events = clock_events_;
  details.temperature_start_c = temperature_start_c_;
  details.temperature_end_c = temperature_end_c_;
  details.power_mean_w = wall_s_ > 0 ? energy_j() / wall_s_ : 0;
  return details;
}

bool window_is_stable(const MeasurementDetails& details, int locked_mhz, double tolerance_mhz, bool energy_moved) {
  return energy_moved && (details.clock_events & nvml::clock_event::kThrottling) == 0 &&
         details.clock_min_mhz >= locked_mhz - tolerance_mhz && details.clock_max_mhz <= locked_mhz + tolerance_mhz;
}

WindowMeasurement measure_window(nvml::NvmlLibrary& nvml, nvml::ClockLockGuard& guard, const CudaDeviceOptions& options,
                                 int freq_mhz, std::string_view what,
                                 const std::function<WindowWork(EnergyWindow&)>& run_window) {
  guard.lock(freq_mhz);
  sleep_interruptible(options.clock_settle_s);
  for (int attempt = 0;; ++attempt) {
    sleep_interruptible(options.cooldown_s);
    EnergyWindow window(nvml, options.gpu_index);
    const WindowWork work = run_window(window);
    WindowMeasurement result;
    result.details = window.details();
    result.details.retries = attempt;
    result.details.repetitions = work.repetitions;
    result.details.stable =
        window_is_stable(result.details, freq_mhz, options.clock_tolerance_mhz, window.energy_moved());
    result.per_run = {work.time_s / work.repetitions, window.energy_j() / work.repetitions};
    // A counter that stalled or went back gives no energy: retried, never recorded (the
    // unsigned difference would be ~1.8e16 J).
    if (!window.energy_moved() && attempt >= options.max_retries) {
      throw Error(fmt::format(
          "gpu {}: NVML's energy counter did not advance over a {:.2f} s window in {} tries (stalled, or it went "
          "back from {} to {} mJ); {} at {} MHz is not recorded",
          options.gpu_index, window.wall_s(), attempt + 1, window.energy_start_mj(), window.energy_end_mj(), what,
          freq_mhz));
    }
    if (result.details.stable || attempt >= options.max_retries) return result;
  }
}

}  // namespace kareus::device
