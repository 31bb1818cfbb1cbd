// kareus/planner/emulator_devices.h - the emulator as the plan job's devices.
//
// For callers of run_plan_job (the CLI, tests, benchmarks): partitions are measured with seeded
// noise, as a GPU would measure them, and plans run on the exact (noise-free) model. The plan
// job itself never builds a device: it plans on whatever it is given.
#pragma once

#include <cstdint>

#include "kareus/device/emulator.h"
#include "kareus/planner/plan_job.h"

namespace kareus::planner {

class EmulatorDevices {
 public:
  EmulatorDevices(const device::GpuSpec& gpu, std::uint64_t seed)
      : search_(gpu, {true, seed, 5}), exact_(device::exact_emulator(gpu)) {}
  EmulatorDevices(const EmulatorDevices&) = delete;
  EmulatorDevices& operator=(const EmulatorDevices&) = delete;
  /// Valid while this object lives.
  [[nodiscard]] PlanDevices devices() { return {search_, exact_, nullptr, {"emulator"}}; }

 private:
  device::EmulatedDevice search_;
  device::EmulatedDevice exact_;
};

}  // namespace kareus::planner
