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

namespace {

namespace jf = json_fields;

void require_schema(const nlohmann::json& document, std::string_view schema, const std::string& origin) {
  if (const std::string found = jf::require_string(document, "schema", origin); found != schema) {
    throw InputError(
        fmt::format("{}: schema must be \"{}\", found \"{}\"", origin, schema, json_fields::short_text(found)));
  }
}

// The points of the array `entries` at key path `what` of the file `path`: time_s > 0,
// energy_j >= 0, the plan resolved against the file's folder; with `only_point_fields`, no other
// field (a frontier file's points; a summary's carry more).
std::vector<FrontierPoint> read_points(const nlohmann::json& entries, const std::string& what,
                                       const std::filesystem::path& path, bool only_point_fields) {
  const std::string origin = path.string();
  if (!entries.is_array() || entries.empty()) {
    throw InputError(fmt::format("{}: '{}' must be a non-empty array", origin, what));
  }
  std::vector<FrontierPoint> frontier;
  for (std::size_t index = 0; index < entries.size(); ++index) {
    const nlohmann::json& entry = entries[index];
    const std::string point_origin = fmt::format("{}: {}[{}]", origin, what, index);
    if (only_point_fields) jf::reject_unknown(entry, {"time_s", "energy_j", "plan"}, point_origin);
    FrontierPoint point;
    point.time_s = jf::require_positive(entry, "time_s", point_origin);
    point.energy_j = jf::require_non_negative(entry, "energy_j", point_origin);
    const std::filesystem::path plan = jf::require_string(entry, "plan", point_origin);
    point.plan = (plan.is_absolute() ? plan : path.parent_path() / plan).string();
    frontier.push_back(std::move(point));
  }
  return frontier;
}

}  // namespace

std::vector<FrontierPoint> parse_frontier(std::string_view text, const std::filesystem::path& path) {
  const std::string origin = path.string();
  const nlohmann::json document = parse_json(text, origin);
  jf::reject_unknown(document, {"schema", "points"}, origin);
  require_schema(document, kFrontierSchema, origin);
  return read_points(jf::require(document, "points", origin), "points", path, true);
}

std::vector<FrontierPoint> read_summary_frontier(const std::filesystem::path& path, const std::string& method) {
  const std::string origin = path.string();
  const nlohmann::json document = read_json_file(path);
  require_schema(document, kSummarySchema, origin);
  const nlohmann::json& methods = jf::require(document, "methods", origin);
  if (!methods.is_object() || !methods.contains(method)) {
    std::vector<std::string> names;
    if (methods.is_object()) {
      for (const auto& [name, value] : methods.items()) names.push_back(name);
    }
    throw InputError(
        fmt::format("{}: no method '{}' (--method; the summary has {})", origin, method, fmt::join(names, ", ")));
  }
  const std::string what = fmt::format("methods.{}.frontier", method);
  return read_points(jf::require(methods[method], "frontier", origin + ": methods." + method), what, path, false);
}

}  // namespace kareus::plan
