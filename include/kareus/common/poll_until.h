// kareus/common/poll_until.h - the monotonic clock and the deadline-bounded poll(2) of the
// single-threaded servers (`kareus serve`, kareusd) and the kareusd client.
//
// Every wait in them has a deadline on one clock, so no peer can make them block for longer
// than a timeout. Times in s on the monotonic clock.
#pragma once

#include <poll.h>

#include <vector>

namespace kareus {

/// Seconds on the monotonic clock (an arbitrary origin; only differences mean anything).
[[nodiscard]] double monotonic_s();

/// poll(2) on `fds` until one is ready or the monotonic time `wake_s` (infinity: no deadline;
/// at most 60 s at a time). Returns false when a signal interrupted it (poll again), true
/// otherwise. Throws Error when poll fails.
bool poll_until(std::vector<pollfd>& fds, double wake_s);

}  // namespace kareus
