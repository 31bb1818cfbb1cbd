#include "kareus/runtime/daemon.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "../common/input_error.h"
#include "common/scratch.h"
#include "kareus/common/error.h"
#include "kareus/runtime/daemon_protocol.h"
#include "kareus/runtime/kareusd_client.h"
#include "kareus/runtime/runtime.h"
#include "test_plans.h"

namespace kareus::runtime {
namespace {

using nlohmann::json;
using test_common::error_of;

const std::vector<int> kClocks = {1980, 1410, 1200, 1005, 810};

// --- protocol ----------------------------------------------------------------------------------

TEST(DaemonProtocol, ParsesEveryOpAndRoundTrips) {
  EXPECT_EQ(parse_daemon_request(R"({"op": "set", "gpu": 3, "freq_mhz": 1410, "id": 7})"),
            (DaemonRequest{DaemonOp::kSet, 3, 1410, 7}));
  for (DaemonOp op : {DaemonOp::kSet, DaemonOp::kReset, DaemonOp::kGet, DaemonOp::kSupported, DaemonOp::kEnergy}) {
    SCOPED_TRACE(std::string(to_string(op)));
    const DaemonRequest request{op, 1, op == DaemonOp::kSet ? 810 : 0, std::nullopt};
    std::string line = format_daemon_request(request);
    ASSERT_EQ(line.back(), '\n');
    line.pop_back();
    EXPECT_EQ(parse_daemon_request(line), request);
  }
  DaemonReply reply;
  reply.clocks_mhz = {1410, 1200};
  reply.energy_mj = 123456789012ULL;
  reply.id = 4;
  std::string line = format_daemon_reply(reply);
  line.pop_back();
  EXPECT_EQ(parse_daemon_reply(line), reply);
}

TEST(DaemonProtocol, BadRequestsSayWhatIsWrong) {
  struct Row {
    std::string line, message;
  };
  const Row rows[] = {
      {"{\"op\": \"set\", \"gpu\": 0", "request: invalid JSON"},
      {"[1, 2]", "request: expected a JSON object"},
      {R"({"gpu": 0})", "request: field 'op' must be a string"},
      {R"({"op": "boost", "gpu": 0})", "request: unknown op \"boost\" (expected set,"},
      {R"({"op": "set", "gpu": 0})", "request: missing field 'freq_mhz'"},
      {R"({"op": "set", "gpu": 0, "freq_mhz": -5})", "request: field 'freq_mhz' must be an integer >= 1, found -5"},
      {R"({"op": "get", "gpu": 1.5})", "request: field 'gpu' must be an integer >= 0, found 1.5"},
      {R"({"op": "get", "gpu": 0, "freq_mhz": 5})", "request: unknown field 'freq_mhz'"},
      {R"({"op": "get"})", "request: missing field 'gpu'"},
      {R"({"op": "get", "gpu": 0, "id": 18446744073709551615})",
       "request: field 'id' must be an integer in the signed 64-bit range"},
      {"{\"op\": \"get\", \"gpu\": " + std::string(70, '[') + std::string(70, ']') + "}",
       "request:1:85: JSON nested deeper than 64 levels"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.line);
    try {
      (void)parse_daemon_request(row.line);
      FAIL() << "expected InputError";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(row.message), std::string::npos) << error.what();
    }
  }
}

TEST(DaemonConfig, ParsesAndRejectsBadFields) {
  const DaemonConfig config = parse_daemon_config(
      R"({"socket_path": "/run/k.sock", "socket_group": "kareus", "allowed_uids": [0, 1000], "allowed_gids": [44],
          "max_message_bytes": 512, "max_requests_per_second": 20, "backend": "fake", "fake_gpu_count": 4,
          "fake_clocks_mhz": [1500, 1000]})",
      "k.json");
  EXPECT_EQ(config.allowed_uids, (std::vector<uid_t>{0, 1000}));
  EXPECT_EQ(config.allowed_gids, (std::vector<gid_t>{44}));
  EXPECT_EQ(config.max_message_bytes, 512u);
  EXPECT_EQ(config.fake_gpu_count, 4);
  EXPECT_EQ(make_daemon_gpus(config).size(), 4u);
  struct Row {
    std::string text, message;
  };
  const Row rows[] = {
      {R"({"socket_path": "/s", "allowed_uids": []})", "k.json: allowed_uids and allowed_gids are both empty"},
      {R"({"socket_path": "/s", "allowed_uids": [0], "max_message_bytes": 3})",
       "k.json: field 'max_message_bytes' must be an integer in [64, 1048576], found 3"},
      {R"({"socket_path": "/s", "allowed_uids": [0], "backend": "cuda"})",
       "field 'backend' must be \"nvml\" or \"fake\""},
      {R"({"socket_path": "/s", "allowed_uids": ["root"]})", "field 'allowed_uids' must hold ids >= 0"},
      {R"({"socket": "/s", "allowed_uids": [0]})", "k.json: unknown field 'socket'"},
      {R"({"socket_path": "/s", "allowed_uids": [0], "max_requests_per_second": 0.5})",
       "k.json: field 'max_requests_per_second' must be in [1, 1000000] (below one request per second no request "
       "would ever be allowed), found 0.5"},
      {R"({"socket_path": "/s", "allowed_uids": [0], "max_clients_per_user": 0})",
       "k.json: field 'max_clients_per_user' must be an integer in [1, 65536], found 0"},
      {R"({"socket_path": "/s", "allowed_uids": [0], "idle_timeout_s": 0})",
       "k.json: field 'idle_timeout_s' must be in [0.1, 86400] s, found 0"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.text);
    try {
      (void)parse_daemon_config(row.text, "k.json");
      FAIL() << "expected InputError";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(row.message), std::string::npos) << error.what();
    }
  }
}

TEST(DaemonPeer, AllowListByUidAndGid) {
  DaemonConfig config;
  config.allowed_uids = {1000};
  config.allowed_gids = {44};
  EXPECT_EQ(check_peer({1, 1000, 5}, config), std::nullopt);
  EXPECT_EQ(check_peer({1, 2000, 44}, config), std::nullopt);
  const auto refusal = check_peer({77, 65534, 65534}, config);
  ASSERT_TRUE(refusal);
  EXPECT_NE(refusal->find("uid 65534 (gid 65534, pid 77) is not allowed"), std::string::npos) << *refusal;
}

// --- core ----------------------------------------------------------------------------------------

struct FakeGpus {
  std::vector<std::shared_ptr<RecorderClockBackend>> recorders;
  std::vector<std::unique_ptr<ClockBackend>> make(int count) {
    std::vector<std::unique_ptr<ClockBackend>> gpus;
    for (int gpu = 0; gpu < count; ++gpu) {
      recorders.push_back(std::make_shared<RecorderClockBackend>(kClocks));
      gpus.push_back(std::make_unique<testing::ForwardingBackend>(recorders.back()));
    }
    return gpus;
  }
};

json reply_of(DaemonCore& core, DaemonCore::ClientId client, const std::string& line, double now_s = 0) {
  return json::parse(core.handle_line(client, line, now_s));
}

TEST(DaemonCore, LeasesBelongToTheClientThatLocked) {
  FakeGpus fake;
  DaemonCore core(fake.make(2), 1000);
  const auto alice = core.connect({10, 1000, 1000});
  const auto bob = core.connect({11, 1001, 1001});
  EXPECT_EQ(reply_of(core, alice, R"({"op": "set", "gpu": 1, "freq_mhz": 1200, "id": 1})"),
            json::parse(R"({"ok": true, "id": 1, "freq_mhz": 1200})"));  // the set reply confirms the clock
  EXPECT_EQ(fake.recorders[1]->locked_clock_mhz(), 1200);
  EXPECT_EQ(reply_of(core, bob, R"({"op": "get", "gpu": 1})")["freq_mhz"], 1200);
  const json refused = reply_of(core, bob, R"({"op": "set", "gpu": 1, "freq_mhz": 810})");
  EXPECT_EQ(refused["error"], "gpu 1 is locked by another client (pid 10, uid 1000)");
  EXPECT_EQ(reply_of(core, bob, R"({"op": "reset", "gpu": 1})")["ok"], false);
  EXPECT_EQ(fake.recorders[1]->locked_clock_mhz(), 1200);
  EXPECT_EQ(core.disconnect(alice), std::vector<int>{1});
  EXPECT_EQ(fake.recorders[1]->locked_clock_mhz(), std::nullopt);
  EXPECT_EQ(reply_of(core, bob, R"({"op": "set", "gpu": 1, "freq_mhz": 810})")["ok"], true);
  EXPECT_EQ(core.holder(1), bob);
}

// A GPU whose reset always fails (a driver error, a GPU that fell off the bus).
class ResetThrowsBackend final : public ClockBackend {
 public:
  void set_locked_clock(int freq_mhz) override { recorder_.set_locked_clock(freq_mhz); }
  void reset() override { throw Error("nvmlDeviceResetGpuLockedClocks: GPU is lost"); }
  int read_clock_mhz() override { return recorder_.read_clock_mhz(); }
  std::vector<int> supported_clocks_mhz() override { return kClocks; }
  std::optional<std::uint64_t> read_energy_mj() override { return std::nullopt; }
  std::string describe() const override { return "lost gpu"; }

 private:
  RecorderClockBackend recorder_{kClocks};
};

TEST(DaemonCore, ADeadClientsLeaseGoesEvenWhenTheResetThrows) {
  std::vector<std::unique_ptr<ClockBackend>> gpus;
  gpus.push_back(std::make_unique<ResetThrowsBackend>());
  gpus.push_back(std::make_unique<RecorderClockBackend>(kClocks));
  DaemonCore core(std::move(gpus), 1000);
  const auto dead = core.connect({10, 1000, 1000});
  const auto next = core.connect({11, 1001, 1001});
  ASSERT_EQ(reply_of(core, dead, R"({"op": "set", "gpu": 0, "freq_mhz": 1200})")["ok"], true);
  ASSERT_EQ(reply_of(core, dead, R"({"op": "set", "gpu": 1, "freq_mhz": 810})")["ok"], true);
  std::vector<std::string> failures;
  EXPECT_EQ(core.disconnect(dead, &failures), std::vector<int>{1});  // gpu 1 reset, gpu 0 failed
  EXPECT_EQ(failures, std::vector<std::string>{"gpu 0: reset failed: nvmlDeviceResetGpuLockedClocks: GPU is lost"});
  EXPECT_EQ(core.holder(0), std::nullopt);
  EXPECT_EQ(core.holder(1), std::nullopt);
  // The next client is not refused as "locked by another client".
  EXPECT_EQ(reply_of(core, next, R"({"op": "set", "gpu": 0, "freq_mhz": 1410})"),
            json::parse(R"({"ok": true, "freq_mhz": 1410})"));
  EXPECT_EQ(core.holder(0), next);
}

TEST(DaemonCore, RefusesUnsupportedClocksAndUnknownGpus) {
  FakeGpus fake;
  DaemonCore core(fake.make(2), 1000);
  const auto client = core.connect({1, 0, 0});
  EXPECT_EQ(reply_of(core, client, R"({"op": "set", "gpu": 0, "freq_mhz": 1300})")["error"],
            "gpu 0 does not support 1300 MHz (supported: 1980, 1410, 1200, 1005, 810)");
  EXPECT_EQ(
      reply_of(core, client, R"({"op": "get", "gpu": 2, "id": 9})"),
      json::parse(R"j({"ok": false, "error": "gpu 2 does not exist: this machine has 2 GPUs (0..1)", "id": 9})j"));
  EXPECT_TRUE(fake.recorders[0]->calls().empty());
  EXPECT_EQ(reply_of(core, client, R"({"op": "supported", "gpu": 0})")["clocks_mhz"], json(kClocks));
  const auto first = reply_of(core, client, R"({"op": "energy", "gpu": 0})")["energy_mj"].get<std::uint64_t>();
  const auto second = reply_of(core, client, R"({"op": "energy", "gpu": 0})")["energy_mj"].get<std::uint64_t>();
  EXPECT_EQ(second - first, 1980u);  // the fake's counter grows by its clock per read
}

TEST(DaemonCore, RateLimitPerClientRefills) {
  FakeGpus fake;
  DaemonCore core(fake.make(1), 10);
  const auto busy = core.connect({1, 0, 0});
  const auto calm = core.connect({2, 0, 0});
  int refused = 0;
  for (int request = 0; request < 25; ++request) {
    refused += reply_of(core, busy, R"({"op": "get", "gpu": 0})", 5.0)["ok"] == false ? 1 : 0;
  }
  EXPECT_EQ(refused, 15);  // a burst of 10 at one instant
  EXPECT_EQ(reply_of(core, busy, R"({"op": "get", "gpu": 0})", 5.0)["error"],
            "rate limit: at most 10 requests per second per client");
  EXPECT_EQ(reply_of(core, calm, R"({"op": "get", "gpu": 0})", 5.0)["ok"], true);   // others unaffected
  EXPECT_EQ(reply_of(core, busy, R"({"op": "get", "gpu": 0})", 5.25)["ok"], true);  // 2.5 tokens back
}

TEST(DaemonCore, DestructionResetsEveryHeldGpu) {
  FakeGpus fake;
  {
    DaemonCore core(fake.make(3), 1000);
    const auto client = core.connect({1, 0, 0});
    (void)core.handle_line(client, R"({"op": "set", "gpu": 0, "freq_mhz": 810})", 0);
    (void)core.handle_line(client, R"({"op": "set", "gpu": 2, "freq_mhz": 1005})", 0);
  }
  EXPECT_EQ(fake.recorders[0]->locked_clock_mhz(), std::nullopt);
  EXPECT_EQ(fake.recorders[2]->locked_clock_mhz(), std::nullopt);
  EXPECT_TRUE(fake.recorders[1]->calls().empty());  // never touched, never reset
}

// --- server over a real socket -----------------------------------------------------------------

class DaemonServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.socket_path =
        (std::filesystem::temp_directory_path() / ("kareusd_test_" + std::to_string(::getpid()) + ".sock")).string();
    config_.allowed_uids = {::getuid()};
    config_.max_message_bytes = 256;
    start();
  }
  /// Starts a server on config_ (again, after stop(), for a test with another config).
  void start() {
    server_ = std::make_unique<DaemonServer>(config_, fake_.make(2), [this](std::string_view message) {
      std::lock_guard lock(log_mutex_);
      log_.emplace_back(message);
    });
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override { stop(); }
  std::size_t log_lines_with(std::string_view text) {
    std::lock_guard lock(log_mutex_);
    return static_cast<std::size_t>(std::count_if(
        log_.begin(), log_.end(), [&](const std::string& line) { return line.find(text) != std::string::npos; }));
  }
  void stop() {
    if (!server_) return;
    server_->stop();
    thread_.join();
    server_.reset();
  }
  template <typename Predicate>
  bool eventually(Predicate predicate) {
    for (int attempt = 0; attempt < 500; ++attempt) {
      if (predicate()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(4));
    }
    return predicate();
  }

  DaemonConfig config_;
  FakeGpus fake_;
  std::unique_ptr<DaemonServer> server_;
  std::thread thread_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
};

// A raw connection, for bytes that are not well-formed requests.
struct RawClient {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  explicit RawClient(const std::string& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  }
  ~RawClient() { ::close(fd); }
  void write(const std::string& bytes) const {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  std::string read_line() {
    while (buffer.find('\n') == std::string::npos) {
      char chunk[1024];
      const ssize_t count = ::recv(fd, chunk, sizeof(chunk), 0);
      if (count <= 0) return "(closed)";
      buffer.append(chunk, static_cast<std::size_t>(count));
    }
    const std::string line = buffer.substr(0, buffer.find('\n'));
    buffer.erase(0, line.size() + 1);
    return line;
  }
  std::string buffer;
};

TEST_F(DaemonServerTest, AllowedClientSetsAndResetsThroughTheBackend) {
  struct stat info {};
  ASSERT_EQ(::stat(config_.socket_path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0660u);
  {
    KareusdClockBackend gpu1(config_.socket_path, 1);
    EXPECT_EQ(gpu1.supported_clocks_mhz(), kClocks);
    gpu1.set_locked_clock(1005);
    EXPECT_EQ(fake_.recorders[1]->locked_clock_mhz(), 1005);
    EXPECT_EQ(gpu1.read_clock_mhz(), 1005);
    gpu1.reset();
    EXPECT_EQ(fake_.recorders[1]->locked_clock_mhz(), std::nullopt);
    gpu1.set_locked_clock(810);
    try {
      gpu1.set_locked_clock(1300);
      FAIL() << "expected Error";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("set gpu 1: gpu 1 does not support 1300 MHz"), std::string::npos)
          << error.what();
    }
  }
  // The backend's connection closed: the daemon released the lease.
  EXPECT_TRUE(eventually([&] { return !fake_.recorders[1]->locked_clock_mhz(); }));
  EXPECT_THROW(KareusdClockBackend(config_.socket_path, 7), Error);  // unknown GPU
}

TEST_F(DaemonServerTest, MalformedTruncatedAndOversizedMessagesGetErrorsAndServingGoesOn) {
  RawClient client(config_.socket_path);
  client.write("{\"op\": \"set\", \"gpu\": 0, \"freq\n");
  EXPECT_NE(client.read_line().find("request: invalid JSON"), std::string::npos);
  client.write(std::string(1000, 'x') + "\n");
  EXPECT_EQ(client.read_line(), R"({"error":"message exceeds 256 bytes; skipped up to its newline","ok":false})");
  // Oversized and split across writes, then a good request in the same connection.
  client.write("{\"op\": \"get\", \"pad\": \"" + std::string(300, 'y'));
  EXPECT_NE(client.read_line().find("message exceeds 256 bytes"), std::string::npos);
  client.write(std::string(5000, 'z') + "\"}\n{\"op\": \"get\", \"gpu\": 0, \"id\": 3}\n");
  EXPECT_EQ(client.read_line(), R"({"freq_mhz":1980,"id":3,"ok":true})");
  client.write("\xff\xfe\n");
  EXPECT_NE(client.read_line().find("\"ok\":false"), std::string::npos);
  // Truncated: no newline before the writing side closes; the reply still arrives.
  client.write(R"({"op": "reset", "gpu": 0)");
  ::shutdown(client.fd, SHUT_WR);
  EXPECT_EQ(client.read_line(),
            R"({"error":"truncated message: the connection closed after 24 bytes without a newline","ok":false})");
  // The daemon still serves new clients.
  KareusdClockBackend gpu0(config_.socket_path, 0);
  EXPECT_EQ(gpu0.read_clock_mhz(), 1980);
}

TEST_F(DaemonServerTest, ClientKilledWithSigkillHasItsClocksReset) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only async-signal-safe calls between fork and _exit.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, config_.socket_path.c_str(), config_.socket_path.size() + 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) ::_exit(3);
    const char request[] = "{\"op\": \"set\", \"gpu\": 0, \"freq_mhz\": 810}\n";
    if (::write(fd, request, sizeof(request) - 1) < 0) ::_exit(4);
    char reply[256];
    if (::read(fd, reply, sizeof(reply)) <= 0) ::_exit(5);
    if (::write(ready[1], "k", 1) != 1) ::_exit(6);
    while (true) ::pause();
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  EXPECT_EQ(fake_.recorders[0]->locked_clock_mhz(), 810);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(eventually([&] { return !fake_.recorders[0]->locked_clock_mhz(); }));
  EXPECT_EQ(fake_.recorders[0]->calls().back(), (RecordedClockCall{RecordedClockCall::Kind::kReset, 0}));
  ::close(ready[0]);
  ::close(ready[1]);
  // The daemon resets first and logs after, so the line may trail the reset.
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(log_mutex_);
    for (const auto& line : log_)
      if (line.find("pid " + std::to_string(child)) != std::string::npos &&
          line.find("reset gpus 0") != std::string::npos)
        return true;
    return false;
  }));
}

TEST_F(DaemonServerTest, ShutdownResetsClocksStillHeld) {
  KareusdClockBackend gpu0(config_.socket_path, 0);
  gpu0.set_locked_clock(1200);
  EXPECT_EQ(fake_.recorders[0]->locked_clock_mhz(), 1200);
  stop();
  EXPECT_EQ(fake_.recorders[0]->locked_clock_mhz(), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(config_.socket_path));
}

// Issue #30: after kareusd went away the client's fd stayed at -1 and every later request failed
// with "receive failed: Bad file descriptor", even once kareusd was back.
TEST_F(DaemonServerTest, ARestartedDaemonIsReconnectedAndAGoneOneIsAClearError) {
  KareusdClockBackend gpu0(config_.socket_path, 0, {0.5, 1});
  gpu0.set_locked_clock(1410);
  stop();
  for (int request = 0; request < 2; ++request) {  // the second one starts from fd -1
    const auto started = std::chrono::steady_clock::now();
    const std::string message = error_of<Error>([&] { gpu0.set_locked_clock(1200); });
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_NE(message.find("6 reconnect attempts over"), std::string::npos) << message;
    EXPECT_EQ(message.find("Bad file descriptor"), std::string::npos) << message;
    EXPECT_GT(waited_s, 3.0);  // 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s of waits between the 6 tries
    EXPECT_LT(waited_s, 10.0);
  }
  start();
  gpu0.set_locked_clock(1200);
  EXPECT_EQ(fake_.recorders[2]->locked_clock_mhz(), 1200);  // the new daemon's GPU 0
  EXPECT_EQ(gpu0.read_clock_mhz(), 1200);
}

TEST_F(DaemonServerTest, LeasesAreRecordedOnDiskAndAStartResetsWhatAPreviousDaemonLeftLocked) {
  const std::string record = config_.socket_path + ".leases";
  auto read_record = [&] {
    std::ifstream in(record);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_FALSE(std::filesystem::exists(record));
  {
    KareusdClockBackend gpu1(config_.socket_path, 1);
    gpu1.set_locked_clock(1005);
    EXPECT_EQ(read_record(), "kareusd.leases/1\n1\n");
    KareusdClockBackend gpu0(config_.socket_path, 0);
    gpu0.set_locked_clock(810);
    EXPECT_EQ(read_record(), "kareusd.leases/1\n0\n1\n");
    gpu0.reset();
    EXPECT_EQ(read_record(), "kareusd.leases/1\n1\n");
  }
  EXPECT_TRUE(eventually([&] { return !std::filesystem::exists(record); }));  // both disconnected
  // A daemon that died holding GPU 1 (SIGKILL: no shutdown ran) left this behind.
  stop();
  { std::ofstream(record) << "kareusd.leases/1\n1\n"; }
  start();
  const RecordedClockCall reset{RecordedClockCall::Kind::kReset, 0};
  const auto resets_of = [&](int recorder) {
    const auto calls = fake_.recorders[static_cast<std::size_t>(recorder)]->calls();
    return std::count(calls.begin(), calls.end(), reset);
  };
  EXPECT_EQ(resets_of(3), 1);  // the new daemon's GPU 1
  EXPECT_EQ(resets_of(2), 0);
  EXPECT_EQ(log_lines_with("reset gpu 1, left locked by a previous kareusd"), 1u);
  EXPECT_FALSE(std::filesystem::exists(record));
}

TEST_F(DaemonServerTest, TrainingLoopDrivesClocksThroughTheDaemon) {
  plan::Plan two_stage = testing::make_plan(2, 3);
  // Stage 1 of 2, 3 microbatches: F0 B0 F1 B1 F2 B2, on clocks the daemon's GPUs support.
  const int clocks[] = {1410, 1005, 1410, 810, 1200, 810};
  for (std::size_t index = 0; index < 6; ++index) {
    two_stage.stages[1].instructions[index].freq_mhz = clocks[index];
    two_stage.stages[0].instructions[index].freq_mhz = 1980;  // every stage's clocks are checked at start
  }
  {
    Runtime runtime(std::make_shared<const plan::Plan>(two_stage), 1,
                    make_clock_backend("kareusd:" + config_.socket_path, 1));
    runtime.on_step_begin();
    for (const auto& instruction : pipeline::one_f_one_b(1, 2, 3)) {
      runtime.on_instruction_begin(instruction.type, instruction.microbatch);
      runtime.on_instruction_end();
    }
    runtime.on_step_end();
    runtime.flush();
    std::vector<int> requested;
    std::vector<int> effective;
    for (const ClockSample& sample : runtime.timeline()) {
      requested.push_back(sample.requested_mhz);
      effective.push_back(sample.effective_mhz);
    }
    EXPECT_EQ(requested, std::vector<int>(std::begin(clocks), std::end(clocks)));
    EXPECT_EQ(effective, requested);  // read back through the daemon
    std::vector<int> applied;
    for (const auto& call : fake_.recorders[1]->calls()) applied.push_back(call.freq_mhz);
    EXPECT_EQ(applied, requested);
  }
  // The runtime reset its clock on destruction (and the daemon would have on disconnect).
  EXPECT_TRUE(eventually([&] { return !fake_.recorders[1]->locked_clock_mhz(); }));
  EXPECT_TRUE(fake_.recorders[0]->calls().empty());
}

TEST(KareusdClient, OneRequestPerChangeAndARateLimitSkipsTheChange) {
  // At 3 requests per second (bursts of 3): the backend's opening get, then one set per change.
  // With a get after every set, the second change used to trip the limit and raise.
  DaemonConfig config;
  config.socket_path =
      (std::filesystem::temp_directory_path() / ("kareusd_rate_" + std::to_string(::getpid()) + ".sock")).string();
  config.allowed_uids = {::getuid()};
  config.max_requests_per_second = 3;
  FakeGpus fake;
  DaemonServer server(config, fake.make(1), [](std::string_view) {});
  std::thread serving([&] { server.run(); });
  std::vector<std::string> reports;
  std::mutex reports_mutex;
  {
    FrequencyController controller(make_clock_backend("kareusd:" + config.socket_path, 0),
                                   FrequencyController::kDefaultTimelineCapacity,
                                   ClockFailurePolicy{true, [&](const std::string& message) {
                                                        std::lock_guard lock(reports_mutex);
                                                        reports.push_back(message);
                                                      }});
    for (const int clock : {1200, 810}) controller.request_clock(clock);
    controller.flush();
    std::vector<ClockSample> timeline = controller.timeline();
    ASSERT_EQ(timeline.size(), 2u);
    EXPECT_EQ(timeline[1].effective_mhz, 810);  // confirmed in the set reply
    EXPECT_EQ(fake.recorders[0]->locked_clock_mhz(), 810);
    // The burst is spent: a change now is skipped, even in strict mode, and the clock stays.
    // (A token comes back every 1/3 s; under a slow machine the change may go through instead.)
    controller.request_clock(1410);
    controller.flush();
    EXPECT_EQ(controller.failed_changes(), 0u);
    EXPECT_EQ(controller.skipped_changes() + controller.timeline().size(), 3u);
    if (controller.skipped_changes() == 1) {
      EXPECT_EQ(fake.recorders[0]->locked_clock_mhz(), 810);
      std::lock_guard lock(reports_mutex);
      ASSERT_EQ(reports.size(), 1u);
      EXPECT_NE(reports[0].find("skipped the clock change to 1410 MHz"), std::string::npos) << reports[0];
    }
  }
  server.stop();
  serving.join();
}

TEST(KareusdClient, UnreachableDaemonIsExplained) {
  try {
    KareusdClockBackend backend("/nonexistent/kareusd.sock", 0);
    FAIL() << "expected Error";
  } catch (const Error& error) {
    EXPECT_STREQ(
        error.what(),
        "cannot connect to kareusd at /nonexistent/kareusd.sock: No such file or directory; is kareusd running?");
  }
  EXPECT_THROW((void)make_clock_backend("kareusd:", 0), InputError);  // no socket path
}

// A socket that listens but never accepts or answers: a stalled daemon.
struct StalledDaemon {
  std::string path =
      (std::filesystem::temp_directory_path() / ("kareusd_stalled_" + std::to_string(::getpid()) + ".sock")).string();
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  explicit StalledDaemon(int backlog) {
    ::unlink(path.c_str());
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(fd, backlog), 0);
  }
  ~StalledDaemon() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(KareusdClient, AStalledDaemonTimesOutTheReplyWithAClearError) {
  StalledDaemon daemon(8);
  KareusdConnection connection(daemon.path, {1.0, 0.2});  // queued in the backlog: connected
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of<Error>([&] { (void)connection.exchange(R"({"op": "get", "gpu": 0})"); }),
            fmt::format("kareusd at {}: no reply within 0.2 s (the daemon is stalled or overloaded)", daemon.path));
  EXPECT_GE(seconds_since(start), 0.2);
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(KareusdClient, ADaemonThatDoesNotAcceptTimesOutTheConnect) {
  StalledDaemon daemon(0);
  // Fill the backlog (Linux queues backlog + 1 connections); the next connect would block forever.
  std::vector<int> queued;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, daemon.path.c_str(), sizeof(address.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(fd);
      break;
    }
    queued.push_back(fd);
  }
  ASSERT_FALSE(queued.empty());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of<Error>([&] {
              KareusdClockBackend backend(daemon.path, 0, {0.3, 0.3});
            }),
            fmt::format("cannot connect to kareusd at {}: not accepted within 0.3 s (the daemon is stalled or has "
                        "too many waiting clients)",
                        daemon.path));
  EXPECT_GE(seconds_since(start), 0.3);
  EXPECT_LT(seconds_since(start), 2.0);
  for (const int fd : queued) ::close(fd);
  EXPECT_THROW(KareusdConnection(daemon.path, {0, 1}), InputError);
}

TEST(DaemonServerSetup, StaleSocketIsReplacedOtherFilesAreNot) {
  DaemonConfig config;
  config.socket_path = (test_common::scratch_path("kareusd_setup_test.sock")).string();
  config.allowed_uids = {0};
  std::filesystem::remove(config.socket_path);
  { std::ofstream(config.socket_path) << "not a socket"; }
  FakeGpus fake;
  try {
    DaemonServer server(config, fake.make(1));
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("exists and is not a socket"), std::string::npos) << error.what();
  }
  std::filesystem::remove(config.socket_path);
  config.socket_group = "no-such-group-kareus";
  EXPECT_THROW(DaemonServer(config, fake.make(1)), InputError);
}

// --- hostile clients and a second daemon (docs/limits.md) --------------------------------------

TEST_F(DaemonServerTest, PipelinedRequestsAreAllAnsweredAndTheConnectionStays) {
  // 1000 requests in one write, read only afterwards: the replies outgrow the socket buffer, so
  // the daemon must keep them rather than drop the client; over the 500/s limit each gets an
  // error reply saying so.
  RawClient client(config_.socket_path);
  std::string requests;
  for (int index = 0; index < 1000; ++index)
    requests += R"({"op": "get", "gpu": 0})"
                "\n";
  client.write(requests);
  int ok = 0;
  int limited = 0;
  for (int index = 0; index < 1000; ++index) {
    const std::string line = client.read_line();
    ASSERT_NE(line, "(closed)") << "closed after " << index << " replies";
    const json reply = json::parse(line);
    if (reply["ok"] == true) {
      EXPECT_EQ(reply["freq_mhz"], 1980);
      ++ok;
    } else if (reply["error"] == "rate limit: at most 500 requests per second per client") {
      ++limited;
    }
  }
  EXPECT_GE(ok, 500);  // the burst
  EXPECT_EQ(ok + limited, 1000);
  // Still connected: a request after the tokens refill is served.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  client.write(R"({"op": "get", "gpu": 1, "id": 5})"
               "\n");
  EXPECT_EQ(json::parse(client.read_line()), json::parse(R"({"ok": true, "freq_mhz": 1980, "id": 5})"));
}

TEST_F(DaemonServerTest, ASecondDaemonOnTheSocketIsRefusedAndTheFirstKeepsServing) {
  FakeGpus other;
  EXPECT_EQ(error_of([&] { DaemonServer second(config_, other.make(1)); }),
            fmt::format("socket_path {}: in use by another kareus process (pid {}, lock {}.lock)", config_.socket_path,
                        ::getpid(), config_.socket_path));
  KareusdClockBackend gpu0(config_.socket_path, 0);
  gpu0.set_locked_clock(1005);
  EXPECT_EQ(fake_.recorders[0]->locked_clock_mhz(), 1005);
}

TEST(DaemonServer, RefusesALiveSocketAndReplacesAStaleOne) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kareusd_live_" + std::to_string(::getpid()) + ".sock")).string();
  ::unlink(path.c_str());
  // Something answers on the path without holding the lock (a daemon of an older version).
  const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  DaemonConfig config;
  config.socket_path = path;
  config.allowed_uids = {::getuid()};
  FakeGpus fake;
  EXPECT_EQ(error_of([&] { DaemonServer server(config, fake.make(1)); }),
            fmt::format("socket_path {}: a running kareusd answers there; stop it first (only a stale socket is "
                        "replaced)",
                        path));
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0);  // the live socket is left alone
  ::close(listener);                          // its owner died: the socket file is stale
  { DaemonServer server(config, fake.make(1)); }
  EXPECT_NE(::stat(path.c_str(), &info), 0);  // replaced, then removed on shutdown
}

}  // namespace
}  // namespace kareus::runtime

namespace kareus::runtime {
namespace {

TEST_F(DaemonServerTest, OneUserCannotHoldEveryClientSlot) {
  stop();
  config_.max_clients_per_user = 2;
  start();
  RawClient first(config_.socket_path);
  RawClient second(config_.socket_path);
  for (RawClient* client : {&first, &second}) {
    client->write(R"({"op": "get", "gpu": 0})"
                  "\n");
    EXPECT_EQ(client->read_line(), R"({"freq_mhz":1980,"ok":true})");
  }
  RawClient third(config_.socket_path);
  EXPECT_EQ(third.read_line(),
            fmt::format(R"j({{"error":"uid {} already has 2 connections (max_clients_per_user 2)","ok":false}})j",
                        ::getuid()));
  EXPECT_EQ(third.read_line(), "(closed)");
  EXPECT_EQ(log_lines_with("max_clients_per_user 2"), 1u);
}

TEST(DaemonServerSetup, ASocketFolderEveryUserMayWriteIsRefusedOrWarnedAbout) {
  const std::filesystem::path open_folder =
      std::filesystem::temp_directory_path() / ("kareusd_open_" + std::to_string(::getpid()));
  std::filesystem::create_directories(open_folder);
  ASSERT_EQ(::chmod(open_folder.c_str(), 0777), 0);  // world-writable, not sticky
  DaemonConfig config;
  config.socket_path = (open_folder / "k.sock").string();
  config.allowed_uids = {::getuid()};
  FakeGpus fake;
  EXPECT_EQ(error_of([&] { DaemonServer server(config, fake.make(1)); }),
            fmt::format("socket_path {}: its folder {} is writable by every user and not sticky, so anyone could "
                        "replace the socket; use a folder only root writes (/run/kareusd)",
                        config.socket_path, open_folder.string()));
  EXPECT_FALSE(std::filesystem::exists(config.socket_path));
  ASSERT_EQ(::chmod(open_folder.c_str(), 01777), 0);  // sticky, as /tmp: served, with a warning
  std::vector<std::string> log;
  {
    DaemonServer server(config, fake.make(1), [&](std::string_view line) { log.emplace_back(line); });
  }
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front().rfind("WARNING: socket_path " + config.socket_path + " lies in " + open_folder.string() +
                                  ", which every user may write",
                              0),
            0u);
  ASSERT_EQ(::chmod(open_folder.c_str(), 0755), 0);  // only its owner writes: no warning
  log.clear();
  {
    DaemonServer server(config, fake.make(1), [&](std::string_view line) { log.emplace_back(line); });
  }
  for (const std::string& line : log) EXPECT_EQ(line.find("WARNING"), std::string::npos) << line;
  std::filesystem::remove_all(open_folder);
}

TEST_F(DaemonServerTest, AnIdleClientWithoutALeaseIsDisconnectedAndALeaseHolderIsNot) {
  stop();
  config_.idle_timeout_s = 0.3;
  start();
  const auto start_time = std::chrono::steady_clock::now();
  RawClient idle(config_.socket_path);
  RawClient holder(config_.socket_path);
  holder.write(R"({"op": "set", "gpu": 0, "freq_mhz": 1410})"
               "\n");
  ASSERT_EQ(holder.read_line(), R"({"freq_mhz":1410,"ok":true})");
  EXPECT_EQ(idle.read_line(), "(closed)");  // blocks until the daemon closes it
  const double idle_s = seconds_since(start_time);
  EXPECT_GE(idle_s, 0.3);
  EXPECT_LT(idle_s, 2.0);
  EXPECT_EQ(log_lines_with("idle for 0.3 s: disconnecting"), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  holder.write(R"({"op": "get", "gpu": 0})"
               "\n");
  EXPECT_EQ(holder.read_line(), R"({"freq_mhz":1410,"ok":true})");  // the lease holder stays
  // A client's connection the daemon closed while idle is opened again on the next request.
  KareusdConnection client(config_.socket_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(client.exchange(R"({"op": "get", "gpu": 1})"), R"({"freq_mhz":1980,"ok":true})");
}

TEST_F(DaemonServerTest, OutOfFileDescriptorsPausesAcceptingInsteadOfSpinning) {
  // Client sockets made first; then the process may open no new descriptor, so the daemon's
  // accept fails with EMFILE while the connections wait in its backlog.
  std::vector<int> clients;
  for (int index = 0; index < 4; ++index) clients.push_back(::socket(AF_UNIX, SOCK_STREAM, 0));
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(*std::max_element(clients.begin(), clients.end()) + 1);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::vector<int> fillers;  // free descriptor numbers below the limit, taken
  for (int fd = ::open("/dev/null", O_RDONLY); fd >= 0; fd = ::open("/dev/null", O_RDONLY)) fillers.push_back(fd);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, config_.socket_path.c_str(), sizeof(address.sun_path) - 1);
  for (const int fd : clients) ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  for (const int fd : fillers) ::close(fd);
  const auto cpu_s = [](const rusage& usage) {
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  };
  // About one failed accept per 100 ms pause (a spinning loop makes tens of thousands per second).
  const std::size_t pauses = log_lines_with("cannot accept a client: Too many open files; pausing accepts for 0.1 s");
  EXPECT_GE(pauses, 1u);
  EXPECT_LE(pauses, 8u);
  EXPECT_LT(cpu_s(after) - cpu_s(before), 0.1);
  // With descriptors back, the waiting clients are served.
  const std::string request = R"({"op": "get", "gpu": 0})"
                              "\n";
  ASSERT_EQ(::send(clients[0], request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  char reply[64] = {};
  EXPECT_GT(::recv(clients[0], reply, sizeof(reply) - 1, 0), 0);
  EXPECT_EQ(std::string(reply), "{\"freq_mhz\":1980,\"ok\":true}\n");
  for (const int fd : clients) ::close(fd);
}

TEST_F(DaemonServerTest, AReloadChangesAllowListsAndLimitsAndKeepsLeases) {
  RawClient holder(config_.socket_path);
  holder.write(R"({"op": "set", "gpu": 1, "freq_mhz": 1005})"
               "\n");
  ASSERT_EQ(holder.read_line(), R"({"freq_mhz":1005,"ok":true})");
  DaemonConfig next = config_;
  next.max_requests_per_second = 1;
  next.socket_path = config_.socket_path + ".other";  // needs a restart: kept
  server_->reload(next);
  ASSERT_TRUE(eventually([&] { return log_lines_with("reload: 1 allowed uids") == 1; }));
  EXPECT_EQ(log_lines_with("reload: socket_path changed, which takes a restart; the running value stays"), 1u);
  // The lease holder is still connected, under the new rate (a burst of 1).
  std::string replies;
  for (int index = 0; index < 2; ++index) {
    holder.write(R"({"op": "get", "gpu": 1})"
                 "\n");
    replies += holder.read_line() + "\n";
  }
  EXPECT_EQ(replies,
            "{\"freq_mhz\":1005,\"ok\":true}\n"
            "{\"error\":\"rate limit: at most 1 requests per second per client\",\"ok\":false}\n");
  // An allow-list without this uid: the client is disconnected and its clock reset.
  next.allowed_uids = {::getuid() + 1};
  server_->reload(next);
  EXPECT_EQ(holder.read_line(), "(closed)");
  EXPECT_TRUE(eventually([&] { return !fake_.recorders[1]->locked_clock_mhz(); }));
}

}  // namespace
}  // namespace kareus::runtime
