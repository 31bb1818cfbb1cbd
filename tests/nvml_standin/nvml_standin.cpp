// A stand-in libnvidia-ml.so.1 for the tests (never installed): two A100-like GPUs whose state
// lives in a text file, so that it outlives the processes that change it as a real GPU's clocks
// outlive a crashed kareusd. The file is $KAREUS_NVML_STANDIN_STATE (nvmlInit_v2 fails with
// DRIVER_NOT_LOADED when it is unset), one setting per line, created on first use:
//   gpu I locked_mhz M          0: unlocked (the driver picks 1410 MHz)
//   fault CALL CODE             CALL returns the NVML error CODE (4 NO_PERMISSION,
//                               3 NOT_SUPPORTED, 15 GPU_IS_LOST, ...) for every GPU
//   fault CALL hang             CALL blocks until the line is gone (polled every 20 ms)
//   energy stall | wrap         the energy counter stops, or counts modulo 1,000,000 mJ
//   clock_events MASK           the clock-event (throttle) reasons reported, e.g. 4 (power cap)
// Energy is integrated from the power draw (300 W unlocked, 100 W + 0.1 W per locked MHz) over
// CLOCK_MONOTONIC and advances in 100 ms steps, as the driver's counter does.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "../nvml/nvml_error_strings.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kInsufficientSize = 7;
constexpr int kDriverNotLoaded = 9;
constexpr unsigned int kGpuCount = 2;
constexpr unsigned int kDefaultMhz = 1410;
constexpr double kUpdatePeriodS = 0.1;
constexpr unsigned long long kWrapMj = 1000000;

int gpu_ids[kGpuCount] = {0, 1};  // handles point here
int init_depth = 0;

struct State {
  unsigned int locked_mhz[kGpuCount] = {0, 0};
  double energy_mj[kGpuCount] = {0, 0};  // integrated up to `since_s`
  double since_s = -1;
  std::map<std::string, std::string> faults;  // call -> code or "hang"
  std::string energy_mode;                    // "", "stall" or "wrap"
  unsigned long long clock_events = 0;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

unsigned int power_mw(const State& state, unsigned int gpu) {
  return state.locked_mhz[gpu] == 0 ? 300000 : 100000 + 100 * state.locked_mhz[gpu];
}

State parse(const std::string& text) {
  State state;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "gpu") {
      unsigned int gpu = 0;
      std::string field;
      double value = 0;
      words >> gpu >> field >> value;
      if (gpu >= kGpuCount) continue;
      if (field == "locked_mhz") state.locked_mhz[gpu] = static_cast<unsigned int>(value);
      if (field == "energy_mj") state.energy_mj[gpu] = value;
    } else if (kind == "since_s") {
      words >> state.since_s;
    } else if (kind == "fault") {
      std::string call, code;
      words >> call >> code;
      state.faults[call] = code;
    } else if (kind == "energy") {
      words >> state.energy_mode;
    } else if (kind == "clock_events") {
      words >> state.clock_events;
    }
  }
  return state;
}

std::string format(const State& state) {
  std::ostringstream out;
  out.precision(17);
  for (unsigned int gpu = 0; gpu < kGpuCount; ++gpu) {
    out << "gpu " << gpu << " locked_mhz " << state.locked_mhz[gpu] << "\n";
    out << "gpu " << gpu << " energy_mj " << state.energy_mj[gpu] << "\n";
  }
  out << "since_s " << state.since_s << "\n";
  for (const auto& [call, code] : state.faults) out << "fault " << call << " " << code << "\n";
  if (!state.energy_mode.empty()) out << "energy " << state.energy_mode << "\n";
  if (state.clock_events != 0) out << "clock_events " << state.clock_events << "\n";
  return out.str();
}

// Runs `change` on the state under an exclusive flock of the file, writing it back after.
template <typename Change>
int with_state(Change change) {
  const char* path = std::getenv("KAREUS_NVML_STANDIN_STATE");
  if (path == nullptr) return kDriverNotLoaded;
  const int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return kDriverNotLoaded;
  ::flock(fd, LOCK_EX);
  std::string text;
  char chunk[4096];
  for (ssize_t count; (count = ::read(fd, chunk, sizeof(chunk))) > 0;)
    text.append(chunk, static_cast<std::size_t>(count));
  State state = parse(text);
  // Bring the energy integral up to now with the power drawn since the last change.
  const double now = now_s();
  if (state.since_s >= 0 && state.energy_mode != "stall") {
    for (unsigned int gpu = 0; gpu < kGpuCount; ++gpu)
      state.energy_mj[gpu] += power_mw(state, gpu) * (now - state.since_s);
  } else if (state.since_s < 0) {
    for (double& energy : state.energy_mj) energy = 9.0e8;  // the driver loaded a while ago
  }
  state.since_s = now;
  const int code = change(state);
  const std::string out = format(state);
  if (::ftruncate(fd, 0) == 0) (void)::pwrite(fd, out.data(), out.size(), 0);
  ::close(fd);  // releases the flock
  return code;
}

// The fault configured for `call`: 0 for none; "hang" blocks until the line is removed.
int fault_of(const char* call) {
  while (true) {
    std::string code;
    const int status = with_state([&](State& state) {
      auto found = state.faults.find(call);
      if (found != state.faults.end()) code = found->second;
      return kSuccess;
    });
    if (status != kSuccess) return status;
    if (code != "hang") return code.empty() ? kSuccess : std::atoi(code.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int gpu_of(void* device) {
  for (unsigned int gpu = 0; gpu < kGpuCount; ++gpu) {
    if (device == &gpu_ids[gpu]) return static_cast<int>(gpu);
  }
  return -1;
}

// The checks every device call starts with: initialized, a known handle, no fault configured.
int begin(const char* call, void* device, int* gpu) {
  if (init_depth == 0) return kUninitialized;
  *gpu = gpu_of(device);
  if (*gpu < 0) return kInvalidArgument;
  return fault_of(call);
}

int copy_out(const unsigned int* values, unsigned int size, unsigned int* count, unsigned int* out) {
  if (out == nullptr || *count < size) {
    *count = size;
    return kInsufficientSize;
  }
  std::memcpy(out, values, size * sizeof(unsigned int));
  *count = size;
  return kSuccess;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (const int code = fault_of("nvmlInit_v2"); code != kSuccess) return code;
  ++init_depth;
  return kSuccess;
}
// What pynvml (and so Zeus's monitor) initializes with; flags are ignored.
int nvmlInitWithFlags(unsigned int /*flags*/) { return nvmlInit_v2(); }

int nvmlShutdown() {
  if (init_depth == 0) return kUninitialized;
  --init_depth;
  return kSuccess;
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (init_depth == 0) return kUninitialized;
  if (const int code = fault_of("nvmlDeviceGetCount_v2"); code != kSuccess) return code;
  *count = kGpuCount;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (init_depth == 0) return kUninitialized;
  if (index >= kGpuCount) return kInvalidArgument;
  *device = &gpu_ids[index];
  return kSuccess;
}
int nvmlDeviceSetGpuLockedClocks(void* device, unsigned int min_mhz, unsigned int max_mhz) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceSetGpuLockedClocks", device, &gpu); code != kSuccess) return code;
  // The driver takes any clock in 210..1410 and rounds it to its 15 MHz grid; above it, refuses.
  if (min_mhz != max_mhz || min_mhz < 210 || min_mhz > 1410) return kInvalidArgument;
  return with_state([&](State& state) {
    state.locked_mhz[gpu] = 210 + (min_mhz - 210) / 15 * 15;
    return kSuccess;
  });
}
int nvmlDeviceResetGpuLockedClocks(void* device) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceResetGpuLockedClocks", device, &gpu); code != kSuccess) return code;
  return with_state([&](State& state) {
    state.locked_mhz[gpu] = 0;
    return kSuccess;
  });
}
int nvmlDeviceGetClockInfo(void* device, int type, unsigned int* clock) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetClockInfo", device, &gpu); code != kSuccess) return code;
  if (type != 1) return kInvalidArgument;  // only NVML_CLOCK_SM is expected
  return with_state([&](State& state) {
    *clock = state.locked_mhz[gpu] != 0 ? state.locked_mhz[gpu] : kDefaultMhz;
    return kSuccess;
  });
}
int nvmlDeviceGetSupportedMemoryClocks(void* device, unsigned int* count, unsigned int* clocks) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetSupportedMemoryClocks", device, &gpu); code != kSuccess) return code;
  static constexpr unsigned int kMemory[] = {1215};
  return copy_out(kMemory, 1, count, clocks);
}
int nvmlDeviceGetSupportedGraphicsClocks(void* device, unsigned int memory_mhz, unsigned int* count,
                                         unsigned int* clocks) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetSupportedGraphicsClocks", device, &gpu); code != kSuccess) return code;
  if (memory_mhz != 1215) return kInvalidArgument;
  static const auto grid = [] {  // 1410 down to 210 by 15 MHz, as an A100
    struct Grid {
      unsigned int values[81];
    } result{};
    for (unsigned int i = 0; i < 81; ++i) result.values[i] = 1410 - 15 * i;
    return result;
  }();
  return copy_out(grid.values, 81, count, clocks);
}
int nvmlDeviceGetTotalEnergyConsumption(void* device, unsigned long long* energy_mj) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetTotalEnergyConsumption", device, &gpu); code != kSuccess) return code;
  return with_state([&](State& state) {
    // The counter moves in update periods: the value at the last 100 ms boundary (a stalled
    // one stays where it stopped).
    const double at_boundary_mj =
        state.energy_mode == "stall"
            ? state.energy_mj[gpu]
            : state.energy_mj[gpu] -
                  power_mw(state, gpu) * (state.since_s - kUpdatePeriodS * static_cast<double>(static_cast<long long>(
                                                                               state.since_s / kUpdatePeriodS)));
    const auto value = static_cast<unsigned long long>(at_boundary_mj);
    *energy_mj = state.energy_mode == "wrap" ? value % kWrapMj : value;
    return kSuccess;
  });
}
int nvmlDeviceGetPowerUsage(void* device, unsigned int* power) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetPowerUsage", device, &gpu); code != kSuccess) return code;
  return with_state([&](State& state) {
    *power = power_mw(state, gpu);
    return kSuccess;
  });
}
int nvmlDeviceGetEnforcedPowerLimit(void* device, unsigned int* limit_mw) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetEnforcedPowerLimit", device, &gpu); code != kSuccess) return code;
  *limit_mw = 400000;  // A100 SXM4
  return kSuccess;
}
int nvmlDeviceGetPowerManagementLimit(void* device, unsigned int* limit_mw) {
  return nvmlDeviceGetEnforcedPowerLimit(device, limit_mw);
}
int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* celsius) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetTemperature", device, &gpu); code != kSuccess) return code;
  if (sensor != 0) return kInvalidArgument;
  *celsius = 40;
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetCurrentClocksEventReasons", device, &gpu); code != kSuccess) return code;
  return with_state([&](State& state) {
    *reasons = state.clock_events;
    return kSuccess;
  });
}
int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetName", device, &gpu); code != kSuccess) return code;
  const char* value = "NVIDIA A100-SXM4-40GB";
  if (length < std::strlen(value) + 1) return kInsufficientSize;
  std::strcpy(name, value);
  return kSuccess;
}
// NVML_DEVICE_ARCH_AMPERE: Zeus reads energy from the counter on Volta and newer.
int nvmlDeviceGetArchitecture(void* device, unsigned int* arch) {
  int gpu = 0;
  if (const int code = begin("nvmlDeviceGetArchitecture", device, &gpu); code != kSuccess) return code;
  *arch = 7;
  return kSuccess;
}

const char* nvmlErrorString(int code) { return nvml_error_text(code); }

}  // extern "C"
