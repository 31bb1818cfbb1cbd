#include "kareus/interop/pfo_protocol.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/file_io.h"

namespace kareus::interop {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxListLength = 1u << 16;

/// Rejects bodies nested deeper than kMaxRequestJsonDepth before nlohmann-json recurses into them.
void check_nesting(std::string_view body) {
  if (json_nesting_past(body, kMaxRequestJsonDepth) != std::string_view::npos) {
    throw RequestError("", fmt::format("request body nests deeper than {} levels", kMaxRequestJsonDepth));
  }
}

void reject_unknown(const json& object, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (std::string_view name : allowed) known = known || key == name;
    if (!known) {
      throw RequestError(key, fmt::format("unknown field '{}' (expected {})", key.substr(0, 64),
                                          fmt::join(allowed.begin(), allowed.end(), ", ")));
    }
  }
}

// The request body: a JSON object within the size and depth bounds, holding only `fields`.
json parse_body(std::string_view body, std::initializer_list<std::string_view> fields) {
  if (body.size() > kMaxRequestBodyBytes) {
    throw RequestError(
        "", fmt::format("request body is {} bytes, more than the {} allowed", body.size(), kMaxRequestBodyBytes));
  }
  check_nesting(body);
  json document = json::parse(body, nullptr, false);
  if (document.is_discarded()) throw RequestError("", "request body is not valid JSON");
  if (!document.is_object()) throw RequestError("", "request body must be a JSON object");
  reject_unknown(document, fields);
  return document;
}

const json& require(const json& object, std::string_view key) {
  const auto found = object.find(key);
  if (found == object.end()) throw RequestError(std::string(key), fmt::format("missing field '{}'", key));
  return *found;
}

int require_int(const json& value, const std::string& field, long long minimum, long long maximum) {
  if (!value.is_number_integer()) {
    throw RequestError(field, fmt::format("field '{}' must be an integer, found {}", field, value.type_name()));
  }
  const bool in_range = value.is_number_unsigned()
                            ? value.get<unsigned long long>() <= static_cast<unsigned long long>(maximum) &&
                                  static_cast<long long>(value.get<unsigned long long>()) >= minimum
                            : value.get<long long>() >= minimum && value.get<long long>() <= maximum;
  if (!in_range) {
    throw RequestError(
        field, fmt::format("field '{}' must be an integer in {}..{}, found {}", field, minimum, maximum, value.dump()));
  }
  return static_cast<int>(value.get<long long>());
}

int require_int_field(const json& object, std::string_view key, long long minimum, long long maximum) {
  return require_int(require(object, key), std::string(key), minimum, maximum);
}

double require_finite(const json& value, const std::string& field) {
  if (!value.is_number() || !std::isfinite(value.get<double>())) {
    throw RequestError(field, fmt::format("field '{}' must be a finite number, found {}", field, value.type_name()));
  }
  return value.get<double>();
}

std::vector<double> require_number_list(const json& object, std::string_view key) {
  const std::string field(key);
  const json& value = require(object, key);
  if (!value.is_array()) throw RequestError(field, fmt::format("field '{}' must be a list of numbers", field));
  if (value.size() > kMaxListLength) {
    throw RequestError(field,
                       fmt::format("field '{}' has {} entries, more than {}", field, value.size(), kMaxListLength));
  }
  std::vector<double> numbers;
  for (std::size_t index = 0; index < value.size(); ++index) {
    numbers.push_back(require_finite(value[index], fmt::format("{}[{}]", field, index)));
  }
  return numbers;
}

/// {name: [[s, ...], ...]}, Zeus's time/energy breakdown.
void check_breakdown(const json& object, std::string_view key) {
  const auto found = object.find(key);
  if (found == object.end()) return;
  const std::string field(key);
  if (!found->is_object())
    throw RequestError(field, fmt::format("field '{}' must be an object of lists of lists", field));
  for (const auto& [name, iterations] : found->items()) {
    const std::string entry = fmt::format("{}.{}", field, name.substr(0, 64));
    if (!iterations.is_array()) throw RequestError(entry, fmt::format("field '{}' must be a list of lists", entry));
    for (std::size_t iteration = 0; iteration < iterations.size(); ++iteration) {
      const json& values = iterations[iteration];
      const std::string at = fmt::format("{}[{}]", entry, iteration);
      if (!values.is_array()) throw RequestError(at, fmt::format("field '{}' must be a list of numbers", at));
      for (std::size_t index = 0; index < values.size(); ++index) {
        (void)require_finite(values[index], fmt::format("{}[{}]", at, index));
      }
    }
  }
}

}  // namespace

JobInfo parse_job_info(std::string_view body) {
  const json document =
      parse_body(body, {"job_id", "pp_degree", "dp_degree", "tp_degree", "world_size", "job_metadata"});
  if (const auto found = document.find("job_id"); found != document.end()) {
    if (!found->is_string() || !found->get<std::string>().empty()) {
      throw RequestError("job_id", "field 'job_id' must be empty (the server assigns the job id)");
    }
  }
  JobInfo info;
  info.pp_degree = require_int_field(document, "pp_degree", 1, kMaxDegree);
  info.dp_degree = require_int_field(document, "dp_degree", 1, kMaxDegree);
  info.tp_degree = require_int_field(document, "tp_degree", 1, kMaxDegree);
  info.world_size = require_int_field(document, "world_size", 1, kMaxDegree);
  const long long product = static_cast<long long>(info.pp_degree) * info.dp_degree * info.tp_degree;
  if (product != info.world_size) {
    throw RequestError("world_size",
                       fmt::format("field 'world_size' must equal pp_degree x dp_degree x tp_degree = "
                                   "{} x {} x {} = {}, found {}",
                                   info.pp_degree, info.dp_degree, info.tp_degree, product, info.world_size));
  }
  if (const auto found = document.find("job_metadata"); found != document.end() && !found->is_null()) {
    if (!found->is_string()) throw RequestError("job_metadata", "field 'job_metadata' must be a string or null");
    if (found->get_ref<const std::string&>().size() > 256) {
      throw RequestError("job_metadata", "field 'job_metadata' is longer than 256 characters");
    }
    info.job_metadata = found->get<std::string>();
  }
  return info;
}

RankInfo parse_rank_info(std::string_view body) {
  const json document = parse_body(body, {"rank", "dp_rank", "pp_rank", "tp_rank", "available_frequencies"});
  RankInfo info;
  info.rank = require_int_field(document, "rank", 0, kMaxDegree - 1);
  info.dp_rank = require_int_field(document, "dp_rank", 0, kMaxDegree - 1);
  info.pp_rank = require_int_field(document, "pp_rank", 0, kMaxDegree - 1);
  info.tp_rank = require_int_field(document, "tp_rank", 0, kMaxDegree - 1);
  const json& clocks = require(document, "available_frequencies");
  if (!clocks.is_array()) {
    throw RequestError("available_frequencies", "field 'available_frequencies' must be a list of integers (MHz)");
  }
  if (clocks.size() > 4096) {
    throw RequestError("available_frequencies",
                       fmt::format("field 'available_frequencies' has {} entries, more than 4096", clocks.size()));
  }
  for (std::size_t index = 0; index < clocks.size(); ++index) {
    info.available_frequencies.push_back(
        require_int(clocks[index], fmt::format("available_frequencies[{}]", index), 0, 1'000'000));
  }
  return info;
}

ProfilingResult parse_profiling_result(std::string_view body) {
  const json document = parse_body(body, {"rank", "iter_time", "iter_energy", "time_breakdown", "energy_breakdown"});
  ProfilingResult result;
  result.rank = require_int_field(document, "rank", 0, kMaxDegree - 1);
  result.iter_time = require_number_list(document, "iter_time");
  result.iter_energy = require_number_list(document, "iter_energy");
  check_breakdown(document, "time_breakdown");
  check_breakdown(document, "energy_breakdown");
  result.json = document.dump();
  return result;
}

double parse_deadline_request(std::string_view body) {
  const json document = parse_body(body, {"deadline_s"});
  const double deadline_s = require_finite(require(document, "deadline_s"), "deadline_s");
  if (deadline_s <= 0) {
    throw RequestError("deadline_s",
                       fmt::format("field 'deadline_s' must be a positive number of seconds, found {}", deadline_s));
  }
  return deadline_s;
}

int parse_rank_query(const std::string* value) {
  if (value == nullptr) throw RequestError("rank", "missing query parameter 'rank'");
  int rank = -1;
  const char* first = value->data();
  const char* last = value->data() + value->size();
  const auto parsed = std::from_chars(first, last, rank);
  if (value->empty() || parsed.ec != std::errc() || parsed.ptr != last || rank < 0 || rank >= kMaxDegree) {
    throw RequestError("rank", fmt::format("query parameter 'rank' must be an integer in 0..{}, found '{}'",
                                           kMaxDegree - 1, value->substr(0, 32)));
  }
  return rank;
}

}  // namespace kareus::interop
