// A stand-in for libnvidia-ml.so.1 with two GPUs, built only for the tests (device and runtime).
// Entry points follow NVIDIA's NVML signatures; fake_nvml_* let a test inspect and steer it
// (permission errors, throttle reasons, an energy counter that is not supported).
#include <cstring>

namespace {

struct FakeDevice {
  unsigned int locked_mhz = 0;  // 0 = unlocked
  unsigned long long energy_mj = 5000;
  unsigned long long clock_events = 0;
  unsigned int temperature_c = 31;
  bool energy_supported = true;
};

FakeDevice devices[2];
int init_depth = 0;  // NVML counts nested init/shutdown pairs
bool deny_permission = false;
int init_calls = 0;
int shutdown_calls = 0;

constexpr unsigned int kMemoryClocks[] = {810, 1593};
constexpr unsigned int kHighMemoryGraphics[] = {1005, 1410, 1200, 810};
constexpr unsigned int kLowMemoryGraphics[] = {705, 600};

FakeDevice* device_of(void* handle) { return static_cast<FakeDevice*>(handle); }

int copy_out(const unsigned int* values, unsigned int size, unsigned int* count, unsigned int* out) {
  if (out == nullptr || *count < size) {
    *count = size;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  std::memcpy(out, values, size * sizeof(unsigned int));
  *count = size;
  return 0;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  ++init_calls;
  ++init_depth;
  return 0;
}
int nvmlShutdown() {
  ++shutdown_calls;
  if (init_depth == 0) return 1;
  --init_depth;
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (init_depth == 0) return 1;
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (init_depth == 0) return 1;
  if (index >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &devices[index];
  return 0;
}
int nvmlDeviceSetGpuLockedClocks(void* device, unsigned int min_mhz, unsigned int max_mhz) {
  if (deny_permission) return 4;  // NVML_ERROR_NO_PERMISSION
  if (min_mhz != max_mhz) return 2;
  device_of(device)->locked_mhz = min_mhz;
  return 0;
}
int nvmlDeviceResetGpuLockedClocks(void* device) {
  if (deny_permission) return 4;
  device_of(device)->locked_mhz = 0;
  return 0;
}
int nvmlDeviceGetClockInfo(void* device, int type, unsigned int* clock) {
  if (type != 1) return 2;  // only NVML_CLOCK_SM is expected
  *clock = device_of(device)->locked_mhz != 0 ? device_of(device)->locked_mhz : 1410;
  return 0;
}
int nvmlDeviceGetSupportedMemoryClocks(void*, unsigned int* count, unsigned int* clocks) {
  return copy_out(kMemoryClocks, 2, count, clocks);
}
int nvmlDeviceGetSupportedGraphicsClocks(void*, unsigned int memory_mhz, unsigned int* count, unsigned int* clocks) {
  if (memory_mhz == 1593) return copy_out(kHighMemoryGraphics, 4, count, clocks);
  if (memory_mhz == 810) return copy_out(kLowMemoryGraphics, 2, count, clocks);
  return 2;
}
int nvmlDeviceGetTotalEnergyConsumption(void* device, unsigned long long* energy_mj) {
  if (!device_of(device)->energy_supported) return 3;  // NVML_ERROR_NOT_SUPPORTED
  device_of(device)->energy_mj += 250;
  *energy_mj = device_of(device)->energy_mj;
  return 0;
}
int nvmlDeviceGetPowerUsage(void* device, unsigned int* power_mw) {
  // Unlocked GPUs draw 300 W in the fake, locked ones 100 W + 0.1 W per MHz.
  const unsigned int locked = device_of(device)->locked_mhz;
  *power_mw = locked == 0 ? 300000 : 100000 + 100 * locked;
  return 0;
}
int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* celsius) {
  if (sensor != 0) return 2;  // only NVML_TEMPERATURE_GPU
  *celsius = device_of(device)->temperature_c;
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons) {
  *reasons = device_of(device)->clock_events;
  return 0;
}
int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  const char* value = device == &devices[0] ? "NVIDIA H200" : "NVIDIA A100-SXM4-40GB";
  if (length < std::strlen(value) + 1) return 7;
  std::strcpy(name, value);
  return 0;
}
const char* nvmlErrorString(int code) {
  switch (code) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 7:
      return "Insufficient Size";
    default:
      return "Unknown Error";
  }
}

void fake_nvml_deny_permission(int deny) { deny_permission = deny != 0; }
unsigned int fake_nvml_locked_mhz(unsigned int index) { return devices[index].locked_mhz; }
int fake_nvml_init_calls() { return init_calls; }
void fake_nvml_set_clock_events(unsigned int index, unsigned long long reasons) {
  devices[index].clock_events = reasons;
}
void fake_nvml_set_energy_supported(unsigned int index, int supported) {
  devices[index].energy_supported = supported != 0;
}
int fake_nvml_shutdown_calls() { return shutdown_calls; }

}  // extern "C"
