#include "kareus/common/json_fields.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"

namespace kareus::json_fields {

const nlohmann::json& require(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  if (!object.is_object()) throw InputError(fmt::format("{}: expected a JSON object", origin));
  auto found = object.find(std::string(key));
  if (found == object.end()) throw InputError(fmt::format("{}: missing field '{}'", origin, key));
  return *found;
}

double require_number(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  const nlohmann::json& value = require(object, key, origin);
  if (!value.is_number() || !std::isfinite(value.get<double>())) {
    throw InputError(fmt::format("{}: field '{}' must be a number, found {}", origin, key, value.dump()));
  }
  return value.get<double>();
}

double require_positive(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  const double value = require_number(object, key, origin);
  if (value <= 0) throw InputError(fmt::format("{}: field '{}' must be > 0, found {}", origin, key, value));
  return value;
}

double require_non_negative(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  const double value = require_number(object, key, origin);
  if (value < 0) throw InputError(fmt::format("{}: field '{}' must be >= 0, found {}", origin, key, value));
  return value;
}

long long require_positive_int(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  const nlohmann::json& value = require(object, key, origin);
  if (!value.is_number_integer() || value.get<long long>() <= 0) {
    throw InputError(fmt::format("{}: field '{}' must be a positive integer, found {}", origin, key, value.dump()));
  }
  return value.get<long long>();
}

std::string require_string(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  const nlohmann::json& value = require(object, key, origin);
  if (!value.is_string()) {
    throw InputError(fmt::format("{}: field '{}' must be a string, found {}", origin, key, value.dump()));
  }
  return value.get<std::string>();
}

bool optional_bool(const nlohmann::json& object, std::string_view key, bool fallback, std::string_view origin) {
  auto found = object.find(std::string(key));
  if (found == object.end()) return fallback;
  if (!found->is_boolean()) {
    throw InputError(fmt::format("{}: field '{}' must be true or false, found {}", origin, key, found->dump()));
  }
  return found->get<bool>();
}

void reject_unknown(const nlohmann::json& object, const std::vector<std::string_view>& allowed,
                    std::string_view origin) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw InputError(fmt::format("{}: unknown field '{}' (allowed: {})", origin, key, fmt::join(allowed, ", ")));
    }
  }
}

}  // namespace kareus::json_fields
