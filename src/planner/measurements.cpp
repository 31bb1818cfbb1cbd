#include "kareus/planner/measurements.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/plan/plan.h"

namespace kareus::planner {

namespace {

// Each record names the workload it measured; one of another workload (a record appended under
// a header it does not match) would replay as this one's. ReplayDevice checks the GPU.
void check_records_workload(const std::vector<device::MeasurementRecord>& records, const std::string& expected) {
  for (const device::MeasurementRecord& record : records) {
    if (record.workload_json.empty()) continue;  // a bare kernel of no workload
    plan::check_workload(record.workload_json, expected, record.origin);
  }
}

}  // namespace

device::ReplayDevice load_measurements(const std::vector<std::filesystem::path>& logs, const device::GpuSpec& gpu,
                                       const workload::Workload& workload, const JsonlAppender::Warn& warn) {
  if (logs.empty()) throw InputError("--measurements: no log given");
  const std::string expected = plan::plan_workload_json(workload, gpu.name);
  std::vector<device::MeasurementRecord> records;
  for (const std::filesystem::path& path : logs) {
    device::ProfileLog log = device::read_profile_log(path, warn);
    if (log.headers.empty()) {
      throw InputError(fmt::format("{}: no {} header line: plan from logs written by `kareus profile --all`",
                                   path.string(), device::kProfileHeaderSchema));
    }
    for (const device::ProfileHeader& header : log.headers) {
      nlohmann::json recorded = nlohmann::json::parse(header.workload_json);
      recorded["gpu"] = header.gpu;
      plan::check_workload(recorded.dump(), expected, path.string());
    }
    check_records_workload(log.records, expected);
    for (device::MeasurementRecord& record : log.records) records.push_back(std::move(record));
  }
  const std::string origin = logs.size() == 1 ? logs.front().string() : fmt::format("{} logs", logs.size());
  return device::ReplayDevice(gpu, records, origin);
}

std::vector<device::MeasurementRecord> load_live_log(const std::filesystem::path& log,
                                                     const workload::Workload& workload,
                                                     const JsonlAppender::Warn& warn) {
  std::vector<device::MeasurementRecord> records = device::read_measurements(log, warn);
  check_records_workload(records, workload::workload_to_json(workload));
  return records;
}

}  // namespace kareus::planner
