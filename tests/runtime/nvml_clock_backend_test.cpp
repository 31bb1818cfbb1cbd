// The runtime's NVML clock backend over the device layer's loader, against the fake library.
#include "kareus/runtime/nvml_clock_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/runtime/frequency_controller.h"

namespace kareus::runtime {
namespace {

TEST(NvmlClockBackend, SetReadResetAndEnergyGoThroughTheLibrary) {
  void* fake = ::dlopen(KAREUS_FAKE_NVML_PATH, RTLD_NOW);
  ASSERT_NE(fake, nullptr) << ::dlerror();
  auto locked = reinterpret_cast<unsigned int (*)(unsigned int)>(::dlsym(fake, "fake_nvml_locked_mhz"));
  auto library = std::make_shared<nvml::NvmlLibrary>(KAREUS_FAKE_NVML_PATH);
  NvmlClockBackend gpu1(library, 1);
  EXPECT_EQ(gpu1.describe(), "nvml gpu 1");
  EXPECT_EQ(gpu1.read_clock_mhz(), 1410);
  gpu1.set_locked_clock(1005);
  EXPECT_EQ(locked(1), 1005u);
  EXPECT_EQ(gpu1.read_clock_mhz(), 1005);
  gpu1.reset();
  EXPECT_EQ(locked(1), 0u);
  const auto first = gpu1.read_energy_mj();
  const auto second = gpu1.read_energy_mj();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*second - *first, 250u);
  EXPECT_EQ(gpu1.supported_clocks_mhz(), (std::vector<int>{1410, 1200, 1005, 810}));
  ::dlclose(fake);
}

TEST(NvmlClockBackend, UnknownGpuIndexIsAnInputError) {
  auto library = std::make_shared<nvml::NvmlLibrary>(KAREUS_FAKE_NVML_PATH);
  EXPECT_THROW(NvmlClockBackend(library, 2), InputError);
}

TEST(NvmlClockBackend, BackendSpecSelectsTheLibraryPath) {
  auto backend = make_clock_backend(std::string("nvml:") + KAREUS_FAKE_NVML_PATH, 0);
  EXPECT_EQ(backend->describe(), "nvml gpu 0");
  EXPECT_THROW((void)make_clock_backend("cuda", 0), InputError);
}

TEST(NvmlClockBackend, ControllerLocksReadsBackAndResetsOnExit) {
  void* fake = ::dlopen(KAREUS_FAKE_NVML_PATH, RTLD_NOW);
  ASSERT_NE(fake, nullptr) << ::dlerror();
  auto locked = reinterpret_cast<unsigned int (*)(unsigned int)>(::dlsym(fake, "fake_nvml_locked_mhz"));
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
  ::dlclose(fake);
}

}  // namespace
}  // namespace kareus::runtime
