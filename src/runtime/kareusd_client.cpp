#include "kareus/runtime/kareusd_client.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kareus/common/error.h"

namespace kareus::runtime {

KareusdConnection::KareusdConnection(std::string socket_path) : socket_path_(std::move(socket_path)) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path_.empty() || socket_path_.size() >= sizeof(address.sun_path)) {
    throw InputError(
        fmt::format("kareusd socket path \"{}\" must be 1..{} characters", socket_path_, sizeof(address.sun_path) - 1));
  }
  std::memcpy(address.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw Error(fmt::format("cannot create a socket: {}", std::strerror(errno)));
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int code = errno;
    ::close(fd_);
    std::string hint = code == EACCES ? "; the user must be in the socket's group (see kareusd's config)"
                       : (code == ENOENT || code == ECONNREFUSED) ? "; is kareusd running?"
                                                                  : "";
    throw Error(fmt::format("cannot connect to kareusd at {}: {}{}", socket_path_, std::strerror(code), hint));
  }
}

KareusdConnection::~KareusdConnection() { ::close(fd_); }

std::string KareusdConnection::exchange(std::string line) {
  if (line.empty() || line.back() != '\n') line += '\n';
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t count = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      // The daemon may have answered and closed (a refused peer): its reply explains more than EPIPE.
      const int code = errno;
      if (std::string reply = read_line(); !reply.empty()) return reply;
      throw Error(fmt::format("kareusd at {}: send failed: {}", socket_path_, std::strerror(code)));
    }
    sent += static_cast<std::size_t>(count);
  }
  std::string reply = read_line();
  if (reply.empty()) throw Error(fmt::format("kareusd at {} closed the connection", socket_path_));
  return reply;
}

std::string KareusdConnection::read_line() {
  while (true) {
    if (const auto newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string reply = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return reply;
    }
    char chunk[4096];
    const ssize_t count = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0 && errno != ECONNRESET) {
      throw Error(fmt::format("kareusd at {}: receive failed: {}", socket_path_, std::strerror(errno)));
    }
    if (count <= 0) return {};
    buffer_.append(chunk, static_cast<std::size_t>(count));
  }
}

KareusdClockBackend::KareusdClockBackend(std::string socket_path, int gpu_index)
    : socket_path_(std::move(socket_path)), gpu_index_(gpu_index), connection_(socket_path_) {
  (void)call(DaemonOp::kGet);
}

DaemonReply KareusdClockBackend::call(DaemonOp op, int freq_mhz) {
  DaemonRequest request{op, gpu_index_, freq_mhz, next_id_++};
  DaemonReply reply = parse_daemon_reply(connection_.exchange(format_daemon_request(request)));
  if (!reply.ok)
    throw Error(fmt::format("kareusd at {}: {} gpu {}: {}", socket_path_, to_string(op), gpu_index_, reply.error));
  return reply;
}

void KareusdClockBackend::set_locked_clock(int freq_mhz) { (void)call(DaemonOp::kSet, freq_mhz); }
void KareusdClockBackend::reset() { (void)call(DaemonOp::kReset); }

int KareusdClockBackend::read_clock_mhz() {
  const DaemonReply reply = call(DaemonOp::kGet);
  if (!reply.freq_mhz) throw Error(fmt::format("kareusd at {}: get reply has no freq_mhz", socket_path_));
  return *reply.freq_mhz;
}

std::vector<int> KareusdClockBackend::supported_clocks_mhz() { return call(DaemonOp::kSupported).clocks_mhz; }

std::optional<std::uint64_t> KareusdClockBackend::read_energy_mj() { return call(DaemonOp::kEnergy).energy_mj; }

std::string KareusdClockBackend::describe() const { return fmt::format("kareusd {} gpu {}", socket_path_, gpu_index_); }

}  // namespace kareus::runtime
