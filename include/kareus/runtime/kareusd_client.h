// kareus/runtime/kareusd_client.h - a ClockBackend that asks the kareusd daemon to set clocks.
//
// Locking GPU clocks needs root or CAP_SYS_ADMIN; a training job usually has neither. kareusd
// (tools/kareusd) holds the privilege and serves allowed users over a Unix socket with the
// JSON-lines protocol of daemon_protocol.h. The connection is the lease: when this backend is
// destroyed, or the process dies, the daemon resets the clocks it set for us. A daemon that
// stalls cannot hang training: connecting and every exchange have a deadline (seconds).
#pragma once

#include <optional>
#include <string>

#include "kareus/runtime/clock_backend.h"
#include "kareus/runtime/daemon_protocol.h"

namespace kareus::runtime {

/// How long a client waits for kareusd before giving up with an Error (seconds, > 0).
struct KareusdTimeouts {
  double connect_s = 5;  ///< to be accepted (a daemon whose backlog is full stalls connect)
  double reply_s = 5;    ///< from sending a request to its whole reply line
};

/// A connected Unix-socket line channel (one request line out, one reply line back).
class KareusdConnection {
 public:
  /// Connects to `socket_path`. Throws Error naming the path and the reason (daemon not running,
  /// permission denied: the user must be in the socket's group; no answer within the timeout).
  explicit KareusdConnection(std::string socket_path, KareusdTimeouts timeouts = {});
  ~KareusdConnection();
  KareusdConnection(const KareusdConnection&) = delete;
  KareusdConnection& operator=(const KareusdConnection&) = delete;

  /// Sends `line` (newline added if missing) and returns the reply line without its newline.
  /// A connection the daemon closed (idle, or a kareusd that restarted) is opened again first,
  /// with kReconnectAttempts tries over about 3 s, then an Error naming the socket. Throws Error when
  /// the daemon closes the connection, the socket fails, or the whole reply has not come within
  /// `timeouts.reply_s` (the message says the daemon may be stalled).
  [[nodiscard]] std::string exchange(std::string line);

 private:
  static constexpr int kReconnectAttempts = 6;
  void connect_socket();
  void reconnect();  ///< bounded retries; throws Error after the last and leaves fd_ at -1
  /// Whether the daemon has closed the connection (EOF waiting, nothing else).
  [[nodiscard]] bool closed_by_daemon() const;
  /// The next reply line, or "" when the daemon closed the connection first.
  std::string read_line(double deadline_s);
  /// Waits until `fd_` is ready for `events` or the deadline; throws the timeout Error.
  void wait_ready(short events, double deadline_s, const char* what) const;

  std::string socket_path_;
  KareusdTimeouts timeouts_;
  int fd_ = -1;
  std::string buffer_;
};

class KareusdClockBackend final : public ClockBackend {
 public:
  /// Connects and checks `gpu_index` with the daemon (throws Error with the daemon's message).
  KareusdClockBackend(std::string socket_path, int gpu_index, KareusdTimeouts timeouts = {});

  void set_locked_clock(int freq_mhz) override;
  void reset() override;
  [[nodiscard]] int read_clock_mhz() override;
  [[nodiscard]] std::vector<int> supported_clocks_mhz() override;
  [[nodiscard]] std::optional<std::uint64_t> read_energy_mj() override;
  [[nodiscard]] std::string describe() const override;

 private:
  DaemonReply call(DaemonOp op, int freq_mhz = 0);

  std::string socket_path_;
  int gpu_index_;
  KareusdConnection connection_;
  long long next_id_ = 1;
  std::optional<int> confirmed_mhz_;  ///< the clock the last set reply named, for the read after it
};

}  // namespace kareus::runtime
