// kareus/runtime/kareusd_client.h - a ClockBackend that asks the kareusd daemon to set clocks.
//
// Locking GPU clocks needs root or CAP_SYS_ADMIN; a training job usually has neither. kareusd
// (tools/kareusd) holds the privilege and serves allowed users over a Unix socket with the
// JSON-lines protocol of daemon_protocol.h. The connection is the lease: when this backend is
// destroyed, or the process dies, the daemon resets the clocks it set for us.
#pragma once

#include <string>

#include "kareus/runtime/clock_backend.h"
#include "kareus/runtime/daemon_protocol.h"

namespace kareus::runtime {

/// A connected Unix-socket line channel (one request line out, one reply line back).
class KareusdConnection {
 public:
  /// Connects to `socket_path`. Throws Error naming the path and the reason (daemon not running,
  /// permission denied: the user must be in the socket's group).
  explicit KareusdConnection(std::string socket_path);
  ~KareusdConnection();
  KareusdConnection(const KareusdConnection&) = delete;
  KareusdConnection& operator=(const KareusdConnection&) = delete;

  /// Sends `line` (newline added if missing) and returns the reply line without its newline.
  /// Throws Error when the daemon closes the connection or the socket fails.
  [[nodiscard]] std::string exchange(std::string line);

 private:
  /// The next reply line, or "" when the daemon closed the connection first.
  std::string read_line();

  std::string socket_path_;
  int fd_ = -1;
  std::string buffer_;
};

class KareusdClockBackend final : public ClockBackend {
 public:
  /// Connects and checks `gpu_index` with the daemon (throws Error with the daemon's message).
  KareusdClockBackend(std::string socket_path, int gpu_index);

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
};

}  // namespace kareus::runtime
