#include "kareus/common/nonblocking_io.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus {

double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool poll_until(std::vector<pollfd>& fds, double wake_s) {
  const int wait_ms =
      std::isinf(wake_s) ? -1 : static_cast<int>(std::clamp(std::ceil((wake_s - monotonic_s()) * 1000), 0.0, 60000.0));
  if (::poll(fds.data(), fds.size(), wait_ms) >= 0) return true;
  if (errno == EINTR) return false;
  throw Error(fmt::format("poll: {}", std::strerror(errno)));
}

std::optional<std::size_t> send_pending(int fd, std::string& outbox) {
  std::size_t sent = 0;
  while (sent < outbox.size()) {
    const ssize_t count = ::send(fd, outbox.data() + sent, outbox.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (count <= 0) return std::nullopt;
    sent += static_cast<std::size_t>(count);
  }
  outbox.erase(0, sent);
  return sent;
}

}  // namespace kareus
