#include "kareus/planner/measurements.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"

namespace kareus::planner {
namespace {

using nlohmann::json;

/// A short rendering of a value for messages (never a whole nested document).
std::string brief(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string difference(const json& left, const json& right, const std::string& path) {
  if (left.is_object() && right.is_object()) {
    for (const auto& [key, value] : left.items()) {
      const std::string child = path.empty() ? key : path + "." + key;
      if (!right.contains(key)) return fmt::format("{}: {} vs (missing)", child, brief(value));
      if (std::string found = difference(value, right.at(key), child); !found.empty()) return found;
    }
    for (const auto& [key, value] : right.items()) {
      if (!left.contains(key))
        return fmt::format("{}: (missing) vs {}", path.empty() ? key : path + "." + key, brief(value));
    }
    return "";
  }
  if (left.is_number() && right.is_number() && left.get<double>() == right.get<double>()) return "";
  return left == right ? ""
                       : fmt::format("{}: {} vs {}", path.empty() ? "(document)" : path, brief(left), brief(right));
}

}  // namespace

std::string first_json_difference(std::string_view left_json, std::string_view right_json) {
  return difference(json::parse(left_json), json::parse(right_json), "");
}

device::ReplayDevice load_measurements(const std::vector<std::filesystem::path>& logs, const device::GpuSpec& gpu,
                                       const workload::Workload& workload) {
  if (logs.empty()) throw InputError("--measurements: no log given");
  const std::string expected = workload::workload_to_json(workload);
  std::vector<device::MeasurementRecord> records;
  for (const std::filesystem::path& path : logs) {
    device::ProfileLog log = device::read_profile_log(path);
    if (log.headers.empty()) {
      throw InputError(fmt::format("{}: no {} header line: plan from logs written by `kareus profile --all`",
                                   path.string(), device::kProfileHeaderSchema));
    }
    for (const device::ProfileHeader& header : log.headers) {
      if (header.gpu != gpu.name) {
        throw InputError(fmt::format("{}: the log was measured on gpu {}, the flags give --gpu {}", path.string(),
                                     header.gpu, gpu.name));
      }
      if (const std::string found = first_json_difference(header.workload_json, expected); !found.empty()) {
        throw InputError(
            fmt::format("{}: the log is of another workload: workload.{} (log vs flags)", path.string(), found));
      }
    }
    for (device::MeasurementRecord& record : log.records) records.push_back(std::move(record));
  }
  const std::string origin = logs.size() == 1 ? logs.front().string() : fmt::format("{} logs", logs.size());
  return device::ReplayDevice(gpu, records, origin);
}

}  // namespace kareus::planner
