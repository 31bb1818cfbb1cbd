#include "kareus/common/poll_loop.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/common/nonblocking_io.h"

namespace kareus {

PollLoop::PollLoop() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
  wake_read_fd_ = fds[0];
  wake_write_fd_ = fds[1];
}

PollLoop::~PollLoop() {
  ::close(wake_read_fd_);
  ::close(wake_write_fd_);
}

void PollLoop::wake(char code) const noexcept {
  [[maybe_unused]] const ssize_t written = ::write(wake_write_fd_, &code, 1);
}

std::optional<PollLoop::Ready> PollLoop::wait(int listen_fd, const std::vector<pollfd>& connections, double wake_s) {
  const bool paused = listen_fd >= 0 && monotonic_s() < accept_paused_until_s_;
  if (paused) wake_s = std::min(wake_s, accept_paused_until_s_);
  std::vector<pollfd> fds;
  fds.reserve(connections.size() + 2);
  fds.push_back({wake_read_fd_, POLLIN, 0});
  fds.push_back({paused ? -1 : listen_fd, POLLIN, 0});
  fds.insert(fds.end(), connections.begin(), connections.end());
  if (!poll_until(fds, wake_s)) return std::nullopt;
  Ready ready;
  if (fds[0].revents != 0) {
    char codes[64];
    for (ssize_t count = 0; (count = ::read(wake_read_fd_, codes, sizeof codes)) > 0;) {
      ready.wake_codes.append(codes, static_cast<std::size_t>(count));
    }
  }
  ready.listener = (fds[1].revents & POLLIN) != 0;
  ready.revents.reserve(connections.size());
  for (std::size_t index = 2; index < fds.size(); ++index) ready.revents.push_back(fds[index].revents);
  return ready;
}

int PollLoop::accept(int listen_fd, double now_s, int* error) {
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == EINTR || errno == ECONNABORTED) continue;
    const int code = errno == EAGAIN || errno == EWOULDBLOCK ? 0 : errno;
    if (code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM) {
      accept_paused_until_s_ = now_s + kAcceptPauseS;
    }
    if (error != nullptr) *error = code;
    return -1;
  }
}

}  // namespace kareus
