// kareus/common/nonblocking_io.h - the monotonic clock, the deadline-bounded poll(2) and the
// non-blocking send of the single-threaded servers (`kareus serve`, kareusd) and the kareusd
// client.
//
// Every wait in them has a deadline on one clock and no write blocks, so no peer can make them
// wait longer than a timeout. Times in s on the monotonic clock, sizes in bytes.
#pragma once

#include <poll.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kareus {

/// Seconds on the monotonic clock (an arbitrary origin; only differences mean anything).
[[nodiscard]] double monotonic_s();

/// poll(2) on `fds` until one is ready or the monotonic time `wake_s` (infinity: no deadline;
/// at most 60 s at a time). Returns false when a signal interrupted it (poll again), true
/// otherwise. Throws Error when poll fails.
bool poll_until(std::vector<pollfd>& fds, double wake_s);

/// Sends as much of `outbox` as socket `fd` takes now without blocking and erases it from the
/// front. Returns the bytes sent, or nullopt when the socket failed (the peer is gone).
std::optional<std::size_t> send_pending(int fd, std::string& outbox);

}  // namespace kareus
