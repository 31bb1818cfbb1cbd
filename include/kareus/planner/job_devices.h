// kareus/planner/job_devices.h - the devices a plan job measures and runs on, from the user's choice.
//
// Three sources of time and energy: the emulator (seeded noise for the search, the exact model
// for the plans; emulator_devices.h), measurement logs alone (`kareus plan --measurements`: a
// ReplayDevice over `kareus profile --all` logs, checked against the workload and GPU), or the
// GPU live (`--backend cuda`: every measurement appended to a JSONL log as it is made; a rerun
// replays what the log holds and measures only the rest). The plan job (plan_job.h) never
// builds a device; its callers get them here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kareus/common/jsonl_log.h"
#include "kareus/device/cuda_device.h"
#include "kareus/device/profile.h"
#include "kareus/device/replay_device.h"
#include "kareus/planner/emulator_devices.h"
#include "kareus/planner/plan_job.h"

namespace kareus::planner {

/// What the user chose (`kareus plan --backend/--measurements/--log/--gpu-index/--seed`).
struct DeviceChoice {
  std::string backend = "emulator";       ///< "emulator" or "cuda"
  std::vector<std::string> measurements;  ///< profile logs to plan from alone (emulator backend only)
  std::string log;                        ///< with cuda: the measurement log (required; resumes)
  device::CudaDeviceOptions cuda;
  std::uint64_t seed = 0;  ///< the emulator's noise seed
};

/// The devices of one plan job and what keeps them alive (not movable: the devices refer to
/// each other).
class JobDevices {
 public:
  /// Throws InputError for an unknown backend, --measurements with another backend, cuda without
  /// a log, or a log of another workload or GPU; Error when the GPU cannot be used. A torn last
  /// line of a log is reported through `warn` and skipped.
  JobDevices(const DeviceChoice& choice, const device::GpuSpec& gpu, const workload::Workload& workload,
             const JsonlAppender::Warn& warn = {});
  ~JobDevices();
  JobDevices(const JobDevices&) = delete;
  JobDevices& operator=(const JobDevices&) = delete;

  /// Valid while this object lives.
  [[nodiscard]] const PlanDevices& devices() const { return *devices_; }

 private:
  void make_cuda(const DeviceChoice& choice, const device::GpuSpec& gpu, const workload::Workload& workload,
                 const JsonlAppender::Warn& warn);

  std::vector<std::unique_ptr<device::Device>> owned_;  ///< the live stack, innermost first
  std::unique_ptr<device::ReplayDevice> replay_;
  std::unique_ptr<EmulatorDevices> emulator_;
  device::ProfileSink sink_;
  std::unique_ptr<PlanDevices> devices_;
};

}  // namespace kareus::planner
