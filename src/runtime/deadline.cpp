#include "kareus/runtime/deadline.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::runtime {

DeadlineChoice choose_for_deadline(std::span<const FrontierPoint> frontier, double deadline_s) {
  if (frontier.empty()) throw InputError("deadline: the frontier has no points");
  if (!std::isfinite(deadline_s) || deadline_s <= 0) {
    throw InputError(fmt::format("deadline: the iteration-time deadline must be > 0 s, found {}", deadline_s));
  }
  // A NaN compares false with everything and would pass as meeting any deadline.
  for (std::size_t index = 0; index < frontier.size(); ++index) {
    const FrontierPoint& point = frontier[index];
    if (!std::isfinite(point.time_s) || point.time_s <= 0 || !std::isfinite(point.energy_j) || point.energy_j < 0) {
      throw InputError(
          fmt::format("deadline: frontier point {} has time_s {} and energy_j {}: expected a finite "
                      "time_s > 0 and energy_j >= 0",
                      index, point.time_s, point.energy_j));
    }
  }
  std::optional<std::size_t> best;
  std::size_t fastest = 0;
  for (std::size_t index = 0; index < frontier.size(); ++index) {
    const FrontierPoint& point = frontier[index];
    const FrontierPoint& quickest = frontier[fastest];
    if (point.time_s < quickest.time_s || (point.time_s == quickest.time_s && point.energy_j < quickest.energy_j)) {
      fastest = index;
    }
    if (point.time_s > deadline_s) continue;
    if (!best || point.energy_j < frontier[*best].energy_j ||
        (point.energy_j == frontier[*best].energy_j && point.time_s < frontier[*best].time_s)) {
      best = index;
    }
  }
  if (best) return {*best, true};
  return {fastest, false};
}

std::vector<FrontierPoint> read_frontier(const std::filesystem::path& path) {
  return parse_frontier(read_text_file(path), path);
}

std::vector<FrontierPoint> parse_frontier(std::string_view text, const std::filesystem::path& path) {
  const std::string origin = path.string();
  const nlohmann::json document = parse_json(text, origin);
  namespace jf = json_fields;
  jf::reject_unknown(document, {"schema", "points"}, origin);
  if (const std::string schema = jf::require_string(document, "schema", origin); schema != plan::kFrontierSchema) {
    throw InputError(fmt::format("{}: schema must be \"{}\", found \"{}\"", origin, plan::kFrontierSchema,
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

}  // namespace kareus::runtime
