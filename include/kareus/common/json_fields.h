// kareus/common/json_fields.h - typed access to JSON objects with errors that name the field.
//
// Every JSON input (presets, plans, logs) is read through these so a wrong type or
// a missing key says "FILE: field 'hidden' must be a positive integer" and never
// falls back to a silent default.
#pragma once

#include <cstddef>
#include <optional>
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

/// A short rendering of `value` for an error message: its JSON text cut to about `max_chars`
/// characters ("..." marks a cut), built without recursing more than a few levels, so a huge or
/// deeply nested value never makes a huge message or a deep recursion.
std::string excerpt(const nlohmann::json& value, std::size_t max_chars = 60);

/// Where two documents first differ: the dotted path of the field and excerpts of both values
/// ("(missing)" for a key one side lacks).
struct JsonDifference {
  std::string path;
  std::string left;
  std::string right;
};

/// The first field at which `left` and `right` differ, objects compared key by key (left's keys
/// first, recursively; numbers by value); nullopt when equal. With `shared_keys_only`, a key only
/// one side has is not a difference (an older document may lack newer fields).
std::optional<JsonDifference> first_difference(const nlohmann::json& left, const nlohmann::json& right,
                                               bool shared_keys_only);

/// `text` cut to about `max_chars` characters ("..." marks a cut), for quoting a user's string
/// (a field value, a CSV cell) in an error message.
std::string short_text(std::string_view text, std::size_t max_chars = 60);

/// Rejects keys of `object` not in `allowed` (a typo must not be silently ignored).
void reject_unknown(const nlohmann::json& object, const std::vector<std::string_view>& allowed,
                    std::string_view origin);

}  // namespace kareus::json_fields
