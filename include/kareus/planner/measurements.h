// kareus/planner/measurements.h - `kareus plan --measurements`: profile logs as the plan's device.
//
// Reads one or more `kareus profile --all` logs (device/measurement_log.h), checks that each
// header describes the workload and GPU being planned, and returns a ReplayDevice over every
// record. A log from another workload is refused naming the first field that differs.
#pragma once

#include <filesystem>
#include <vector>

#include "kareus/device/replay_device.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

/// Throws InputError naming the log and the first field of the workload or GPU that differs
/// (plan::check_workload: "LOG: made for tp 4, this run has tp 8"), a log without a header, or
/// an unreadable log. A torn last line of a log is reported through `warn` and skipped.
[[nodiscard]] device::ReplayDevice load_measurements(const std::vector<std::filesystem::path>& logs,
                                                     const device::GpuSpec& gpu, const workload::Workload& workload,
                                                     const JsonlAppender::Warn& warn = {});

/// The records of a `kareus plan --backend cuda --log` log, to resume from: each must be of
/// `workload` (ReplayDevice checks the GPU and the numbers). Throws InputError naming the line.
[[nodiscard]] std::vector<device::MeasurementRecord> load_live_log(const std::filesystem::path& log,
                                                                   const workload::Workload& workload,
                                                                   const JsonlAppender::Warn& warn = {});

}  // namespace kareus::planner
