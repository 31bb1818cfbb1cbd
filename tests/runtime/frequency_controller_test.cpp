#include "kareus/runtime/frequency_controller.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kareus/common/error.h"
#include "test_plans.h"

namespace kareus::runtime {
namespace {

using Kind = RecordedClockCall::Kind;

// Hands the test a view of the recorder the controller owns.
struct Recorded {
  RecorderClockBackend* recorder = nullptr;
  std::unique_ptr<ClockBackend> make(std::vector<int> clocks = RecorderClockBackend::default_clocks_mhz()) {
    auto backend = std::make_unique<RecorderClockBackend>(std::move(clocks));
    recorder = backend.get();
    return backend;
  }
};

TEST(RecorderClockBackend, RoundsDownToASupportedClock) {
  RecorderClockBackend backend({1410, 1200, 1005});
  EXPECT_EQ(backend.read_clock_mhz(), 1410);  // unlocked: the highest
  backend.set_locked_clock(1300);
  EXPECT_EQ(backend.read_clock_mhz(), 1200);
  backend.set_locked_clock(900);
  EXPECT_EQ(backend.read_clock_mhz(), 1005);  // below all: the lowest
  backend.reset();
  EXPECT_EQ(backend.read_clock_mhz(), 1410);
  EXPECT_THROW(RecorderClockBackend(std::vector<int>{}), InputError);
}

TEST(FrequencyController, SetsOnlyOnChangeAndRecordsTheTimeline) {
  Recorded recorded;
  FrequencyController controller(recorded.make({1410, 1200, 1005}));
  for (int clock : {1410, 1410, 1200, 1200, 1200, 1300, 1410}) controller.request_clock(clock);
  controller.flush();
  const std::vector<RecordedClockCall> expected_calls = {
      {Kind::kSet, 1410}, {Kind::kSet, 1200}, {Kind::kSet, 1300}, {Kind::kSet, 1410}};
  EXPECT_EQ(recorded.recorder->calls(), expected_calls);
  const auto timeline = controller.timeline();
  ASSERT_EQ(timeline.size(), 4u);
  const int effective[] = {1410, 1200, 1200, 1410};  // 1300 runs at 1200 (rounded down)
  for (std::size_t index = 0; index < timeline.size(); ++index) {
    SCOPED_TRACE(index);
    EXPECT_EQ(timeline[index].requested_mhz, expected_calls[index].freq_mhz);
    EXPECT_EQ(timeline[index].effective_mhz, effective[index]);
    if (index > 0) {
      EXPECT_GE(timeline[index].time_s, timeline[index - 1].time_s);
    }
  }
}

TEST(FrequencyController, TimelineKeepsTheMostRecentChanges) {
  FrequencyController controller(std::make_unique<RecorderClockBackend>(), 3);
  for (int clock : {1005, 1200, 1410, 1500, 1605}) controller.request_clock(clock);
  controller.flush();
  const auto timeline = controller.timeline();
  ASSERT_EQ(timeline.size(), 3u);
  EXPECT_EQ(timeline.front().requested_mhz, 1410);
  EXPECT_EQ(timeline.back().requested_mhz, 1605);
  EXPECT_EQ(controller.timeline_dropped(), 2u);
  EXPECT_THROW(FrequencyController(std::make_unique<RecorderClockBackend>(), 0), InputError);
}

TEST(FrequencyController, ResetsOnDestructionOnlyIfItLocked) {
  auto recorder = std::make_shared<RecorderClockBackend>();
  using Forward = testing::ForwardingBackend;
  { FrequencyController idle(std::make_unique<Forward>(recorder)); }
  EXPECT_TRUE(recorder->calls().empty());
  {
    FrequencyController controller(std::make_unique<Forward>(recorder));
    controller.request_clock(1005);
    controller.flush();
    EXPECT_EQ(recorder->locked_clock_mhz(), 1005);
  }
  EXPECT_EQ(recorder->locked_clock_mhz(), std::nullopt);
  EXPECT_EQ(recorder->calls().back(), (RecordedClockCall{Kind::kReset, 0}));
}

TEST(FrequencyController, ResetRequestAndRelockAfterReset) {
  Recorded recorded;
  FrequencyController controller(recorded.make());
  controller.request_reset();  // nothing locked: dropped
  controller.request_clock(1500);
  controller.request_reset();
  controller.request_clock(1500);  // differs from "unlocked", so it is applied again
  controller.flush();
  const std::vector<RecordedClockCall> expected = {{Kind::kSet, 1500}, {Kind::kReset, 0}, {Kind::kSet, 1500}};
  EXPECT_EQ(recorded.recorder->calls(), expected);
  EXPECT_EQ(controller.timeline()[1], (ClockSample{controller.timeline()[1].time_s, 0, 1980}));
}

TEST(FrequencyController, StrictModeFailureComesBackFromTheNextCall) {
  struct Failing final : ClockBackend {
    void set_locked_clock(int freq_mhz) override {
      if (freq_mhz == 999) throw Error("cannot lock 999 MHz");
    }
    void reset() override {}
    int read_clock_mhz() override { return 1000; }
    std::vector<int> supported_clocks_mhz() override { return {1000}; }
    std::optional<std::uint64_t> read_energy_mj() override { return std::nullopt; }
    std::string describe() const override { return "failing"; }
  };
  FrequencyController controller(std::make_unique<Failing>(), FrequencyController::kDefaultTimelineCapacity,
                                 ClockFailurePolicy{true, {}});  // strict: the failure stops training
  controller.request_clock(999);
  try {
    controller.flush();
    FAIL() << "expected Error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "frequency controller (failing): cannot lock 999 MHz");
  }
  controller.request_clock(1000);  // the error was reported once; the controller goes on
  controller.flush();
  EXPECT_EQ(controller.timeline().size(), 1u);
  EXPECT_THROW(controller.request_clock(0), InputError);
}

// Locks like the recorder, but refuses `refused_mhz` with Error and `skipped_mhz` with
// ClockChangeSkipped (a daemon's rate limit).
struct Refusing final : ClockBackend {
  explicit Refusing(std::shared_ptr<RecorderClockBackend> to) : inner(std::move(to)) {}
  void set_locked_clock(int freq_mhz) override {
    if (freq_mhz == 999) throw Error("nvml: 999 MHz is not supported");
    if (freq_mhz == 777) throw ClockChangeSkipped("kareusd: rate limit: at most 500 requests per second per client");
    inner->set_locked_clock(freq_mhz);
  }
  void reset() override { inner->reset(); }
  int read_clock_mhz() override { return inner->read_clock_mhz(); }
  std::vector<int> supported_clocks_mhz() override { return inner->supported_clocks_mhz(); }
  std::optional<std::uint64_t> read_energy_mj() override { return std::nullopt; }
  std::string describe() const override { return "refusing"; }
  std::shared_ptr<RecorderClockBackend> inner;
};

TEST(FrequencyController, ARefusedClockIsReportedAndTheTrainingGoesOnAtThePreviousClock) {
  auto recorder = std::make_shared<RecorderClockBackend>();
  std::vector<std::string> reports;
  std::mutex reports_mutex;
  const auto report = [&](const std::string& message) {
    std::lock_guard lock(reports_mutex);
    reports.push_back(message);
  };
  for (const bool strict : {false, true}) {
    SCOPED_TRACE(strict);
    reports.clear();
    FrequencyController controller(std::make_unique<Refusing>(recorder), FrequencyController::kDefaultTimelineCapacity,
                                   ClockFailurePolicy{strict, report});
    controller.request_clock(1200);
    controller.request_clock(777);  // skipped (rate limit): never an error, even when strict
    controller.request_clock(1410);
    controller.flush();
    EXPECT_EQ(recorder->locked_clock_mhz(), 1410);
    controller.request_clock(999);  // refused
    if (strict) {
      EXPECT_THROW(controller.flush(), Error);
    } else {
      controller.flush();  // used to throw and end the training step
    }
    EXPECT_EQ(recorder->locked_clock_mhz(), 1410);  // the previous clock stays
    controller.request_clock(1005);
    controller.flush();
    EXPECT_EQ(recorder->locked_clock_mhz(), 1005);  // and later changes still apply
    EXPECT_EQ(controller.failed_changes(), 1u);
    EXPECT_EQ(controller.skipped_changes(), 1u);
    std::lock_guard lock(reports_mutex);
    const std::vector<std::string> expected = {
        "frequency controller (refusing): skipped the clock change to 777 MHz (kareusd: rate limit: at most 500 "
        "requests per second per client); the previous clock stays",
        "frequency controller (refusing): failed the clock change to 999 MHz (nvml: 999 MHz is not supported); the "
        "previous clock stays"};
    EXPECT_EQ(reports, expected);
    std::vector<int> applied;
    for (const ClockSample& sample : controller.timeline()) applied.push_back(sample.requested_mhz);
    EXPECT_EQ(applied, (std::vector<int>{1200, 1410, 1005}));
  }
}

TEST(FrequencyController, ResetNowDropsQueuedRequests) {
  Recorded recorded;
  FrequencyController controller(recorded.make());
  controller.request_clock(1200);
  controller.flush();
  controller.reset_now();
  EXPECT_EQ(recorded.recorder->locked_clock_mhz(), std::nullopt);
  controller.request_clock(1200);  // after reset_now the same clock is applied again
  controller.flush();
  EXPECT_EQ(recorded.recorder->locked_clock_mhz(), 1200);
}

std::atomic<int> previous_handler_calls{0};
extern "C" void count_previous(int) { previous_handler_calls.fetch_add(1); }

// Makes count_previous SIGUSR1's handler; returns the one it replaced.
struct sigaction install_count_previous() {
  struct sigaction action {};
  action.sa_handler = count_previous;
  sigemptyset(&action.sa_mask);
  struct sigaction saved {};
  ::sigaction(SIGUSR1, &action, &saved);
  return saved;
}

TEST(SignalResetGuard, ResetsThenRunsThePreviousHandler) {
  const struct sigaction saved = install_count_previous();
  std::atomic<int> resets{0};
  std::atomic<int> previous_seen_at_reset{-1};
  {
    SignalResetGuard guard(
        [&] {
          previous_seen_at_reset = previous_handler_calls.load();
          resets.fetch_add(1);
        },
        {SIGUSR1});
    EXPECT_THROW(SignalResetGuard second([] {}, {SIGUSR2}), Error);
    for (int round = 1; round <= 2; ++round) {
      ::kill(::getpid(), SIGUSR1);
      for (int wait = 0; wait < 5000 && previous_handler_calls.load() < round; ++wait) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      EXPECT_EQ(resets.load(), round);
      EXPECT_EQ(previous_handler_calls.load(), round);  // re-raised, and the guard re-armed itself
    }
    EXPECT_EQ(previous_seen_at_reset.load(), 1);  // the reset ran before the previous handler
  }
  // Destroyed: the previous handler is back and the guard no longer runs.
  ::kill(::getpid(), SIGUSR1);
  for (int wait = 0; wait < 5000 && previous_handler_calls.load() < 3; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(previous_handler_calls.load(), 3);
  EXPECT_EQ(resets.load(), 2);
  ::sigaction(SIGUSR1, &saved, nullptr);
}

TEST(SignalResetGuard, AnIgnoredSignalStaysIgnored) {
  // SIGUSR2 ignored (as SIGINT is under nohup): the guard must not catch it and reset the clocks
  // of a job that goes on running.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction saved {};
  ::sigaction(SIGUSR2, &ignore, &saved);
  std::atomic<int> resets{0};
  {
    SignalResetGuard guard([&] { resets.fetch_add(1); }, {SIGUSR2});
    struct sigaction current {};
    ::sigaction(SIGUSR2, nullptr, &current);
    EXPECT_EQ(current.sa_handler, SIG_IGN);
    ::kill(::getpid(), SIGUSR2);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // the destructor joins the watcher: a reset it was told of has run by now
  EXPECT_EQ(resets.load(), 0);
  struct sigaction after {};
  ::sigaction(SIGUSR2, nullptr, &after);
  EXPECT_EQ(after.sa_handler, SIG_IGN);
  ::sigaction(SIGUSR2, &saved, nullptr);
}

TEST(SignalResetGuard, ForkedChildStepsAside) {
  const struct sigaction saved = install_count_previous();
  auto recorder = std::make_shared<RecorderClockBackend>();
  auto controller = std::make_unique<FrequencyController>(std::make_unique<testing::ForwardingBackend>(recorder));
  controller->request_clock(1200);
  controller->flush();
  std::atomic<int> resets{0};
  auto guard = std::make_unique<SignalResetGuard>([&] { resets.fetch_add(1); }, std::vector<int>{SIGUSR1});
  const int before = previous_handler_calls.load();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child's signal reaches the previous handler; destroying the objects neither resets the
    // parent's clock nor waits for threads the child does not have.
    ::kill(::getpid(), SIGUSR1);
    const bool handled = previous_handler_calls.load() == before + 1;
    guard.reset();
    const std::size_t calls = recorder->calls().size();
    controller.reset();
    const bool untouched = recorder->calls().size() == calls && recorder->locked_clock_mhz() == 1200;
    ::_exit(handled && untouched ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(recorder->locked_clock_mhz(), 1200);
  // The guard's destructor writes its stop byte after anything the child could have written to
  // the shared pipe, and joins the watcher, which reads the pipe in order: once reset() returns
  // the watcher has seen every byte, so no reset now means the child's signal never reached it.
  guard.reset();
  EXPECT_EQ(resets.load(), 0);
  EXPECT_EQ(previous_handler_calls.load(), before);  // nor was it re-raised in the parent
  controller.reset();
  EXPECT_EQ(recorder->locked_clock_mhz(), std::nullopt);
  ::sigaction(SIGUSR1, &saved, nullptr);
}

// Locks 1200 MHz under a guard that writes `message` to stderr once the clock is reset, then
// calls `die`: a training process killed, or ending on an uncaught exception.
void lock_then_die(std::string_view message, const std::function<void()>& die) {
  auto backend = std::make_unique<RecorderClockBackend>();
  RecorderClockBackend* recorder = backend.get();
  FrequencyController controller(std::move(backend));
  SignalResetGuard guard([&] {
    controller.reset_now();
    if (!recorder->locked_clock_mhz()) {
      [[maybe_unused]] auto written = ::write(2, message.data(), message.size());
    }
  });
  controller.request_clock(1200);
  controller.flush();
  die();
}

TEST(SignalResetGuardDeathTest, SigtermResetsClocksThenStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(lock_then_die("clocks reset\n",
                            [] {
                              ::kill(::getpid(), SIGTERM);
                              std::this_thread::sleep_for(std::chrono::seconds(5));
                              std::exit(0);
                            }),
              ::testing::KilledBySignal(SIGTERM), "clocks reset");
}

TEST(SignalResetGuardDeathTest, UncaughtExceptionResetsClocksBeforeTerminating) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(lock_then_die("clocks reset on terminate\n",
                             [] { std::thread([] { throw Error("nobody catches this"); }).join(); }),
               "clocks reset on terminate");
}

}  // namespace
}  // namespace kareus::runtime
