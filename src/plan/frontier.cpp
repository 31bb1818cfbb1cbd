#include "kareus/plan/frontier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::plan {

std::string frontier_to_json(std::span<const FrontierPoint> points) {
  nlohmann::ordered_json document;
  document["schema"] = kFrontierSchema;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const FrontierPoint& point : points) {
    entries.push_back({{"time_s", point.time_s}, {"energy_j", point.energy_j}, {"plan", point.plan}});
  }
  document["points"] = std::move(entries);
  return document.dump(2) + "\n";
}

std::vector<FrontierPoint> read_frontier(const std::filesystem::path& path) {
  return parse_frontier(read_text_file(path), path);
}

std::vector<FrontierPoint> parse_frontier(std::string_view text, const std::filesystem::path& path) {
  const std::string origin = path.string();
  const nlohmann::json document = parse_json(text, origin);
  namespace jf = json_fields;
  jf::reject_unknown(document, {"schema", "points"}, origin);
  if (const std::string schema = jf::require_string(document, "schema", origin); schema != kFrontierSchema) {
    throw InputError(fmt::format("{}: schema must be \"{}\", found \"{}\"", origin, kFrontierSchema,
                                 json_fields::short_text(schema)));
  }
  const nlohmann::json& points = jf::require(document, "points", origin);
  if (!points.is_array() || points.empty())
    throw InputError(fmt::format("{}: 'points' must be a non-empty array", origin));
  std::vector<FrontierPoint> frontier;
  for (std::size_t index = 0; index < points.size(); ++index) {
    const std::string point_origin = fmt::format("{}: points[{}]", origin, index);
    jf::reject_unknown(points[index], {"time_s", "energy_j", "plan"}, point_origin);
    FrontierPoint point;
    point.time_s = jf::require_positive(points[index], "time_s", point_origin);
    point.energy_j = jf::require_non_negative(points[index], "energy_j", point_origin);
    const std::filesystem::path plan = jf::require_string(points[index], "plan", point_origin);
    point.plan = (plan.is_absolute() ? plan : path.parent_path() / plan).string();
    frontier.push_back(std::move(point));
  }
  return frontier;
}

std::vector<FrontierPoint> read_summary_frontier(const std::filesystem::path& path, const std::string& method) {
  namespace jf = json_fields;
  const std::string origin = path.string();
  const nlohmann::json document = read_json_file(path);
  if (const std::string schema = jf::require_string(document, "schema", origin); schema != kSummarySchema) {
    throw InputError(fmt::format("{}: schema must be \"{}\", found \"{}\"", origin, kSummarySchema,
                                 json_fields::short_text(schema)));
  }
  const nlohmann::json& methods = jf::require(document, "methods", origin);
  if (!methods.is_object() || !methods.contains(method)) {
    std::vector<std::string> names;
    if (methods.is_object()) {
      for (const auto& [name, value] : methods.items()) names.push_back(name);
    }
    throw InputError(
        fmt::format("{}: no method '{}' (--method; the summary has {})", origin, method, fmt::join(names, ", ")));
  }
  const nlohmann::json& points = jf::require(methods[method], "frontier", origin + ".methods." + method);
  if (!points.is_array() || points.empty()) {
    throw InputError(fmt::format("{}: methods.{}.frontier must be a non-empty array", origin, method));
  }
  std::vector<FrontierPoint> frontier;
  for (std::size_t index = 0; index < points.size(); ++index) {
    const std::string point_origin = fmt::format("{}: methods.{}.frontier[{}]", origin, method, index);
    FrontierPoint point;
    point.time_s = jf::require_positive(points[index], "time_s", point_origin);
    point.energy_j = jf::require_non_negative(points[index], "energy_j", point_origin);
    const std::filesystem::path plan = jf::require_string(points[index], "plan", point_origin);
    point.plan = (plan.is_absolute() ? plan : path.parent_path() / plan).string();
    frontier.push_back(std::move(point));
  }
  return frontier;
}

}  // namespace kareus::plan
