#include "kareus/runtime/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/runtime/frequency_controller.h"

namespace kareus::runtime {
namespace {

// The test opens the same fake library the loader opens (dlopen returns the same handle), so it
// can read the fake's state.
struct FakeControl {
  void* handle = ::dlopen(KAREUS_FAKE_NVML_PATH, RTLD_NOW);
  template <typename Function>
  Function* get(const char* name) const {
    return reinterpret_cast<Function*>(::dlsym(handle, name));
  }
  ~FakeControl() { ::dlclose(handle); }
};

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Nvml, SetReadResetAndEnergyGoThroughTheLibrary) {
  FakeControl control;
  ASSERT_NE(control.handle, nullptr) << ::dlerror();
  auto locked = control.get<unsigned int(unsigned int)>("fake_nvml_locked_mhz");
  auto library = std::make_shared<NvmlLibrary>(KAREUS_FAKE_NVML_PATH);
  EXPECT_EQ(library->device_count(), 2);
  NvmlClockBackend gpu1(library, 1);
  EXPECT_EQ(gpu1.describe(), "nvml gpu 1");
  EXPECT_EQ(gpu1.read_clock_mhz(), 1410);  // unlocked default of the fake
  gpu1.set_locked_clock(1005);
  EXPECT_EQ(locked(1), 1005u);
  EXPECT_EQ(locked(0), 0u);  // the other GPU is untouched
  EXPECT_EQ(gpu1.read_clock_mhz(), 1005);
  gpu1.reset();
  EXPECT_EQ(locked(1), 0u);
  const auto first = gpu1.read_energy_mj();
  const auto second = gpu1.read_energy_mj();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*second - *first, 250u);
  // Graphics clocks at the highest memory clock (1593 MHz), sorted descending.
  EXPECT_EQ(gpu1.supported_clocks_mhz(), (std::vector<int>{1410, 1200, 1005, 810}));
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
  const std::string message = message_of([] { NvmlLibrary library("/nonexistent/libnvidia-ml.so.1"); });
  EXPECT_NE(message.find("no NVIDIA driver found: /nonexistent/libnvidia-ml.so.1 could not be loaded"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("recorder"), std::string::npos) << message;
}

TEST(Nvml, LibraryWithoutEntryPointsIsNamed) {
  // libm loads fine but has no NVML symbols.
  const std::string message = message_of([] { NvmlLibrary library("libm.so.6"); });
  EXPECT_NE(message.find("libm.so.6 has no entry point nvmlInit_v2"), std::string::npos) << message;
}

TEST(Nvml, PermissionErrorPointsToRootOrKareusd) {
  FakeControl control;
  auto deny = control.get<void(int)>("fake_nvml_deny_permission");
  auto library = std::make_shared<NvmlLibrary>(KAREUS_FAKE_NVML_PATH);
  NvmlClockBackend gpu0(library, 0);
  deny(1);
  const std::string message = message_of([&] { gpu0.set_locked_clock(1200); });
  deny(0);
  EXPECT_NE(message.find("nvmlDeviceSetGpuLockedClocks(gpu 0, 1200 MHz) failed: Insufficient Permissions (NVML error 4)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("root or CAP_SYS_ADMIN"), std::string::npos) << message;
  EXPECT_NE(message.find("kareusd"), std::string::npos) << message;
}

TEST(Nvml, UnknownGpuIndexIsAnInputError) {
  auto library = std::make_shared<NvmlLibrary>(KAREUS_FAKE_NVML_PATH);
  try {
    NvmlClockBackend backend(library, 2);
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "gpu index 2 is out of range: NVML sees 2 GPUs");
  }
}

TEST(Nvml, ControllerLocksReadsBackAndResetsOnExit) {
  FakeControl control;
  auto locked = control.get<unsigned int(unsigned int)>("fake_nvml_locked_mhz");
  {
    FrequencyController controller(make_clock_backend(std::string("nvml:") + KAREUS_FAKE_NVML_PATH, 1));
    EXPECT_EQ(controller.backend_description(), "nvml gpu 1");
    controller.request_clock(1200);
    controller.request_clock(810);
    controller.flush();
    EXPECT_EQ(locked(1), 810u);
    const auto timeline = controller.timeline();
    ASSERT_EQ(timeline.size(), 2u);
    EXPECT_EQ(timeline[0].effective_mhz, 1200);  // read back with nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
    EXPECT_EQ(timeline[1].effective_mhz, 810);
  }
  EXPECT_EQ(locked(1), 0u);
}

TEST(Nvml, BackendSpecSelectsTheLibraryPath) {
  auto backend = make_clock_backend(std::string("nvml:") + KAREUS_FAKE_NVML_PATH, 0);
  EXPECT_EQ(backend->describe(), "nvml gpu 0");
  EXPECT_THROW((void)make_clock_backend("cuda", 0), InputError);
}

}  // namespace
}  // namespace kareus::runtime
