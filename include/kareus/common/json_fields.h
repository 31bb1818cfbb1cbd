// kareus/common/json_fields.h - typed access to JSON objects with errors that name the field.
//
// Every JSON input (presets, plans, logs) is read through these so a wrong type or
// a missing key says "FILE: field 'hidden' must be a positive integer" and never
// falls back to a silent default.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kareus::json_fields {

/// The member `key` of `object`; throws InputError "<origin>: missing field 'key'".
const nlohmann::json& require(const nlohmann::json& object, std::string_view key, std::string_view origin);

double require_number(const nlohmann::json& object, std::string_view key, std::string_view origin);
double require_positive(const nlohmann::json& object, std::string_view key, std::string_view origin);
double require_non_negative(const nlohmann::json& object, std::string_view key, std::string_view origin);
long long require_positive_int(const nlohmann::json& object, std::string_view key, std::string_view origin);
std::string require_string(const nlohmann::json& object, std::string_view key, std::string_view origin);
bool optional_bool(const nlohmann::json& object, std::string_view key, bool fallback, std::string_view origin);

/// Rejects keys of `object` not in `allowed` (a typo must not be silently ignored).
void reject_unknown(const nlohmann::json& object, const std::vector<std::string_view>& allowed,
                    std::string_view origin);

}  // namespace kareus::json_fields
