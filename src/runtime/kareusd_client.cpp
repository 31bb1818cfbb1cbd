#include "kareus/runtime/kareusd_client.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kareus/common/error.h"
#include "kareus/common/nonblocking_io.h"

namespace kareus::runtime {
KareusdConnection::KareusdConnection(std::string socket_path, KareusdTimeouts timeouts)
    : socket_path_(std::move(socket_path)), timeouts_(timeouts) {
  if (!(timeouts_.connect_s > 0) || !(timeouts_.reply_s > 0)) {
    throw InputError(fmt::format("kareusd timeouts must be positive seconds, found connect {} and reply {}",
                                 timeouts_.connect_s, timeouts_.reply_s));
  }
  if (socket_path_.empty() || socket_path_.size() >= sizeof(sockaddr_un::sun_path)) {
    throw InputError(fmt::format("kareusd socket path \"{}\" must be 1..{} characters", socket_path_,
                                 sizeof(sockaddr_un::sun_path) - 1));
  }
  connect_socket();
}

void KareusdConnection::connect_socket() {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
  // Non-blocking throughout, so that every wait has a deadline. A Unix socket whose daemon does
  // not accept (backlog full) answers EAGAIN at once; retry until the connect deadline.
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw Error(fmt::format("cannot create a socket: {}", std::strerror(errno)));
  const double deadline_s = monotonic_s() + timeouts_.connect_s;
  int result = ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  while (result != 0 && (errno == EAGAIN || errno == EINTR) && monotonic_s() < deadline_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    result = ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  }
  if (result != 0 && errno == EAGAIN) {
    ::close(fd_);
    fd_ = -1;
    throw Error(
        fmt::format("cannot connect to kareusd at {}: not accepted within {} s (the daemon is stalled or "
                    "has too many waiting clients)",
                    socket_path_, timeouts_.connect_s));
  }
  if (result != 0) {
    const int code = errno;
    ::close(fd_);
    fd_ = -1;
    std::string hint = code == EACCES ? "; the user must be in the socket's group (see kareusd's config)"
                       : (code == ENOENT || code == ECONNREFUSED) ? "; is kareusd running?"
                                                                  : "";
    throw Error(fmt::format("cannot connect to kareusd at {}: {}{}", socket_path_, std::strerror(code), hint));
  }
}

void KareusdConnection::reconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buffer_.clear();
  // A restarted kareusd (systemd's RestartSec=2 in kareusd.service) takes a few seconds to come
  // back: six tries with doubling waits between, 0.1 s to 1.6 s (3.1 s in all), then an Error for
  // this request (the next one tries again).
  const double start_s = monotonic_s();
  double wait_s = 0.1;
  for (int attempt = 1;; ++attempt) {
    try {
      connect_socket();
      return;
    } catch (const Error& error) {
      if (attempt == kReconnectAttempts) {
        throw Error(
            fmt::format("kareusd at {} went away and {} reconnect attempts over {:.1f} s failed (last: {}); the GPU "
                        "clocks this job set are reset when kareusd starts again",
                        socket_path_, kReconnectAttempts, monotonic_s() - start_s, error.what()));
      }
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    wait_s *= 2;
  }
}

KareusdConnection::~KareusdConnection() {
  if (fd_ >= 0) ::close(fd_);
}

void KareusdConnection::wait_ready(short events, double deadline_s, const char* what) const {
  std::vector<pollfd> entry{{fd_, events, 0}};
  while (monotonic_s() < deadline_s) {
    if (poll_until(entry, deadline_s) && entry[0].revents != 0) return;
  }
  throw Error(fmt::format("kareusd at {}: no {} within {} s (the daemon is stalled or overloaded)", socket_path_, what,
                          timeouts_.reply_s));
}

bool KareusdConnection::closed_by_daemon() const {
  pollfd entry{fd_, POLLIN, 0};
  if (::poll(&entry, 1, 0) <= 0) return false;
  char byte = 0;
  return ::recv(fd_, &byte, 1, MSG_PEEK) == 0;
}

std::string KareusdConnection::exchange(std::string line) {
  if (line.empty() || line.back() != '\n') line += '\n';
  // The daemon closes a connection that holds no GPU after idle_timeout_s without a request (and
  // a restarted daemon has none of our connections): such a connection held no lease, so open a
  // new one rather than fail.
  // A failed reconnect leaves fd_ at -1, never read as open: the next exchange tries again.
  if (fd_ < 0 || (buffer_.empty() && closed_by_daemon())) reconnect();
  const double deadline_s = monotonic_s() + timeouts_.reply_s;
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t count = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_ready(POLLOUT, deadline_s, "room to send the request");
      continue;
    }
    if (count <= 0) {
      // The daemon may have answered and closed (a refused peer): its reply explains more than EPIPE.
      const int code = errno;
      if (std::string reply = read_line(deadline_s); !reply.empty()) return reply;
      throw Error(fmt::format("kareusd at {}: send failed: {}", socket_path_, std::strerror(code)));
    }
    sent += static_cast<std::size_t>(count);
  }
  std::string reply = read_line(deadline_s);
  if (reply.empty()) throw Error(fmt::format("kareusd at {} closed the connection", socket_path_));
  return reply;
}

std::string KareusdConnection::read_line(double deadline_s) {
  while (true) {
    if (const auto newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string reply = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return reply;
    }
    char chunk[4096];
    const ssize_t count = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_ready(POLLIN, deadline_s, "reply");
      continue;
    }
    if (count < 0 && errno != ECONNRESET) {
      throw Error(fmt::format("kareusd at {}: receive failed: {}", socket_path_, std::strerror(errno)));
    }
    if (count <= 0) return {};
    buffer_.append(chunk, static_cast<std::size_t>(count));
  }
}

KareusdClockBackend::KareusdClockBackend(std::string socket_path, int gpu_index, KareusdTimeouts timeouts)
    : socket_path_(std::move(socket_path)), gpu_index_(gpu_index), connection_(socket_path_, timeouts) {
  (void)call(DaemonOp::kGet);
}

DaemonReply KareusdClockBackend::call(DaemonOp op, int freq_mhz) {
  DaemonRequest request{op, gpu_index_, freq_mhz, next_id_++};
  DaemonReply reply = parse_daemon_reply(connection_.exchange(format_daemon_request(request)));
  if (!reply.ok) {
    const std::string message =
        fmt::format("kareusd at {}: {} gpu {}: {}", socket_path_, to_string(op), gpu_index_, reply.error);
    // The daemon's rate limit refused this one request and keeps the connection: skip the change.
    if (reply.error.starts_with("rate limit")) throw ClockChangeSkipped(message);
    throw Error(message);
  }
  return reply;
}

void KareusdClockBackend::set_locked_clock(int freq_mhz) {
  // A daemon that confirms the clock in its set reply spares the get that would follow.
  confirmed_mhz_ = call(DaemonOp::kSet, freq_mhz).freq_mhz;
}

void KareusdClockBackend::reset() {
  confirmed_mhz_.reset();
  (void)call(DaemonOp::kReset);
}

int KareusdClockBackend::read_clock_mhz() {
  if (const std::optional<int> confirmed = std::exchange(confirmed_mhz_, std::nullopt)) return *confirmed;
  const DaemonReply reply = call(DaemonOp::kGet);
  if (!reply.freq_mhz) throw Error(fmt::format("kareusd at {}: get reply has no freq_mhz", socket_path_));
  return *reply.freq_mhz;
}

std::vector<int> KareusdClockBackend::supported_clocks_mhz() { return call(DaemonOp::kSupported).clocks_mhz; }

std::optional<std::uint64_t> KareusdClockBackend::read_energy_mj() { return call(DaemonOp::kEnergy).energy_mj; }

std::string KareusdClockBackend::describe() const { return fmt::format("kareusd {} gpu {}", socket_path_, gpu_index_); }

}  // namespace kareus::runtime
