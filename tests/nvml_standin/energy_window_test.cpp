// The CUDA backend's NVML side (device/energy_window.h) against the stand-in libnvidia-ml.so.1,
// loaded by path through the normal loader, with a timed wait as the window's work: the energy
// it records is the stand-in's power x wall time, a window whose clock did not hold is retried
// and then marked, a counter that stalls or goes back is never recorded, an NVML fault is an
// error naming the call, and SIGTERM mid-window resets the clock. Its own binary (not
// device_tests), so that no other test of the process can pick up the stand-in in place of a
// real driver. About 15 s.
#include "kareus/device/energy_window.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/input_error.h"
#include "kareus/common/error.h"

namespace kareus::device {
namespace {

// The stand-in's power model (tests/nvml_standin/nvml_standin.cpp): 100 W + 0.1 W per locked MHz.
constexpr int kLockedMhz = 1005;
constexpr double kLockedPowerW = 100 + 0.1 * kLockedMhz;
constexpr double kCounterStepJ = kLockedPowerW * 0.1;  // the counter moves every 100 ms

class EnergyWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/energy_window.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    state_path_ = dir_ + "/gpu.state";
    ::setenv("KAREUS_NVML_STANDIN_STATE", state_path_.c_str(), 1);
    nvml_ = std::make_unique<nvml::NvmlLibrary>(KAREUS_NVML_STANDIN_PATH);
    options_.gpu_index = 0;
    options_.clock_settle_s = 0.01;
    options_.cooldown_s = 0.01;
    options_.max_retries = 2;
    options_.handle_signals = false;
  }
  void TearDown() override {
    nvml_.reset();
    std::remove(state_path_.c_str());
    ::rmdir(dir_.c_str());
  }

  /// Adds (or replaces) a line of the stand-in's state file, under its lock.
  void set_state_line(const std::string& prefix, const std::string& line) {
    const int fd = ::open(state_path_.c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ::flock(fd, LOCK_EX);
    std::string text, kept;
    char chunk[4096];
    for (ssize_t count; (count = ::read(fd, chunk, sizeof(chunk))) > 0;) text.append(chunk, count);
    std::istringstream lines(text);
    for (std::string each; std::getline(lines, each);) {
      if (each.rfind(prefix, 0) != 0) kept += each + "\n";
    }
    kept += line + "\n";
    ASSERT_EQ(::ftruncate(fd, 0), 0);
    ASSERT_EQ(::pwrite(fd, kept.data(), kept.size(), 0), static_cast<ssize_t>(kept.size()));
    ::close(fd);
  }
  [[nodiscard]] std::string state() const {
    std::ifstream in(state_path_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  /// A window of `runs` runs of `run_s` each, sampled after every run.
  static std::function<WindowWork(EnergyWindow&)> timed_work(int runs, double run_s) {
    return [=](EnergyWindow& window) {
      window.begin();
      for (int run = 0; run < runs; ++run) {
        std::this_thread::sleep_for(std::chrono::duration<double>(run_s));
        window.sample();
      }
      window.end();
      return WindowWork{runs * run_s, runs};
    };
  }

  std::string dir_, state_path_;
  std::unique_ptr<nvml::NvmlLibrary> nvml_;
  CudaDeviceOptions options_;
};

TEST_F(EnergyWindowTest, RecordsTheLockedClocksPowerOverTheWindow) {
  nvml::ClockLockGuard guard(*nvml_, {0}, false);
  const WindowMeasurement result =
      measure_window(*nvml_, guard, options_, kLockedMhz, "kernel:fc1", timed_work(20, 0.1));
  EXPECT_NE(state().find("gpu 0 locked_mhz 1005"), std::string::npos) << state();
  const MeasurementDetails& details = result.details;
  EXPECT_TRUE(details.stable);
  EXPECT_EQ(details.retries, 0);
  EXPECT_EQ(details.repetitions, 20);
  EXPECT_EQ(details.clock_min_mhz, kLockedMhz);
  EXPECT_EQ(details.clock_max_mhz, kLockedMhz);
  EXPECT_EQ(details.clock_mean_mhz, kLockedMhz);
  EXPECT_EQ(details.temperature_start_c, 40);
  EXPECT_GE(details.window_s, 2.0);
  // Energy = power x wall time, within one step of the counter at each end.
  const double window_energy_j = details.power_mean_w * details.window_s;
  EXPECT_NEAR(window_energy_j, kLockedPowerW * details.window_s, 2 * kCounterStepJ);
  EXPECT_NEAR(result.per_run.energy_j, window_energy_j / 20, 1e-9);
  EXPECT_NEAR(result.per_run.time_s, 0.1, 1e-12);
  guard.reset();
  EXPECT_NE(state().find("gpu 0 locked_mhz 0"), std::string::npos) << state();
}

TEST_F(EnergyWindowTest, AWindowThatThrottledIsRetriedThenMarkedUnstable) {
  set_state_line("clock_events", "clock_events 4");  // sw power cap
  nvml::ClockLockGuard guard(*nvml_, {0}, false);
  const WindowMeasurement result =
      measure_window(*nvml_, guard, options_, kLockedMhz, "kernel:fc1", timed_work(3, 0.1));
  EXPECT_FALSE(result.details.stable);
  EXPECT_EQ(result.details.retries, options_.max_retries);
  EXPECT_EQ(result.details.clock_events, nvml::clock_event::kSwPowerCap);
  EXPECT_GT(result.per_run.energy_j, 0);
}

TEST_F(EnergyWindowTest, ACounterThatWentBackOnceIsRetriedAndTheNextWindowRecorded) {
  nvml::ClockLockGuard guard(*nvml_, {0}, false);
  int windows = 0;
  auto work = [&](EnergyWindow& window) {
    window.begin();
    if (windows++ == 0) set_state_line("gpu 0 energy_mj", "gpu 0 energy_mj 1000");  // a driver reload
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    window.sample();
    window.end();
    return WindowWork{0.3, 1};
  };
  const WindowMeasurement result = measure_window(*nvml_, guard, options_, kLockedMhz, "kernel:fc1", work);
  EXPECT_EQ(windows, 2);
  EXPECT_EQ(result.details.retries, 1);
  EXPECT_TRUE(result.details.stable);
  EXPECT_NEAR(result.per_run.energy_j, kLockedPowerW * result.details.window_s, 2 * kCounterStepJ);
}

TEST_F(EnergyWindowTest, ACounterThatNeverAdvancesIsAnErrorNamingTheGpuAndTheWork) {
  set_state_line("energy", "energy stall");
  nvml::ClockLockGuard guard(*nvml_, {0}, false);
  const std::string message = test_common::error_of<Error>(
      [&] { (void)measure_window(*nvml_, guard, options_, kLockedMhz, "kernel:fc1", timed_work(2, 0.1)); });
  EXPECT_NE(message.find("gpu 0: NVML's energy counter did not advance"), std::string::npos) << message;
  EXPECT_NE(message.find("in 3 tries"), std::string::npos) << message;
  EXPECT_NE(message.find("kernel:fc1 at 1005 MHz is not recorded"), std::string::npos) << message;
}

TEST_F(EnergyWindowTest, AnNvmlFaultIsAnErrorNamingTheCall) {
  set_state_line("fault nvmlDeviceGetTotalEnergyConsumption", "fault nvmlDeviceGetTotalEnergyConsumption 15");
  nvml::ClockLockGuard guard(*nvml_, {0}, false);
  const std::string message = test_common::error_of<Error>(
      [&] { (void)measure_window(*nvml_, guard, options_, kLockedMhz, "kernel:fc1", timed_work(1, 0.01)); });
  EXPECT_NE(message.find("nvmlDeviceGetTotalEnergyConsumption(gpu 0"), std::string::npos) << message;
}

TEST_F(EnergyWindowTest, SigtermMidWindowStopsTheWindowAndTheGuardResetsTheClock) {
  std::string message;
  {
    nvml::ClockLockGuard guard(*nvml_, {0}, true);
    auto work = [&](EnergyWindow& window) {
      window.begin();
      std::raise(SIGTERM);  // the handler only sets a flag; sample() throws
      window.sample();
      window.end();
      return WindowWork{1, 1};
    };
    message = test_common::error_of<Error>(
        [&] { (void)measure_window(*nvml_, guard, options_, kLockedMhz, "kernel:fc1", work); });
    EXPECT_NE(state().find("gpu 0 locked_mhz 1005"), std::string::npos) << state();
  }
  EXPECT_NE(message.find("interrupted by signal 15"), std::string::npos) << message;
  EXPECT_NE(state().find("gpu 0 locked_mhz 0"), std::string::npos) << state();
}

}  // namespace
}  // namespace kareus::device
