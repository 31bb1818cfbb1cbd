#include "kareus/runtime/daemon_protocol.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::runtime {
namespace {

using nlohmann::json;

// The ops' wire names: the one list that writing and parsing a request both read.
constexpr std::array<std::pair<DaemonOp, std::string_view>, 5> kOpNames{{{DaemonOp::kSet, "set"},
                                                                         {DaemonOp::kReset, "reset"},
                                                                         {DaemonOp::kGet, "get"},
                                                                         {DaemonOp::kSupported, "supported"},
                                                                         {DaemonOp::kEnergy, "energy"}}};

int require_int(const json& object, const char* key, long long minimum) {
  auto found = object.find(key);
  if (found == object.end()) throw InputError(fmt::format("request: missing field '{}'", key));
  if (!found->is_number_integer() || found->get<long long>() < minimum || found->get<long long>() > 1'000'000) {
    throw InputError(fmt::format("request: field '{}' must be an integer >= {}, found {}", key, minimum,
                                 json_fields::excerpt(*found)));
  }
  return static_cast<int>(found->get<long long>());
}

// One JSON line; InputError "<what>: invalid JSON (...)", or on nesting past kMaxJsonDepth.
json parse_line(std::string_view line, std::string_view what) {
  try {
    check_json_depth(line, what);
    return json::parse(line);
  } catch (const json::exception& error) {
    throw InputError(fmt::format("{}: invalid JSON ({})", what, error.what()));
  }
}

}  // namespace

std::string_view to_string(DaemonOp op) {
  for (const auto& [named, name] : kOpNames) {
    if (named == op) return name;
  }
  return "?";
}

DaemonRequest parse_daemon_request(std::string_view line) {
  json document = parse_line(line, "request");
  if (!document.is_object()) throw InputError("request: expected a JSON object");
  DaemonRequest request;
  auto op = document.find("op");
  if (op == document.end() || !op->is_string()) throw InputError("request: field 'op' must be a string");
  const std::string name = op->get<std::string>();
  const auto named =
      std::find_if(kOpNames.begin(), kOpNames.end(), [&](const auto& entry) { return entry.second == name; });
  if (named == kOpNames.end()) {
    throw InputError(fmt::format("request: unknown op {} (expected set, reset, get, supported or energy)",
                                 json(name).dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  request.op = named->first;
  if (request.op == DaemonOp::kSet) {
    json_fields::reject_unknown(document, {"op", "gpu", "freq_mhz", "id"}, "request");
    request.freq_mhz = require_int(document, "freq_mhz", 1);
  } else {
    json_fields::reject_unknown(document, {"op", "gpu", "id"}, "request");
  }
  request.gpu = require_int(document, "gpu", 0);
  if (auto id = document.find("id"); id != document.end()) {
    // An unsigned id past the signed range would come back as a different (negative) id.
    if (!id->is_number_integer() || (id->is_number_unsigned() && id->get<std::uint64_t>() > INT64_MAX)) {
      throw InputError("request: field 'id' must be an integer in the signed 64-bit range");
    }
    request.id = id->get<long long>();
  }
  return request;
}

std::string format_daemon_request(const DaemonRequest& request) {
  json document = {{"op", to_string(request.op)}, {"gpu", request.gpu}};
  if (request.op == DaemonOp::kSet) document["freq_mhz"] = request.freq_mhz;
  if (request.id) document["id"] = *request.id;
  return document.dump() + "\n";
}

DaemonReply parse_daemon_reply(std::string_view line) {
  json document;
  try {
    document = parse_line(line, "kareusd reply");
  } catch (const InputError& error) {
    throw Error(error.what());  // a bad reply is the daemon's fault, not the user's
  }
  try {
    DaemonReply reply;
    reply.ok = document.at("ok").get<bool>();
    if (!reply.ok) reply.error = document.at("error").get<std::string>();
    if (document.contains("freq_mhz")) reply.freq_mhz = document["freq_mhz"].get<int>();
    if (document.contains("clocks_mhz")) reply.clocks_mhz = document["clocks_mhz"].get<std::vector<int>>();
    if (document.contains("energy_mj")) reply.energy_mj = document["energy_mj"].get<std::uint64_t>();
    if (document.contains("id")) reply.id = document["id"].get<long long>();
    return reply;
  } catch (const json::exception& error) {
    throw Error(fmt::format("kareusd reply: unexpected shape ({}): {}", error.what(), line));
  }
}

std::string format_daemon_reply(const DaemonReply& reply) {
  json document = {{"ok", reply.ok}};
  if (!reply.ok) document["error"] = reply.error;
  if (reply.freq_mhz) document["freq_mhz"] = *reply.freq_mhz;
  if (!reply.clocks_mhz.empty()) document["clocks_mhz"] = reply.clocks_mhz;
  if (reply.energy_mj) document["energy_mj"] = *reply.energy_mj;
  if (reply.id) document["id"] = *reply.id;
  return document.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace kareus::runtime
