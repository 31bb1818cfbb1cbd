#include "kareus/search/evaluation_log.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"
#include "kareus/common/jsonl_log.h"
#include "kareus/partition/search_space.h"

namespace kareus::search {
namespace {

constexpr std::string_view kSchema = "kareus.evaluations/1";

nlohmann::ordered_json header_json(const LogHeader& header) {
  return {{"schema", kSchema},
          {"workload", nlohmann::ordered_json::parse(header.workload_json.empty() ? "{}" : header.workload_json)},
          {"partition", header.partition_key},
          {"nanobatch", header.nanobatch},
          {"device", {{"kind", header.device_kind}, {"gpu", header.gpu}}},
          {"seed", header.seed}};
}

std::string describe(const nlohmann::json& value) {
  if (!value.is_string()) return json_fields::excerpt(value);
  const std::string excerpt = json_fields::excerpt(value);  // "text" or "text...
  const bool cut = excerpt.back() != '"';
  return fmt::format("'{}'{}", excerpt.substr(1, excerpt.size() - (cut ? 4 : 2)), cut ? "..." : "");
}

// Throws InputError naming the first header field that differs from `expected`.
void check_header(const nlohmann::json& found, const nlohmann::ordered_json& expected, const std::string& origin) {
  if (!found.is_object()) throw InputError(fmt::format("{}: the header must be a JSON object", origin));
  const std::string schema = json_fields::require_string(found, "schema", origin);
  if (schema != kSchema) {
    throw InputError(fmt::format("{}: schema '{}' is not an evaluation log (expected '{}')", origin, schema, kSchema));
  }
  const auto compare = [&](const nlohmann::json& actual, const nlohmann::ordered_json& ordered,
                           std::string_view field) {
    const nlohmann::json wanted = nlohmann::json::parse(ordered.dump());
    if (actual != wanted) {
      throw InputError(fmt::format("{}: the log is for {} {}, not {} (use another --log file)", origin, field,
                                   describe(actual), describe(wanted)));
    }
  };
  compare(json_fields::require(found, "workload", origin), expected["workload"], "workload");
  compare(json_fields::require(found, "partition", origin), expected["partition"], "partition");
  compare(json_fields::require(found, "nanobatch", origin), expected["nanobatch"], "nanobatch");
  const nlohmann::json& device = json_fields::require(found, "device", origin);
  compare(json_fields::require(device, "kind", origin), expected["device"]["kind"], "device kind");
  compare(json_fields::require(device, "gpu", origin), expected["device"]["gpu"], "gpu");
  compare(json_fields::require(found, "seed", origin), expected["seed"], "seed");
}

Evaluation parse_evaluation(const nlohmann::json& line, const std::string& origin) {
  if (!line.is_object()) throw InputError(fmt::format("{}: a measurement must be a JSON object", origin));
  Evaluation evaluation;
  evaluation.config =
      partition::knob_config_from_json(json_fields::require(line, "config", origin), origin + ": config");
  evaluation.time_s = json_fields::require_positive(line, "time_s", origin);
  evaluation.energy_j = json_fields::require_positive(line, "energy_j", origin);
  return evaluation;
}

}  // namespace

EvaluationLog::EvaluationLog(std::filesystem::path path, const LogHeader& header, const WarningCallback& warn)
    : path_(std::move(path)), log_(path_, "--log " + path_.string(), warn) {
  const nlohmann::ordered_json expected = header_json(header);
  const std::string& content = log_.existing();  // whole lines: a torn tail is already cut off
  std::size_t offset = 0;
  std::size_t keep = content.size();  // bytes of the file that stay
  for_each_jsonl_line(content, path_.string(), [&](std::string_view text, int line_number) {
    const std::string origin = fmt::format("{}:{}", path_.string(), line_number);
    const bool last = offset + text.size() + 1 >= content.size();
    try {
      check_json_depth(text, origin);
      const nlohmann::json parsed = nlohmann::json::parse(text);
      if (line_number == 1) {
        check_header(parsed, expected, origin);
      } else {
        recorded_.push_back(parse_evaluation(parsed, origin));
      }
    } catch (const nlohmann::json::exception& error) {
      if (!last) throw InputError(fmt::format("{}: corrupt line in the evaluation log: {}", origin, error.what()));
      if (warn) warn(fmt::format("{}: dropping a corrupt last line: \"{}\"", origin, text.substr(0, 80)));
      keep = offset;
    } catch (const InputError&) {
      if (!last || line_number == 1) throw;
      if (warn) warn(fmt::format("{}: dropping a malformed last line: \"{}\"", origin, text.substr(0, 80)));
      keep = offset;
    }
    offset += text.size() + 1;
  });
  if (keep < content.size()) log_.cut_to(keep);
  if (keep == 0) {
    log_.append(expected.dump());
    log_.checkpoint();
  }
  for (std::size_t index = 0; index < recorded_.size(); ++index) {
    for (std::size_t earlier = 0; earlier < index; ++earlier) {
      if (recorded_[earlier].config == recorded_[index].config) {
        throw InputError(fmt::format("{}: config {} MHz, {} CTAs, slot '{}' is recorded twice", path_.string(),
                                     recorded_[index].config.freq_mhz, recorded_[index].config.ctas,
                                     recorded_[index].config.slot));
      }
    }
  }
}

std::optional<Evaluation> EvaluationLog::find(const partition::KnobConfig& config) const {
  for (const Evaluation& evaluation : recorded_) {
    if (evaluation.config == config) return evaluation;
  }
  return std::nullopt;
}

void EvaluationLog::append(const Evaluation& evaluation) {
  const nlohmann::ordered_json line = {{"config", partition::knob_config_to_json(evaluation.config)},
                                       {"time_s", evaluation.time_s},
                                       {"energy_j", evaluation.energy_j}};
  log_.append(line.dump());
  log_.checkpoint();  // each search measurement is worth a sync
}

}  // namespace kareus::search
