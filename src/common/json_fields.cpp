#include "kareus/common/json_fields.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"

namespace kareus::json_fields {
namespace {

constexpr int kExcerptDepth = 4;

std::string dump_string(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Appends `value`'s JSON text to `out`, stopping once `out` is longer than `limit`.
void append_excerpt(const nlohmann::json& value, std::string& out, std::size_t limit, int depth) {
  if (out.size() > limit) return;
  if (value.is_object() || value.is_array()) {
    const bool object = value.is_object();
    if (depth >= kExcerptDepth) {
      out += object ? "{...}" : "[...]";
      return;
    }
    out += object ? '{' : '[';
    bool first = true;
    for (auto item = value.begin(); item != value.end(); ++item) {
      if (out.size() > limit) return;
      if (!first) out += ", ";
      first = false;
      if (object) out += dump_string(item.key()) + ": ";
      append_excerpt(item.value(), out, limit, depth + 1);
    }
    out += object ? '}' : ']';
  } else if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    out += dump_string(text.substr(0, limit + 1));
  } else {
    out += value.dump();
  }
}

}  // namespace

std::string short_text(std::string_view text, std::size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  std::size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return std::string(text.substr(0, cut)) + "...";
}

std::string excerpt(const nlohmann::json& value, std::size_t max_chars) {
  std::string out;
  append_excerpt(value, out, max_chars, 0);
  return short_text(out, max_chars);
}

namespace {

std::optional<JsonDifference> difference_at(const nlohmann::json& left, const nlohmann::json& right,
                                            const std::string& path, bool shared_keys_only) {
  if (!left.is_object() || !right.is_object()) {
    if (left == right) return std::nullopt;
    return JsonDifference{path.empty() ? "(document)" : path, excerpt(left), excerpt(right)};
  }
  auto child = [&path](const std::string& key) { return path.empty() ? key : path + "." + key; };
  for (const auto& [key, value] : left.items()) {
    const auto found = right.find(key);
    if (found == right.end()) {
      if (shared_keys_only) continue;
      return JsonDifference{child(key), excerpt(value), "(missing)"};
    }
    if (auto difference = difference_at(value, *found, child(key), shared_keys_only)) return difference;
  }
  if (shared_keys_only) return std::nullopt;
  for (const auto& [key, value] : right.items()) {
    if (!left.contains(key)) return JsonDifference{child(key), "(missing)", excerpt(value)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<JsonDifference> first_difference(const nlohmann::json& left, const nlohmann::json& right,
                                               bool shared_keys_only) {
  return difference_at(left, right, "", shared_keys_only);
}

const nlohmann::json& require(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  if (!object.is_object()) throw InputError(fmt::format("{}: expected a JSON object", origin));
  auto found = object.find(std::string(key));
  if (found == object.end()) throw InputError(fmt::format("{}: missing field '{}'", origin, key));
  return *found;
}

double require_number(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  const nlohmann::json& value = require(object, key, origin);
  if (!value.is_number() || !std::isfinite(value.get<double>())) {
    throw InputError(fmt::format("{}: field '{}' must be a number, found {}", origin, key, excerpt(value)));
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
    throw InputError(fmt::format("{}: field '{}' must be a positive integer, found {}", origin, key, excerpt(value)));
  }
  return value.get<long long>();
}

std::string require_string(const nlohmann::json& object, std::string_view key, std::string_view origin) {
  const nlohmann::json& value = require(object, key, origin);
  if (!value.is_string()) {
    throw InputError(fmt::format("{}: field '{}' must be a string, found {}", origin, key, excerpt(value)));
  }
  return value.get<std::string>();
}

bool optional_bool(const nlohmann::json& object, std::string_view key, bool fallback, std::string_view origin) {
  auto found = object.find(std::string(key));
  if (found == object.end()) return fallback;
  if (!found->is_boolean()) {
    throw InputError(fmt::format("{}: field '{}' must be true or false, found {}", origin, key, excerpt(*found)));
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
