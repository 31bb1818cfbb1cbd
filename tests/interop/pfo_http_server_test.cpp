#include "kareus/interop/pfo_http_server.h"

#include <chrono>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "interop_test_plans.h"
#include "kareus/common/error.h"

namespace kareus::interop {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// A raw loopback connection, for bytes no well-behaved client sends.
class RawClient {
 public:
  /// `receive_buffer_bytes` > 0: a small socket buffer, so that unread answers pile up in the server.
  explicit RawClient(int port, int receive_buffer_bytes = 0) {
    if (receive_buffer_bytes > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof(receive_buffer_bytes));
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  }
  ~RawClient() { ::close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  /// Sends what the socket takes within a short wait; false once the server has closed.
  bool send(std::string_view bytes) const {
    while (!bytes.empty()) {
      const ssize_t count = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (count <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(count));
    }
    return true;
  }
  [[nodiscard]] bool readable(int wait_ms) const {
    pollfd entry{fd_, POLLIN, 0};
    return ::poll(&entry, 1, wait_ms) > 0;
  }
  /// The next response's status and body (Content-Length framed); status 0 if the connection
  /// closed first or nothing came within `wait_s`.
  std::pair<int, std::string> response(double wait_s = 5) {
    const auto start = Clock::now();
    while (true) {
      const std::size_t end = buffer_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const int status = std::stoi(buffer_.substr(9, 3));
        const std::size_t length_at = buffer_.find("Content-Length: ");
        const std::size_t length = length_at < end ? std::stoul(buffer_.substr(length_at + 16)) : 0;
        if (status == 100) {
          buffer_.erase(0, end + 4);
          continue;
        }
        if (buffer_.size() >= end + 4 + length) {
          std::string body = buffer_.substr(end + 4, length);
          buffer_.erase(0, end + 4 + length);
          return {status, body};
        }
      }
      if (seconds_since(start) > wait_s) return {0, ""};
      if (!readable(50)) continue;
      char chunk[65536];
      const ssize_t count = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (count <= 0) return {0, ""};
      buffer_.append(chunk, static_cast<std::size_t>(count));
    }
  }
  /// Whether the server closed the connection (EOF or reset) within `wait_s`.
  bool closed_within(double wait_s) const {
    const auto start = Clock::now();
    while (seconds_since(start) < wait_s) {
      if (!readable(20)) continue;
      char chunk[4096];
      if (::recv(fd_, chunk, sizeof(chunk), 0) <= 0) return true;
    }
    return false;
  }
  [[nodiscard]] int fd() const { return fd_; }

 private:
  int fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::string buffer_;
};

constexpr std::string_view kJobBody =
    R"({"job_id": "", "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2})";

std::string post_request(std::string_view path, std::string_view body) {
  return fmt::format("POST {} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{}", path, body.size(), body);
}

class PfoHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { start(1.0); }
  void start(double timeout_s) {
    const workload::Workload workload = testing::test_workload(1, 4);
    service_ = std::make_unique<PfoService>(
        std::vector<ServedPlan>{{4.0, 3000, "plan_0.json", testing::test_plan(workload)}}, nullptr);
    HttpServerOptions options;
    options.port = 0;
    options.limits = {4096, 1024, 16};
    options.timeout_s = timeout_s;
    server_ = std::make_unique<PfoHttpServer>(*service_, options);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override { stop(); }
  /// Stops the server and returns how long run() took to return.
  double stop() {
    if (!thread_.joinable()) return 0;
    const auto start = Clock::now();
    server_->stop();
    thread_.join();
    return seconds_since(start);
  }

  std::unique_ptr<PfoService> service_;
  std::unique_ptr<PfoHttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(PfoHttpServerTest, ServesTheProtocolOverLoopback) {
  ASSERT_GT(port_, 0);
  httplib::Client client("127.0.0.1", port_);
  auto job = client.Post("/register_job", std::string(kJobBody), "application/json");
  ASSERT_TRUE(job);
  ASSERT_EQ(job->status, 200);
  const std::string job_id = json::parse(job->body).get<std::string>();
  auto rank = client.Post("/register_rank/" + job_id,
                          R"({"rank": 1, "dp_rank": 0, "pp_rank": 1, "tp_rank": 0, "available_frequencies": []})",
                          "application/json");
  ASSERT_TRUE(rank);
  EXPECT_EQ(rank->status, 200);
  EXPECT_EQ(rank->body, "null");
  auto schedule = client.Get(("/schedule/" + job_id + "?rank=1").c_str());
  ASSERT_TRUE(schedule);
  EXPECT_EQ(schedule->status, 200);
  EXPECT_EQ(schedule->get_header_value("Content-Type"), "application/json");
  const json body = json::parse(schedule->body);
  EXPECT_EQ(body["frequencies"][1][0], "backward");
  EXPECT_EQ(body["frequencies"][1][1], testing::test_clock_mhz(1, Direction::kBackward, 0));
  auto unknown = client.Get("/schedule/nope?rank=0");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  auto malformed = client.Post("/register_job", "{", "application/json");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400);
  EXPECT_EQ(json::parse(malformed->body)["detail"], "request body is not valid JSON");
  auto head = client.Head("/info");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_GT(std::stoul(head->get_header_value("Content-Length")), 10u);
}

TEST_F(PfoHttpServerTest, OversizedBodiesGet413WithJson) {
  httplib::Client client("127.0.0.1", port_);
  auto response = client.Post("/register_job", std::string(8192, ' '), "application/json");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 413);
  EXPECT_EQ(json::parse(response->body)["detail"],
            "request body of 8192 bytes is more than the 4096 allowed (--max-body-bytes)");
}

TEST_F(PfoHttpServerTest, AnEndlessChunkedBodyIsAnswered413AsSoonAsItPassesTheLimit) {
  RawClient client(port_);
  ASSERT_TRUE(client.send("POST /register_job HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "1000\r\n" + std::string(4096, ' ') + "\r\n";
  std::size_t sent = 0;
  // Keep sending until the answer comes (the server must not wait for the end of the body).
  while (!client.readable(0) && sent < (std::size_t{256} << 20)) {
    if (!client.send(chunk)) break;
    sent += chunk.size();
  }
  const auto [status, body] = client.response();
  EXPECT_EQ(status, 413);
  EXPECT_EQ(json::parse(body)["detail"], "chunked request body is more than the 4096 bytes allowed (--max-body-bytes)");
  EXPECT_LT(sent, std::size_t{64} << 20);  // answered long before 256 MiB (socket buffers hold a few MiB)
  EXPECT_TRUE(client.closed_within(3));
}

TEST_F(PfoHttpServerTest, AHeaderFloodIsAnswered431) {
  RawClient many(port_);
  std::string fields = "GET /info HTTP/1.1\r\nHost: h\r\n";
  for (int field = 0; field < 17; ++field) fields += fmt::format("X-{}: y\r\n", field);
  ASSERT_TRUE(many.send(fields + "\r\n"));
  const auto [status, body] = many.response();
  EXPECT_EQ(status, 431);
  EXPECT_EQ(json::parse(body)["detail"], "more than 16 header fields");
  RawClient endless(port_);
  (void)endless.send("GET /info HTTP/1.1\r\nHost: h\r\nX: " + std::string(1 << 20, 'y'));  // one megabyte, no line end
  EXPECT_EQ(endless.response().first, 431);
}

TEST_F(PfoHttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  RawClient client(port_);
  ASSERT_TRUE(client.send(post_request("/register_job", kJobBody) + "GET /nope HTTP/1.1\r\nHost: h\r\n\r\n" +
                          "GET /info HTTP/1.1\r\nHost: h\r\n\r\n" + post_request("/register_job", kJobBody)));
  const auto first = client.response();
  EXPECT_EQ(first.first, 200);
  EXPECT_EQ(json::parse(first.second), "kareus-0-dp1-pp2-tp1");
  EXPECT_EQ(client.response().first, 404);
  EXPECT_EQ(json::parse(client.response().second)["stages"], 2);
  EXPECT_EQ(json::parse(client.response().second), "kareus-1-dp1-pp2-tp1");
}

TEST_F(PfoHttpServerTest, ExpectContinueGetsAnInterimAnswerBeforeTheBody) {
  RawClient client(port_);
  ASSERT_TRUE(client.send(
      fmt::format("POST /register_job HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
                  kJobBody.size())));
  ASSERT_TRUE(client.readable(2000));
  char interim[64] = {};
  ASSERT_EQ(::recv(client.fd(), interim, 25, 0), 25);
  EXPECT_STREQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(client.send(kJobBody));
  const auto [status, body] = client.response();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(json::parse(body), "kareus-0-dp1-pp2-tp1");
}

TEST_F(PfoHttpServerTest, ExpectContinueDoesNotStretchTheRequestTimeout) {
  // Headers trickled for ~0.8 s end with Expect: 100-continue; the interim answer used to restart
  // the 1 s clock, so the body could trickle on until ~1.8 s.
  RawClient client(port_);
  const auto start = Clock::now();
  const std::string headers = fmt::format(
      "POST /register_job HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n", kJobBody.size());
  const double pause_s = 0.8 / static_cast<double>(headers.size());
  for (const char byte : headers) {
    ASSERT_TRUE(client.send(std::string_view(&byte, 1)));
    std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
  }
  ASSERT_TRUE(client.readable(2000));
  char interim[32] = {};
  ASSERT_EQ(::recv(client.fd(), interim, 25, 0), 25);
  EXPECT_STREQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  // The body, a byte every 50 ms, until the server answers.
  for (const char byte : kJobBody) {
    if (!client.send(std::string_view(&byte, 1)) || client.readable(50)) break;
  }
  EXPECT_EQ(client.response().first, 408);
  EXPECT_GE(seconds_since(start), 0.9);
  EXPECT_LT(seconds_since(start), 1.5);
}

TEST_F(PfoHttpServerTest, ATricklingClientIsCutOffByTheTimeoutHeadersIncluded) {
  RawClient client(port_);
  const auto start = Clock::now();
  const std::string request = "GET /info HTTP/1.1\r\nHost: h\r\nX-Slow: " + std::string(200, 'a');
  int status = 0;
  // One byte every 50 ms: every read succeeds, but the request is not whole within 1 s.
  for (const char byte : request) {
    if (!client.send(std::string_view(&byte, 1)) || client.readable(50)) break;
  }
  status = client.response().first;
  EXPECT_EQ(status, 408);
  EXPECT_GE(seconds_since(start), 0.9);
  EXPECT_LT(seconds_since(start), 2.5);
}

TEST_F(PfoHttpServerTest, SixtyFourTricklersDoNotDenyOtherClients) {
  std::vector<std::unique_ptr<RawClient>> tricklers;
  for (int index = 0; index < 64; ++index) {
    tricklers.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(tricklers.back()->send("GET /info HTTP/1.1\r\nHost: h\r\nX: "));
  }
  const auto start = Clock::now();
  httplib::Client client("127.0.0.1", port_);
  auto answer = client.Get("/info");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_LT(seconds_since(start), 0.5);  // not after the tricklers' timeout
}

TEST_F(PfoHttpServerTest, StopEndsTheServerWithinTheTimeoutWhateverClientsDo) {
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int index = 0; index < 8; ++index) {
    clients.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(clients.back()->send("GET /info HTTP/1.1\r\nHost: h\r\nX: "));  // trickling
  }
  // A client that pipelines requests and never reads its answers.
  auto deaf = std::make_unique<RawClient>(port_, 4096);
  std::string requests;
  for (int index = 0; index < 2000; ++index) requests += "GET /info HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_TRUE(deaf->send(requests));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double stop_s = stop();
  EXPECT_LT(stop_s, 2.0);  // twice the 1 s timeout at most
}

TEST(PfoHttpServer, StopBeforeRunReturnsAndBusyPortIsAnError) {
  PfoService service({{4.0, 3000, "p", testing::test_plan(testing::test_workload(1, 2))}}, nullptr);
  HttpServerOptions options;
  options.port = 0;
  PfoHttpServer first(service, options);
  const int port = first.bind();
  options.port = port;  // bound by `first`
  PfoHttpServer second(service, options);
  EXPECT_THROW((void)second.bind(), kareus::Error);
  first.stop();
  first.run();  // returns at once: the stop was not lost
}

TEST(PfoHttpServer, ANonLoopbackHostNeedsAllowRemote) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("not a host name"));
  PfoService service({{4.0, 3000, "p", testing::test_plan(testing::test_workload(1, 2))}}, nullptr);
  HttpServerOptions options;
  options.host = "0.0.0.0";
  options.port = 0;
  try {
    PfoHttpServer refused(service, options);
    (void)refused.bind();
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()),
              "--host 0.0.0.0 is not a loopback address, and the server has no authentication (anyone who reaches "
              "the port can register jobs and change their plans); pass --allow-remote to listen there anyway");
  }
  options.allow_remote = true;
  PfoHttpServer allowed(service, options);
  EXPECT_GT(allowed.bind(), 0);
}

}  // namespace
}  // namespace kareus::interop
