// The NVML loader against a fake libnvidia-ml.so.1 (tests/nvml/fake_nvml.cpp): calls, error
// paths and messages, without a GPU.
#include "kareus/nvml/nvml.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <functional>

#include "../common/input_error.h"
#include "kareus/common/error.h"

namespace kareus::nvml {
namespace {

using test_common::error_of;
using ::testing::HasSubstr;

// The test opens the same fake library the loader opens (dlopen returns the same handle), so it
// can read and steer the fake's state.
struct FakeControl {
  void* handle = ::dlopen(KAREUS_FAKE_NVML_PATH, RTLD_NOW);
  template <typename Function>
  Function* get(const char* name) const {
    return reinterpret_cast<Function*>(::dlsym(handle, name));
  }
  ~FakeControl() { ::dlclose(handle); }
};

TEST(Nvml, SetReadResetAndEnergyGoThroughTheLibrary) {
  FakeControl control;
  ASSERT_NE(control.handle, nullptr) << ::dlerror();
  auto locked = control.get<unsigned int(unsigned int)>("fake_nvml_locked_mhz");
  NvmlLibrary library(KAREUS_FAKE_NVML_PATH);
  EXPECT_EQ(library.device_count(), 2);
  EXPECT_EQ(library.sm_clock_mhz(1), 1410);  // unlocked default of the fake
  library.set_locked_clock(1, 1005);
  EXPECT_EQ(locked(1), 1005u);
  EXPECT_EQ(locked(0), 0u);  // the other GPU is untouched
  EXPECT_EQ(library.sm_clock_mhz(1), 1005);
  library.reset_locked_clock(1);
  EXPECT_EQ(locked(1), 0u);
  const std::uint64_t first = library.total_energy_mj(1);
  const std::uint64_t second = library.total_energy_mj(1);
  EXPECT_EQ(second - first, 250u);
  // Graphics clocks at the highest memory clock (1593 MHz), sorted descending.
  EXPECT_EQ(library.supported_clocks_mhz(1), (std::vector<int>{1410, 1200, 1005, 810}));
}

TEST(Nvml, PowerTemperatureAndNameReadTheDevice) {
  NvmlLibrary library(KAREUS_FAKE_NVML_PATH);
  EXPECT_EQ(library.power_mw(0), 300000u);  // unlocked in the fake
  library.set_locked_clock(0, 1200);
  EXPECT_EQ(library.power_mw(0), 100000u + 100u * 1200u);
  library.reset_locked_clock(0);
  EXPECT_EQ(library.temperature_c(0), 31u);
  EXPECT_EQ(library.name(0), "NVIDIA H200");
  EXPECT_EQ(library.name(1), "NVIDIA A100-SXM4-40GB");
}

TEST(Nvml, ClockEventReasonsAreReadAndNamed) {
  FakeControl control;
  auto set_events = control.get<void(unsigned int, unsigned long long)>("fake_nvml_set_clock_events");
  NvmlLibrary library(KAREUS_FAKE_NVML_PATH);
  EXPECT_EQ(library.clock_event_reasons(0), 0u);
  set_events(0, clock_event::kSwPowerCap | clock_event::kHwThermalSlowdown);
  const std::uint64_t reasons = library.clock_event_reasons(0);
  set_events(0, 0);
  EXPECT_EQ(reasons, 0x44u);
  EXPECT_NE(reasons & clock_event::kThrottling, 0u);
  EXPECT_EQ(clock_event_names(reasons), (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_EQ(clock_event_names(clock_event::kGpuIdle | (std::uint64_t{1} << 40)),
            (std::vector<std::string>{"gpu_idle", "bit_40"}));
  // Idle and application clocks are not throttling.
  EXPECT_EQ((clock_event::kGpuIdle | clock_event::kApplicationsClocksSetting) & clock_event::kThrottling, 0u);
}

TEST(Nvml, UnsupportedEnergyCounterSaysWhatToDo) {
  FakeControl control;
  auto set_supported = control.get<void(unsigned int, int)>("fake_nvml_set_energy_supported");
  NvmlLibrary library(KAREUS_FAKE_NVML_PATH);
  set_supported(1, 0);
  const std::string message = error_of<Error>([&] { (void)library.total_energy_mj(1); });
  set_supported(1, 1);
  EXPECT_THAT(message, HasSubstr("nvmlDeviceGetTotalEnergyConsumption(gpu 1) failed: Not Supported (NVML error 3)"));
  EXPECT_THAT(message, HasSubstr("Volta or newer"));
  EXPECT_THAT(message, HasSubstr("emulator"));
}

TEST(Nvml, InitAndShutdownArePaired) {
  FakeControl control;
  auto init_calls = control.get<int()>("fake_nvml_init_calls");
  auto shutdown_calls = control.get<int()>("fake_nvml_shutdown_calls");
  const int inits = init_calls();
  const int shutdowns = shutdown_calls();
  { NvmlLibrary library(KAREUS_FAKE_NVML_PATH); }
  EXPECT_EQ(init_calls() - inits, 1);
  EXPECT_EQ(shutdown_calls() - shutdowns, 1);
}

TEST(Nvml, MissingLibrarySaysNoDriver) {
  const std::string message = error_of<Error>([] { NvmlLibrary library("/nonexistent/libnvidia-ml.so.1"); });
  EXPECT_THAT(message, HasSubstr("no NVIDIA driver found: /nonexistent/libnvidia-ml.so.1 could not be loaded"));
  EXPECT_THAT(message, HasSubstr("--backend emulator"));
  EXPECT_THAT(message, HasSubstr("recorder"));
}

TEST(Nvml, LibraryWithoutEntryPointsIsNamed) {
  // libm loads fine but has no NVML symbols.
  const std::string message = error_of<Error>([] { NvmlLibrary library("libm.so.6"); });
  EXPECT_THAT(message, HasSubstr("libm.so.6 has no entry point nvmlInit_v2"));
}

TEST(Nvml, PermissionErrorPointsToRootOrKareusd) {
  FakeControl control;
  auto deny = control.get<void(int)>("fake_nvml_deny_permission");
  NvmlLibrary library(KAREUS_FAKE_NVML_PATH);
  deny(1);
  const std::string message = error_of<Error>([&] { library.set_locked_clock(0, 1200); });
  deny(0);
  EXPECT_THAT(
      message,
      HasSubstr("nvmlDeviceSetGpuLockedClocks(gpu 0, 1200 MHz) failed: Insufficient Permissions (NVML error 4)"));
  EXPECT_THAT(message, HasSubstr("root or CAP_SYS_ADMIN"));
  EXPECT_THAT(message, HasSubstr("kareusd"));
}

TEST(Nvml, UnknownGpuIndexIsAnInputError) {
  NvmlLibrary library(KAREUS_FAKE_NVML_PATH);
  try {
    library.check_device(2);
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "gpu index 2 is out of range: NVML sees 2 GPUs");
  }
}

TEST(ClockLockGuard, ResetsOnScopeExitAndOnException) {
  FakeControl control;
  auto locked = control.get<unsigned int(unsigned int)>("fake_nvml_locked_mhz");
  NvmlLibrary library(KAREUS_FAKE_NVML_PATH);
  {
    ClockLockGuard guard(library, {0, 1});
    guard.lock(1200);
    EXPECT_EQ(locked(0), 1200u);
    EXPECT_EQ(locked(1), 1200u);
    EXPECT_EQ(guard.locked_mhz(), 1200);
  }
  EXPECT_EQ(locked(0), 0u);
  EXPECT_EQ(locked(1), 0u);
  try {
    ClockLockGuard guard(library, {1});
    guard.lock(1005);
    throw Error("measurement failed");
  } catch (const Error&) {
  }
  EXPECT_EQ(locked(1), 0u);
}

TEST(ClockLockGuard, SignalSetsTheFlagAndTheLoopUnwinds) {
  FakeControl control;
  auto locked = control.get<unsigned int(unsigned int)>("fake_nvml_locked_mhz");
  NvmlLibrary library(KAREUS_FAKE_NVML_PATH);
  std::string message;
  try {
    ClockLockGuard guard(library, {0});
    guard.lock(1410);
    EXPECT_EQ(ClockLockGuard::interrupted(), 0);
    std::raise(SIGTERM);  // the guard's handler only records it; the process lives on
    EXPECT_EQ(ClockLockGuard::interrupted(), SIGTERM);
    ClockLockGuard::throw_if_interrupted();
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_EQ(message, "interrupted by signal 15; GPU clocks are reset on the way out");
  EXPECT_EQ(locked(0), 0u);
  // The previous (default) handler is back: a second guard starts clean.
  ClockLockGuard again(library, {0});
  EXPECT_EQ(ClockLockGuard::interrupted(), 0);
  EXPECT_THROW(ClockLockGuard(library, {1}), Error);  // one guard with handlers per process
}

}  // namespace
}  // namespace kareus::nvml
