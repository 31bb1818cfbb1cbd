#include "kareus/device/measurement_log.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"
#include "kareus/common/jsonl_log.h"
#include "kareus/nvml/nvml.h"
#include "kareus/partition/search_space.h"
#include "kareus/workload/workload.h"

namespace kareus::device {
namespace {

using nlohmann::json;
using workload::CollectiveKind;
using workload::CommGroup;
using workload::OpKind;

template <typename Enum, std::size_t N>
Enum parse_enum(const std::string& text, const Enum (&values)[N], const char* what) {
  for (Enum value : values) {
    if (workload::to_string(value) == text) return value;
  }
  throw InputError(fmt::format("unknown {} \"{}\"", what, text));
}

constexpr OpKind kOpKinds[] = {OpKind::kGemm,      OpKind::kAttention,  OpKind::kNorm,
                               OpKind::kRope,      OpKind::kActivation, OpKind::kElementwise,
                               OpKind::kEmbedding, OpKind::kLoss,       OpKind::kCollective};
constexpr CommGroup kGroups[] = {CommGroup::kTp, CommGroup::kCp, CommGroup::kDp, CommGroup::kPp};
constexpr CollectiveKind kCollectiveKinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                               CollectiveKind::kReduceScatter, CollectiveKind::kSendRecv};

// Written with insertion order kept, so a line reads schema first, then what ran, then results.
using ordered = nlohmann::ordered_json;

ordered op_to_json(const workload::Op& op) {
  ordered value = {{"name", op.name},   {"kind", workload::to_string(op.kind)}, {"direction", to_string(op.direction)},
                   {"flops", op.flops}, {"bytes_read", op.bytes_read},          {"bytes_written", op.bytes_written}};
  if (op.kind == OpKind::kGemm) value["gemm"] = {{"m", op.gemm.m}, {"n", op.gemm.n}, {"k", op.gemm.k}};
  if (op.ring_steps > 0) value["ring_steps"] = op.ring_steps;
  if (op.collective) {
    value["collective"] = {{"kind", workload::to_string(op.collective->kind)},
                           {"group", workload::to_string(op.collective->group)},
                           {"group_size", op.collective->group_size},
                           {"bytes", op.collective->bytes}};
  }
  return value;
}

// An integer field in [minimum, maximum] (nlohmann's get<int> would wrap a larger one silently).
int get_int(const json& object, const char* key, long long minimum, long long maximum) {
  const json& value = object.at(key);
  if (!value.is_number_integer() || value.get<long long>() < minimum || value.get<long long>() > maximum) {
    throw InputError(fmt::format("field '{}' must be an integer in [{}, {}], found {}", key, minimum, maximum,
                                 json_fields::excerpt(value)));
  }
  return static_cast<int>(value.get<long long>());
}

// A number field in [0, maximum]: values beyond it would make sums over records non-finite.
double get_bounded(const json& object, const char* key, double maximum) {
  const json& value = object.at(key);
  if (!value.is_number() || !(value.get<double>() >= 0) || value.get<double>() > maximum) {
    throw InputError(
        fmt::format("field '{}' must be a number in [0, {:g}], found {}", key, maximum, json_fields::excerpt(value)));
  }
  return value.get<double>();
}

workload::Op op_from_json(const json& value) {
  workload::Op op;
  op.name = value.at("name").get<std::string>();
  op.kind = parse_enum(value.at("kind").get<std::string>(), kOpKinds, "op kind");
  op.direction = parse_direction(value.at("direction").get<std::string>(), "op direction");
  op.flops = get_bounded(value, "flops", kMaxOpCount);
  op.bytes_read = get_bounded(value, "bytes_read", kMaxOpCount);
  op.bytes_written = get_bounded(value, "bytes_written", kMaxOpCount);
  if (value.contains("gemm")) {
    const json& gemm = value.at("gemm");
    op.gemm = {get_bounded(gemm, "m", kMaxOpCount), get_bounded(gemm, "n", kMaxOpCount),
               get_bounded(gemm, "k", kMaxOpCount)};
  }
  if (value.contains("collective")) {
    const json& collective = value.at("collective");
    op.collective = workload::Collective{
        parse_enum(collective.at("kind").get<std::string>(), kCollectiveKinds, "collective kind"),
        parse_enum(collective.at("group").get<std::string>(), kGroups, "collective group"),
        get_int(collective, "group_size", 1, 1 << 20), get_bounded(collective, "bytes", kMaxOpCount)};
  }
  if (value.contains("ring_steps")) {
    if (op.kind != OpKind::kAttention) {
      throw InputError(fmt::format("op \"{}\": only an attention op has 'ring_steps'", op.name));
    }
    op.ring_steps = get_int(value, "ring_steps", 0, workload::kMaxParallelDegree);
  }
  if ((op.kind == OpKind::kCollective) != op.collective.has_value()) {
    throw InputError(
        fmt::format("op \"{}\": a collective op needs a 'collective' object and only it has one", op.name));
  }
  return op;
}

}  // namespace

std::string MeasurementRecord::kernel_class() const {
  if (partition.compute_ops.empty() && partition.collective) return "collective";
  if (partition.compute_ops.size() == 1 && !partition.collective) {
    const workload::Op& op = partition.compute_ops.front();
    if (op.kind == OpKind::kGemm) return "gemm";
    if (op.kind == OpKind::kAttention) return "attention";
    return "memory_bound";
  }
  return "partition";
}

std::string to_json_line(const MeasurementRecord& record) {
  ordered ops = ordered::array();
  for (const workload::Op& op : record.partition.compute_ops) ops.push_back(op_to_json(op));
  ordered slots = ordered::array();
  for (const partition::Slot& slot : record.partition.slots)
    slots.push_back({{"name", slot.name}, {"first_op", slot.first_op}});
  const MeasurementDetails& details = record.details;
  ordered value = {
      {"schema", kMeasurementSchema},
      {"backend", record.backend},
      {"gpu", record.gpu},
      {"device_name", record.device_name},
      {"workload", record.workload_json.empty() ? ordered(nullptr) : ordered::parse(record.workload_json)},
      {"partition", record.partition.key},
      {"kernel_class", record.kernel_class()},
      {"direction", to_string(record.partition.direction)},
      {"nanobatch", record.partition.nanobatch},
      {"ops", ops},
      {"collective", record.partition.collective ? op_to_json(*record.partition.collective) : ordered(nullptr)},
      {"slots", slots},
      {"config", partition::knob_config_to_json(record.config)},
      {"time_s", record.time_s},
      {"energy_j", record.energy_j},
      {"repetitions", details.repetitions},
      {"window_s", details.window_s},
      {"clock",
       {{"min_mhz", details.clock_min_mhz}, {"max_mhz", details.clock_max_mhz}, {"mean_mhz", details.clock_mean_mhz}}},
      {"clock_events", details.clock_events},
      {"clock_event_names", nvml::clock_event_names(details.clock_events)},
      {"temperature_c", {{"start", details.temperature_start_c}, {"end", details.temperature_end_c}}},
      {"power_mean_w", details.power_mean_w},
      {"retries", details.retries},
      {"stable", details.stable},
  };
  return value.dump();
}

MeasurementRecord parse_measurement_line(std::string_view line, std::string_view origin) {
  const json value = parse_json(line, origin);
  // A misspelled field ("energy_mj", "stabel") would otherwise be dropped without a word.
  if (value.is_object() && value.value("schema", json()) == kMeasurementSchema) {
    json_fields::reject_unknown(value,
                                {"schema",        "backend",      "gpu",       "device_name",  "workload",
                                 "partition",     "kernel_class", "direction", "nanobatch",    "ops",
                                 "collective",    "slots",        "config",    "time_s",       "energy_j",
                                 "repetitions",   "window_s",     "clock",     "clock_events", "clock_event_names",
                                 "temperature_c", "power_mean_w", "retries",   "stable"},
                                origin);
  }
  try {
    if (value.at("schema").get<std::string>() != kMeasurementSchema) {
      throw InputError(
          fmt::format("schema must be \"{}\", found {}", kMeasurementSchema, json_fields::excerpt(value.at("schema"))));
    }
    MeasurementRecord record;
    record.backend = value.at("backend").get<std::string>();
    record.gpu = value.at("gpu").get<std::string>();
    record.device_name = value.value("device_name", std::string());
    if (value.contains("workload") && !value.at("workload").is_null()) {
      record.workload_json = ordered::parse(line).at("workload").dump();  // keep the writer's key order
    }
    partition::Partition& partition = record.partition;
    partition.key = value.at("partition").get<std::string>();
    partition.direction = parse_direction(value.value("direction", std::string("forward")), "partition direction");
    partition.nanobatch = value.contains("nanobatch") ? get_int(value, "nanobatch", 0, 1 << 16) : 0;
    for (const json& op : value.at("ops")) partition.compute_ops.push_back(op_from_json(op));
    if (!value.at("collective").is_null()) partition.collective = op_from_json(value.at("collective"));
    for (const json& slot : value.at("slots")) {
      partition.slots.push_back(
          {slot.at("name").get<std::string>(), static_cast<std::size_t>(get_int(slot, "first_op", 0, 1 << 20))});
    }
    record.config = partition::knob_config_from_json(value.at("config"), "config");
    record.time_s = get_bounded(value, "time_s", kMaxMeasuredTimeS);
    record.energy_j = get_bounded(value, "energy_j", kMaxMeasuredEnergyJ);
    if (!(record.time_s > 0) || !(record.energy_j > 0)) {
      throw InputError(fmt::format("time_s {} and energy_j {} must be positive", record.time_s, record.energy_j));
    }
    record.origin = std::string(origin);
    MeasurementDetails& details = record.details;
    details.repetitions = value.contains("repetitions") ? get_int(value, "repetitions", 0, 1 << 30) : 0;
    details.window_s = value.value("window_s", 0.0);
    if (value.contains("clock")) {
      const json& clock = value.at("clock");
      details.clock_min_mhz = clock.value("min_mhz", 0.0);
      details.clock_max_mhz = clock.value("max_mhz", 0.0);
      details.clock_mean_mhz = clock.value("mean_mhz", 0.0);
    }
    details.clock_events = value.value("clock_events", std::uint64_t{0});
    if (value.contains("temperature_c")) {
      details.temperature_start_c = value.at("temperature_c").value("start", 0.0);
      details.temperature_end_c = value.at("temperature_c").value("end", 0.0);
    }
    details.power_mean_w = value.value("power_mean_w", 0.0);
    details.retries = value.contains("retries") ? get_int(value, "retries", 0, 1 << 30) : 0;
    details.stable = value.value("stable", true);
    return record;
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: {}", origin, error.what()));
  } catch (const json::exception& error) {
    throw InputError(fmt::format("{}: not a {} record: {}", origin, kMeasurementSchema, error.what()));
  }
}

void append_measurement(const std::filesystem::path& path, const MeasurementRecord& record) {
  JsonlAppender log(path, path.string());
  log.append(to_json_line(record));
}

void append_profile_header(const std::filesystem::path& path, const ProfileHeader& header) {
  JsonlAppender log(path, path.string());
  log.append(to_json_line(header));
}

std::string to_json_line(const ProfileHeader& header) {
  ordered line;
  line["schema"] = kProfileHeaderSchema;
  line["workload"] = ordered::parse(header.workload_json);
  line["gpu"] = header.gpu;
  line["backend"] = header.backend;
  line["device_name"] = header.device_name;
  line["driver"] = header.driver;
  line["clocks_mhz"] = header.clocks_mhz;
  line["space"] = ordered::parse(header.space_json);
  line["search"] = ordered::parse(header.search_json);
  line["kareus_version"] = header.kareus_version;
  line["date"] = header.date;
  return line.dump();
}

namespace {

ProfileHeader parse_header(const json& value, std::string_view origin) {
  try {
    ProfileHeader header;
    header.workload_json = value.at("workload").dump();
    header.gpu = value.at("gpu").get<std::string>();
    header.backend = value.at("backend").get<std::string>();
    header.device_name = value.value("device_name", std::string());
    header.driver = value.value("driver", std::string());
    header.clocks_mhz = value.at("clocks_mhz").get<std::vector<int>>();
    header.space_json = value.value("space", json::object()).dump();
    header.search_json = value.value("search", json::object()).dump();
    header.kareus_version = value.value("kareus_version", std::string());
    header.date = value.value("date", std::string());
    return header;
  } catch (const json::exception& error) {
    throw InputError(fmt::format("{}: not a {} header: {}", origin, kProfileHeaderSchema, error.what()));
  }
}

/// The header of `line` if it is one (a cheap test first: records far outnumber headers).
std::optional<ProfileHeader> header_of(std::string_view line, std::string_view origin) {
  if (line.find(kProfileHeaderSchema) == std::string_view::npos) return std::nullopt;
  const json value = parse_json(line, origin);  // depth-bounded, like every record
  if (!value.is_object() || value.value("schema", std::string()) != kProfileHeaderSchema) return std::nullopt;
  return parse_header(value, origin);
}

}  // namespace

std::vector<MeasurementRecord> read_measurements(const std::filesystem::path& path, const JsonlAppender::Warn& warn) {
  return read_profile_log(path, warn).records;
}

ProfileLog read_profile_log(const std::filesystem::path& path, const JsonlAppender::Warn& warn) {
  ProfileLog log;
  for_each_jsonl_line(
      read_text_file(path), path.string(),
      [&](std::string_view line, int line_number) {
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank
        const std::string origin = fmt::format("{}:{}", path.string(), line_number);
        if (std::optional<ProfileHeader> header = header_of(line, origin)) {
          log.headers.push_back(std::move(*header));
        } else {
          log.records.push_back(parse_measurement_line(line, origin));
        }
      },
      warn);
  return log;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace kareus::device
