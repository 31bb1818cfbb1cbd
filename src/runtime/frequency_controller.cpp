#include "kareus/runtime/frequency_controller.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <exception>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "kareus/common/error.h"

namespace kareus::runtime {

FrequencyController::FrequencyController(std::unique_ptr<ClockBackend> backend, std::size_t timeline_capacity,
                                         ClockFailurePolicy policy)
    : backend_(std::move(backend)),
      start_(std::chrono::steady_clock::now()),
      timeline_capacity_(timeline_capacity),
      policy_(std::move(policy)) {
  if (!backend_) throw InputError("frequency controller: no clock backend given");
  if (timeline_capacity_ == 0) throw InputError("frequency controller: timeline capacity must be >= 1");
  owner_pid_ = ::getpid();
  description_ = backend_->describe();
  worker_ = std::thread([this] { run(); });
}

FrequencyController::~FrequencyController() {
  if (::getpid() != owner_pid_) {
    // Destroyed in a forked child (e.g. a data-loader worker): the worker thread and the clocks
    // belong to the parent. Leave both alone.
    worker_.detach();
    (void)changed_.release();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    queue_.clear();
  }
  changed_->notify_all();
  worker_.join();
  if (ever_locked_) {
    try {
      std::lock_guard backend_lock(backend_mutex_);
      backend_->reset();
    } catch (...) {
      // Nothing sensible is left to do in a destructor; the daemon (if used) resets on disconnect.
    }
  }
}

void FrequencyController::throw_pending_error() {
  if (!error_.empty()) {
    std::string message = std::move(error_);
    error_.clear();
    throw Error(fmt::format("frequency controller ({}): {}", description_, message));
  }
}

void FrequencyController::request_clock(int freq_mhz) {
  if (freq_mhz <= 0) throw InputError(fmt::format("frequency controller: clock must be > 0 MHz, found {}", freq_mhz));
  {
    std::lock_guard lock(mutex_);
    throw_pending_error();
    if (last_requested_mhz_ == freq_mhz) return;
    last_requested_mhz_ = freq_mhz;
    queue_.push_back(freq_mhz);
  }
  changed_->notify_all();
}

void FrequencyController::request_reset() {
  {
    std::lock_guard lock(mutex_);
    throw_pending_error();
    if (!last_requested_mhz_) return;
    last_requested_mhz_.reset();
    queue_.push_back(0);
  }
  changed_->notify_all();
}

void FrequencyController::flush() {
  std::unique_lock lock(mutex_);
  changed_->wait(lock, [this] { return queue_.empty() && !busy_; });
  throw_pending_error();
}

void FrequencyController::reset_now() noexcept {
  {
    std::lock_guard lock(mutex_);
    queue_.clear();
    last_requested_mhz_.reset();
    ++reset_generation_;
  }
  try {
    std::lock_guard backend_lock(backend_mutex_);
    backend_->reset();
    const ClockSample sample{std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), 0,
                             backend_->read_clock_mhz()};
    std::lock_guard lock(mutex_);
    record(sample);
  } catch (...) {
    // Called on the way out of the process; the caller re-raises the signal regardless.
  }
}

std::vector<ClockSample> FrequencyController::timeline() const {
  std::lock_guard lock(mutex_);
  return {timeline_.begin(), timeline_.end()};
}

std::size_t FrequencyController::failed_changes() const {
  std::lock_guard lock(mutex_);
  return failed_changes_;
}

std::size_t FrequencyController::skipped_changes() const {
  std::lock_guard lock(mutex_);
  return skipped_changes_;
}

std::size_t FrequencyController::timeline_dropped() const {
  std::lock_guard lock(mutex_);
  return timeline_dropped_;
}

void FrequencyController::record(const ClockSample& sample) {
  if (timeline_.size() == timeline_capacity_) {
    timeline_.pop_front();
    ++timeline_dropped_;
  }
  timeline_.push_back(sample);
}

void FrequencyController::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_->wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const int requested_mhz = queue_.front();
    queue_.pop_front();
    busy_ = true;
    const unsigned generation = reset_generation_;
    lock.unlock();
    ClockSample sample{0, requested_mhz, 0};
    std::string failure;
    bool skipped = false;
    bool stale = false;
    try {
      std::lock_guard backend_lock(backend_mutex_);
      std::unique_lock check(mutex_);
      stale = generation != reset_generation_;  // reset_now ran since the pop: drop the request
      check.unlock();
      if (!stale) {
        if (requested_mhz > 0) {
          backend_->set_locked_clock(requested_mhz);
          ever_locked_ = true;
        } else {
          backend_->reset();
        }
        sample.effective_mhz = backend_->read_clock_mhz();
      }
    } catch (const ClockChangeSkipped& error) {
      failure = error.what();
      skipped = true;
    } catch (const std::exception& error) {
      failure = error.what();
    } catch (...) {
      failure = "unknown failure in the clock backend";
    }
    sample.time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    lock.lock();
    if (!failure.empty()) {
      // Forget the request so a retry of the same clock is not dropped; the GPU keeps the clock
      // it had. Only strict mode turns this into an error (the first one is kept).
      last_requested_mhz_.reset();
      ++(skipped ? skipped_changes_ : failed_changes_);
      if (policy_.strict && !skipped && error_.empty()) error_ = failure;
      if (policy_.on_failure) {
        const std::string message =
            requested_mhz > 0 ? fmt::format("{} the clock change to {} MHz ({}); the previous clock stays",
                                            skipped ? "skipped" : "failed", requested_mhz, failure)
                              : fmt::format("{} the clock reset ({})", skipped ? "skipped" : "failed", failure);
        lock.unlock();
        try {
          policy_.on_failure(fmt::format("frequency controller ({}): {}", description_, message));
        } catch (...) {
          // A reporting callback that throws must not end the worker thread.
        }
        lock.lock();
      }
    } else if (!stale) {
      record(sample);
    }
    busy_ = false;  // after the report, so flush() returns once the failure is reported
    changed_->notify_all();
  }
}

// --- SignalResetGuard -------------------------------------------------------------------------

namespace {
// The process-wide values a signal or terminate handler can reach (nothing else can be passed to
// them): the write end of the installed guard's self-pipe (-1 when none; writing one byte is
// async-signal-safe) and the guard itself, for std::terminate.
std::atomic<int> signal_pipe_write_fd{-1};
std::atomic<SignalResetGuard*> installed_guard{nullptr};
std::atomic<pid_t> guard_owner_pid{0};
struct sigaction previous_actions[NSIG];  // what each guarded signal did before the guard
std::terminate_handler previous_terminate = nullptr;

[[noreturn]] void reset_then_terminate() {
  SignalResetGuard* guard = installed_guard.exchange(nullptr);
  if (guard != nullptr && ::getpid() == guard_owner_pid.load()) guard->run_on_signal();
  if (previous_terminate != nullptr) previous_terminate();
  std::abort();
}

extern "C" void kareus_signal_to_pipe(int signal_number) {
  const int saved_errno = errno;
  if (::getpid() != guard_owner_pid.load()) {
    // A forked child (a data-loader worker): it owns no clocks and the watcher thread is not
    // here, so it behaves as it would without the guard. The signal is blocked while this
    // handler runs and is delivered again, to the previous disposition, when it returns.
    if (signal_number > 0 && signal_number < NSIG) {
      ::sigaction(signal_number, &previous_actions[signal_number], nullptr);
      ::raise(signal_number);
    }
    errno = saved_errno;
    return;
  }
  const int fd = signal_pipe_write_fd.load();
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(signal_number);
    [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}
}  // namespace

std::vector<int> SignalResetGuard::default_signals() { return {SIGINT, SIGTERM}; }

SignalResetGuard::SignalResetGuard(std::function<void()> on_signal, std::vector<int> signals)
    : on_signal_(std::move(on_signal)), signals_(std::move(signals)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("signal guard: cannot create a pipe (errno {})", errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  int expected = -1;
  if (!signal_pipe_write_fd.compare_exchange_strong(expected, write_fd_)) {
    ::close(read_fd_);
    ::close(write_fd_);
    throw Error(
        "signal handlers are already installed by another kareus runtime in this process; create the "
        "others without them (install_signal_handlers = false)");
  }
  guard_owner_pid.store(::getpid());
  for (int signal_number : signals_) install(signal_number);
  // An exception nobody catches ends in std::terminate without unwinding: reset there too.
  installed_guard.store(this);
  previous_terminate = std::set_terminate(reset_then_terminate);
  owner_pid_ = ::getpid();
  watcher_ = std::thread([this] { watch(); });
}

void SignalResetGuard::run_on_signal() {
  std::lock_guard lock(on_signal_mutex_);
  on_signal_();
}

void SignalResetGuard::install(int signal_number) {
  // A signal the process ignores (nohup, a launcher's SIG_IGN) stays ignored: catching it would
  // reset the clocks of a job that goes on running.
  struct sigaction current {};
  if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) return;
  struct sigaction action {};
  action.sa_handler = kareus_signal_to_pipe;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  auto previous = std::make_unique<struct sigaction>();
  ::sigaction(signal_number, &action, previous.get());
  // Keep the first disposition seen: reinstalling after a re-raise must not save our own handler.
  for (const auto& [number, saved] : previous_) {
    if (number == signal_number) return;
  }
  if (signal_number > 0 && signal_number < NSIG) previous_actions[signal_number] = *previous;
  previous_.emplace_back(signal_number, std::move(previous));
}

void SignalResetGuard::watch() {
  sigset_t unblock;
  sigemptyset(&unblock);
  for (int signal_number : signals_) sigaddset(&unblock, signal_number);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  while (true) {
    unsigned char byte = 0;
    const ssize_t got = ::read(read_fd_, &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || byte == 0) return;  // 0 is the destructor's stop byte
    const int signal_number = byte;
    run_on_signal();
    for (const auto& [number, saved] : previous_) {
      if (number != signal_number) continue;
      ::sigaction(signal_number, saved.get(), nullptr);
      // raise() on this thread runs the previous handler before it returns (or ends the process).
      ::raise(signal_number);
      install(signal_number);
    }
  }
}

SignalResetGuard::~SignalResetGuard() {
  for (const auto& [number, saved] : previous_) {
    // Put the previous handler back only if nobody replaced ours in the meantime.
    struct sigaction current {};
    ::sigaction(number, nullptr, &current);
    if (current.sa_handler == kareus_signal_to_pipe) ::sigaction(number, saved.get(), nullptr);
  }
  std::set_terminate(previous_terminate);
  installed_guard.store(nullptr);
  signal_pipe_write_fd.store(-1);
  if (::getpid() != owner_pid_) {
    watcher_.detach();  // destroyed in a forked child: the watcher thread exists only in the parent
  } else {
    const unsigned char stop = 0;
    [[maybe_unused]] const ssize_t written = ::write(write_fd_, &stop, 1);
    watcher_.join();
  }
  ::close(read_fd_);
  ::close(write_fd_);
}

}  // namespace kareus::runtime
