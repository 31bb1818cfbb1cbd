// kareus/device/energy_window.h - one measurement on a real GPU, through NVML.
//
// What the CUDA backend does around its kernels, without them: lock the SM clock, let it
// settle, cool down, then read the energy counter, the SM clock, clock events and temperature
// around a window of work; judge whether the locked clock held (window_is_stable); throw away a
// window that did not, up to max_retries; and refuse a counter that never advanced (a stall, a
// wrap, a driver reload) instead of recording the unsigned difference. The work is a callback,
// so the tests run all of this against the stand-in libnvidia-ml.so.1 with a timed wait, and the
// CUDA backend with its kernels. Free of CUDA. Units: s, J, MHz, W, C.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

#include "kareus/device/cuda_device.h"
#include "kareus/device/device.h"
#include "kareus/device/measurement_log.h"
#include "kareus/nvml/nvml.h"

namespace kareus::device {

/// Sleeps `seconds` in short slices, throwing (ClockLockGuard::throw_if_interrupted) as soon as
/// SIGINT/SIGTERM arrives, so a signal during a cool-down resets the clocks promptly.
void sleep_interruptible(double seconds);

/// The NVML readings of one window; the work callback calls begin() just before the window's
/// runs, sample() every ~50 ms of work and end() once the work has finished.
class EnergyWindow {
 public:
  EnergyWindow(nvml::NvmlLibrary& nvml, int gpu_index) : nvml_(nvml), gpu_index_(gpu_index) {}

  /// Reads the temperature and the energy counter, and starts the wall clock.
  void begin();
  /// Reads the SM clock and the clock-event reasons; throws when SIGINT/SIGTERM arrived.
  void sample();
  /// Stops the wall clock, reads the counter, the clock once more and the temperature.
  void end();

  /// The readings so far as MeasurementDetails (window_s, clocks, events, temperatures, power);
  /// power_mean_w is 0 when the counter did not advance.
  [[nodiscard]] MeasurementDetails details() const;
  [[nodiscard]] bool energy_moved() const { return energy_end_mj_ > energy_start_mj_; }
  /// Energy over the window; 0 when the counter did not advance.
  [[nodiscard]] double energy_j() const;
  [[nodiscard]] std::uint64_t energy_start_mj() const { return energy_start_mj_; }
  [[nodiscard]] std::uint64_t energy_end_mj() const { return energy_end_mj_; }
  [[nodiscard]] double wall_s() const { return wall_s_; }

 private:
  nvml::NvmlLibrary& nvml_;
  int gpu_index_;
  std::chrono::steady_clock::time_point wall_start_;
  double wall_s_ = 0;
  std::uint64_t energy_start_mj_ = 0, energy_end_mj_ = 0;
  double temperature_start_c_ = 0, temperature_end_c_ = 0;
  double clock_min_mhz_ = 0, clock_max_mhz_ = 0, clock_sum_mhz_ = 0;
  int clock_readings_ = 0;
  std::uint64_t clock_events_ = 0;
};

/// What a window's work reports: the device time of all its runs and how many runs it made.
struct WindowWork {
  double time_s = 0;
  int repetitions = 1;
};

/// Whether a window's readings show that the locked clock held: every SM clock reading within
/// `tolerance_mhz` of `locked_mhz`, no throttling clock-event reason (clock_event::kThrottling:
/// power cap, thermal, hardware slowdowns; idle and application clocks do not count) and an
/// energy counter that moved.
[[nodiscard]] bool window_is_stable(const MeasurementDetails& details, int locked_mhz, double tolerance_mhz,
                                    bool energy_moved);

/// A measurement and how its last window went.
struct WindowMeasurement {
  Measurement per_run;  ///< time and energy of one run (the window's over its repetitions)
  MeasurementDetails details;
};

/// Locks `freq_mhz` through `guard`, waits options.clock_settle_s, then, up to
/// options.max_retries + 1 times: cools down options.cooldown_s and runs `run_window` (which
/// warms up and then runs the window between EnergyWindow::begin and end). Returns the first
/// stable window, or the last one marked unstable. Throws Error naming the GPU, `what` and both
/// counter readings when the counter did not advance in any window. The clock stays locked (the
/// guard resets it on every way out).
[[nodiscard]] WindowMeasurement measure_window(nvml::NvmlLibrary& nvml, nvml::ClockLockGuard& guard,
                                               const CudaDeviceOptions& options, int freq_mhz, std::string_view what,
                                               const std::function<WindowWork(EnergyWindow&)>& run_window);

}  // namespace kareus::device
