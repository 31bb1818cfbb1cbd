#include "kareus/common/signal_wait.h"

#include <pthread.h>
#include <unistd.h>

#include <thread>

namespace kareus {

SignalWait::SignalWait(std::initializer_list<int> extra) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  for (const int signal_number : extra) sigaddset(&signals_, signal_number);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

void SignalWait::run(const std::function<void()>& run, const std::function<void(int)>& on_signal) const {
  run_until(run, [&](int signal_number) {
    on_signal(signal_number);
    return false;
  });
}

void SignalWait::run_until(const std::function<void()>& run, const std::function<bool(int)>& on_signal) const {
  std::thread waiter([&] {
    int signal_number = 0;
    bool again = true;
    while (again) {
      sigwait(&signals_, &signal_number);
      // An exception leaving this thread would end the process (std::terminate, a core): one
      // from a handler (out of memory while logging) leaves the server running and waiting.
      try {
        again = on_signal(signal_number);
      } catch (...) {
        again = true;
      }
    }
  });
  try {
    run();
  } catch (...) {
    ::kill(::getpid(), SIGTERM);  // wakes the waiter
    waiter.join();
    throw;
  }
  waiter.join();
}

}  // namespace kareus
