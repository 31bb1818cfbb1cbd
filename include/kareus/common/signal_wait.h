// kareus/common/signal_wait.h - runs a server until SIGINT or SIGTERM (or another signal).
//
// `kareus serve` and kareusd stop on a signal without any signal handler: the signals are
// blocked in the thread that builds the server (so every thread it starts inherits the mask)
// and one waiter thread takes them with sigwait(2) and asks the server to stop.
#pragma once

#include <signal.h>

#include <functional>
#include <initializer_list>

namespace kareus {

class SignalWait {
 public:
  /// Blocks SIGTERM and `extra` (e.g. SIGINT) in the calling thread; construct it before the
  /// server starts any thread.
  explicit SignalWait(std::initializer_list<int> extra);

  /// Calls `run` (the server's loop) while a waiter thread waits for one of the signals and
  /// then calls `on_signal(signal_number)`, which should make `run` return. If `run` throws,
  /// the process sends itself SIGTERM to wake the waiter, and the exception propagates.
  void run(const std::function<void()>& run, const std::function<void(int)>& on_signal) const;
  /// Like run, but the waiter goes on taking signals while `on_signal` returns true (a signal
  /// such as SIGHUP that asks for something other than a stop).
  void run_until(const std::function<void()>& run, const std::function<bool(int)>& on_signal) const;

 private:
  sigset_t signals_;
};

}  // namespace kareus
