#include "kareus/planner/job_devices.h"

#include <filesystem>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/device/caching_device.h"
#include "kareus/planner/measurements.h"

namespace kareus::planner {

JobDevices::JobDevices(const DeviceChoice& choice, const device::GpuSpec& gpu, const workload::Workload& workload,
                       const JsonlAppender::Warn& warn) {
  if (!choice.measurements.empty()) {
    if (choice.backend != "emulator") throw InputError("--measurements plans from logs alone: drop --backend");
    const std::vector<std::filesystem::path> logs(choice.measurements.begin(), choice.measurements.end());
    replay_ = std::make_unique<device::ReplayDevice>(load_measurements(logs, gpu, workload, warn));
    devices_ = std::make_unique<PlanDevices>(PlanDevices{*replay_, *replay_, replay_.get(), choice.measurements});
  } else if (choice.backend == "emulator") {
    emulator_ = std::make_unique<EmulatorDevices>(gpu, choice.seed);
    devices_ = std::make_unique<PlanDevices>(emulator_->devices());
  } else if (choice.backend == "cuda") {
    make_cuda(choice, gpu, workload, warn);
  } else {
    throw InputError(fmt::format("--backend {}: expected emulator or cuda", choice.backend));
  }
}

JobDevices::~JobDevices() {
  // The outer devices refer to the inner ones: release them outermost first.
  while (!owned_.empty()) owned_.pop_back();
}

// Live on the GPU: every measurement appended to the log as it is made; a rerun replays what the
// log holds and measures only the rest.
void JobDevices::make_cuda(const DeviceChoice& choice, const device::GpuSpec& gpu, const workload::Workload& workload,
                           const JsonlAppender::Warn& warn) {
  if (choice.log.empty())
    throw InputError("--backend cuda needs --log FILE (measurements are logged as they are made)");
  std::vector<device::MeasurementRecord> logged;
  if (std::filesystem::exists(choice.log)) logged = load_live_log(choice.log, workload, warn);
  replay_ = std::make_unique<device::ReplayDevice>(gpu, logged, choice.log);
  auto cuda = std::make_unique<device::CudaDevice>(gpu, workload, choice.cuda);
  sink_.out = choice.log;
  sink_.workload_json = workload::workload_to_json(workload);
  sink_.device_name = cuda->device_name();
  sink_.warn = warn;
  auto recording = std::make_unique<device::RecordingDevice>(*cuda, sink_, 0);
  auto resuming = std::make_unique<device::ResumingDevice>(*replay_, *recording);
  auto distinct = std::make_unique<device::CachingDevice>(*resuming, 1);
  devices_ = std::make_unique<PlanDevices>(PlanDevices{*resuming, *distinct, nullptr, {"cuda", choice.log}});
  owned_.push_back(std::move(cuda));
  owned_.push_back(std::move(recording));
  owned_.push_back(std::move(resuming));
  owned_.push_back(std::move(distinct));
}

}  // namespace kareus::planner
