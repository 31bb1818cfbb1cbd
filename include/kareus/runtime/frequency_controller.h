// kareus/runtime/frequency_controller.h - applies planned GPU clocks off the training thread.
//
// The training loop asks for a clock (MHz) at each instruction; setting a clock through NVML
// takes milliseconds, so requests go through a queue to a background thread, which locks the
// clock only when it changes, reads back the clock the GPU runs, and records a timeline
// (time_s since construction, requested_mhz, effective_mhz). Clocks are reset to the driver's
// default on destruction (normal exit and exception unwinding); SignalResetGuard covers SIGINT
// and SIGTERM. A clock change the backend refuses or fails never stops training by default: it
// is reported through ClockFailurePolicy::on_failure, counted, and the previous clock stays;
// in strict mode it comes back as Error from the next call instead. A change the backend skips
// (ClockChangeSkipped: kareusd's rate limit) is counted and reported, never an error.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kareus/runtime/clock_backend.h"

namespace kareus::runtime {

/// One applied clock change. requested_mhz is 0 for a reset.
struct ClockSample {
  double time_s = 0;
  int requested_mhz = 0;
  int effective_mhz = 0;

  friend bool operator==(const ClockSample&, const ClockSample&) = default;
};

/// What a refused or failed clock change does.
struct ClockFailurePolicy {
  /// false (default): report it through on_failure, keep the previous clock, go on. true: the
  /// failure comes back as Error from the next request or flush (training stops there).
  bool strict = false;
  /// Called on the worker thread with a one-line message for each failed or skipped change.
  std::function<void(const std::string& message)> on_failure;
};

class FrequencyController {
 public:
  /// The timeline keeps the most recent changes only (16 bytes each), so a long job's memory is bounded.
  static constexpr std::size_t kDefaultTimelineCapacity = std::size_t{1} << 20;

  /// Starts the worker thread. `backend` must not be null and `timeline_capacity` >= 1 (throws
  /// InputError otherwise).
  explicit FrequencyController(std::unique_ptr<ClockBackend> backend,
                               std::size_t timeline_capacity = kDefaultTimelineCapacity,
                               ClockFailurePolicy policy = {});
  /// Drops pending requests, resets the clock if it was ever changed, joins. Never throws.
  ~FrequencyController();
  FrequencyController(const FrequencyController&) = delete;
  FrequencyController& operator=(const FrequencyController&) = delete;

  /// Queues a clock lock; a repeat of the last request is dropped. Does not wait. Throws
  /// InputError for freq_mhz <= 0 and, in strict mode, Error if an earlier request failed.
  void request_clock(int freq_mhz);
  /// Queues a reset to the driver's default clocks (dropped if nothing is locked).
  void request_reset();
  /// Waits until every queued request is applied (or failed). Throws Error if one failed in
  /// strict mode.
  void flush();
  /// Resets the clock now, from any thread, dropping queued requests (the signal path), and records
  /// it in the timeline (requested_mhz 0). Never throws.
  void reset_now() noexcept;

  /// The applied changes, oldest first (at most the last timeline_capacity of them).
  [[nodiscard]] std::vector<ClockSample> timeline() const;
  /// Clock changes the backend refused or failed (the previous clock stayed).
  [[nodiscard]] std::size_t failed_changes() const;
  /// Clock changes the backend skipped (ClockChangeSkipped, e.g. a daemon's rate limit).
  [[nodiscard]] std::size_t skipped_changes() const;
  /// Changes dropped from the front of the timeline because it was full.
  [[nodiscard]] std::size_t timeline_dropped() const;
  /// The backend's description ("recorder", "nvml gpu 0", ...).
  [[nodiscard]] std::string backend_description() const { return description_; }

 private:
  void run();
  void throw_pending_error();
  void record(const ClockSample& sample);  ///< mutex_ held

  std::unique_ptr<ClockBackend> backend_;
  std::string description_;
  std::chrono::steady_clock::time_point start_;

  mutable std::mutex mutex_;  ///< guards everything below
  /// Heap-held so a forked child can leak it: destroying a condition variable copied with the
  /// parent's waiters blocks forever.
  std::unique_ptr<std::condition_variable> changed_ = std::make_unique<std::condition_variable>();
  std::deque<int> queue_;                  ///< clocks to lock (MHz); 0 = reset
  std::optional<int> last_requested_mhz_;  ///< nullopt = unlocked
  std::deque<ClockSample> timeline_;
  std::size_t timeline_capacity_;
  std::size_t timeline_dropped_ = 0;
  std::string error_;  ///< strict mode: the first failure, until it is thrown
  ClockFailurePolicy policy_;
  std::size_t failed_changes_ = 0;
  std::size_t skipped_changes_ = 0;
  bool stop_ = false;
  bool busy_ = false;              ///< the worker is applying a request
  bool ever_locked_ = false;       ///< written by the worker under backend_mutex_
  unsigned reset_generation_ = 0;  ///< bumped by reset_now

  std::mutex backend_mutex_;  ///< serializes backend calls (worker vs reset_now)
  pid_t owner_pid_ = 0;       ///< a forked child neither resets the parent's clocks nor joins its thread
  std::thread worker_;
};

/// While alive, SIGINT and SIGTERM (or `signals`) first call `on_signal` (e.g. reset the clocks)
/// and then get the disposition they had before, re-raised, so the process still stops (or
/// Python still raises KeyboardInterrupt). The handler only writes to a self-pipe; `on_signal`
/// runs on a watcher thread. std::terminate (an uncaught exception) also calls `on_signal`
/// before the previous terminate handler. In a forked child (a data-loader worker) the guard
/// steps aside: signals get their previous disposition and nothing is reset. A signal the process
/// ignores (SIG_IGN, e.g. SIGINT under nohup) stays ignored and resets nothing. One guard per process at a time (a
/// second throws Error); it restores what it replaced when destroyed.
class SignalResetGuard {
 public:
  explicit SignalResetGuard(std::function<void()> on_signal, std::vector<int> signals = default_signals());
  ~SignalResetGuard();
  SignalResetGuard(const SignalResetGuard&) = delete;
  SignalResetGuard& operator=(const SignalResetGuard&) = delete;

  [[nodiscard]] static std::vector<int> default_signals();
  /// Calls `on_signal` (serialized; used by the watcher thread and the terminate handler).
  void run_on_signal();

 private:
  void watch();
  void install(int signal_number);

  std::function<void()> on_signal_;
  std::mutex on_signal_mutex_;
  std::vector<int> signals_;
  std::vector<std::pair<int, std::unique_ptr<struct ::sigaction>>> previous_;
  int read_fd_ = -1;
  int write_fd_ = -1;
  pid_t owner_pid_ = 0;
  std::thread watcher_;
};

}  // namespace kareus::runtime
