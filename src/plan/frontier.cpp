#include "kareus/plan/frontier.h"

#include <nlohmann/json.hpp>

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

}  // namespace kareus::plan
