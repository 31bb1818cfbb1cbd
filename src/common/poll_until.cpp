#include "kareus/common/poll_until.h"

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

}  // namespace kareus
