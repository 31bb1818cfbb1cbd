// kareus/common/poll_loop.h - the wait of the single-threaded servers (`kareus serve`, kareusd).
//
// One thread serves every connection: it waits in poll(2) on a wake pipe (another thread, or a
// signal's waiter, writes a byte to ask for a stop or a reload), the listening socket and each
// connection, until the earliest deadline. Accepting pauses for a moment when the process is out
// of file descriptors or memory: the pending connection stays in the backlog, and poll would
// report it again at once, a spin. Times in s on the monotonic clock (nonblocking_io.h).
#pragma once

#include <poll.h>

#include <optional>
#include <string>
#include <vector>

namespace kareus {

class PollLoop {
 public:
  /// How long accepting pauses when accept4 runs out of descriptors or memory.
  static constexpr double kAcceptPauseS = 0.1;

  /// Makes the wake pipe. Throws Error when it cannot.
  PollLoop();
  ~PollLoop();
  PollLoop(const PollLoop&) = delete;
  PollLoop& operator=(const PollLoop&) = delete;

  /// Writes `code` to the wake pipe: safe from any thread and from a signal handler.
  void wake(char code) const noexcept;

  struct Ready {
    std::string wake_codes;      ///< the codes written since the last wait, drained; empty: none
    bool listener = false;       ///< the listening socket has a connection to accept
    std::vector<short> revents;  ///< per connection, in the order given
  };
  /// Waits until the wake pipe, `listen_fd` (when >= 0 and accepting is not paused) or one of
  /// `connections` (fd and events; a negative fd is skipped) is ready, or until `wake_s`
  /// (infinity: no deadline) or the end of an accept pause. nullopt: interrupted by a signal.
  /// Throws Error when poll fails.
  [[nodiscard]] std::optional<Ready> wait(int listen_fd, const std::vector<pollfd>& connections, double wake_s);

  /// Accepts one pending connection (non-blocking, close-on-exec) and returns its fd, or -1 when
  /// none is pending or accepting failed; `error` (when given) gets errno then, 0 for none
  /// pending. Out of descriptors or memory also pauses accepting for kAcceptPauseS.
  int accept(int listen_fd, double now_s, int* error = nullptr);

 private:
  int wake_read_fd_ = -1;
  int wake_write_fd_ = -1;
  double accept_paused_until_s_ = 0;
};

}  // namespace kareus
