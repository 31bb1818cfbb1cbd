// kareus/runtime/daemon_protocol.h - the kareusd wire format: one JSON object per line.
//
// Requests (client -> kareusd), "id" optional and echoed back:
//   {"op": "set", "gpu": 0, "freq_mhz": 1410}   lock GPU 0's SM clock (a supported clock)
//   {"op": "reset", "gpu": 0}                   back to the driver's default
//   {"op": "get", "gpu": 0}                     -> {"ok": true, "freq_mhz": 1410}
//   {"op": "supported", "gpu": 0}               -> {"ok": true, "clocks_mhz": [1980, ...]}
//   {"op": "energy", "gpu": 0}                  -> {"ok": true, "energy_mj": 123456}
// Replies: {"ok": true, ...} or {"ok": false, "error": "message"}. Clocks in MHz, energy in mJ.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::runtime {

enum class DaemonOp { kSet, kReset, kGet, kSupported, kEnergy };

struct DaemonRequest {
  DaemonOp op = DaemonOp::kGet;
  int gpu = 0;
  int freq_mhz = 0;  ///< kSet only
  std::optional<long long> id;

  friend bool operator==(const DaemonRequest&, const DaemonRequest&) = default;
};

struct DaemonReply {
  bool ok = true;
  std::string error;  ///< when !ok
  std::optional<int> freq_mhz;
  std::vector<int> clocks_mhz;
  std::optional<std::uint64_t> energy_mj;
  std::optional<long long> id;

  friend bool operator==(const DaemonReply&, const DaemonReply&) = default;
};

/// "set", "reset", "get", "supported", "energy".
std::string_view to_string(DaemonOp op);

/// Parses one request line (without its newline). Throws InputError saying what is wrong:
/// invalid JSON, not an object, unknown op or field, gpu or freq_mhz missing or not a
/// non-negative / positive integer. Never reads past `line`.
[[nodiscard]] DaemonRequest parse_daemon_request(std::string_view line);
/// One line, newline-terminated.
[[nodiscard]] std::string format_daemon_request(const DaemonRequest& request);

/// Parses one reply line. Throws Error when it is not a valid reply.
[[nodiscard]] DaemonReply parse_daemon_reply(std::string_view line);
/// One line, newline-terminated.
[[nodiscard]] std::string format_daemon_reply(const DaemonReply& reply);

}  // namespace kareus::runtime
