// kareus/planner/plan_devices.h - the devices a plan job measures and runs its plans on.
//
// The plan job never builds a device: its callers hand it these (emulator_devices.h for the
// emulator, job_devices.h for the user's choice of emulator, logs or a live GPU).
#pragma once

#include <string>
#include <vector>

#include "kareus/device/device.h"
#include "kareus/device/replay_device.h"

namespace kareus::planner {

/// Where the plan job gets its numbers.
struct PlanDevices {
  device::Device& search;     ///< measures partition configs (noisy emulator, a GPU)
  device::Device& execution;  ///< costs every instruction a plan runs (exact emulator, a GPU, replay)
  /// When set, plan from these logged measurements alone: no search and no new measurement;
  /// each key's measurements are every logged config of its representative.
  const device::ReplayDevice* measurements = nullptr;
  /// Recorded in summary.json: what the numbers came from ("emulator", or the log paths).
  std::vector<std::string> sources;
};

}  // namespace kareus::planner
