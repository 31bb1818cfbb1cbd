#include "kareus/interop/pfo_http_server.h"

#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "interop_test_plans.h"
#include "kareus/common/error.h"

namespace kareus::interop {
namespace {

using nlohmann::json;

class PfoHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const workload::Workload workload = testing::test_workload(1, 4);
    service_ = std::make_unique<PfoService>(
        std::vector<ServedPlan>{{4.0, 3000, "plan_0.json", testing::test_plan(workload)}}, nullptr);
    HttpServerOptions options;
    options.port = 0;
    options.max_body_bytes = 4096;
    options.read_timeout_s = 1;
    server_ = std::make_unique<PfoHttpServer>(*service_, options);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
  }

  std::unique_ptr<PfoService> service_;
  std::unique_ptr<PfoHttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(PfoHttpServerTest, ServesTheProtocolOverLoopback) {
  ASSERT_GT(port_, 0);
  httplib::Client client("127.0.0.1", port_);
  const std::string job_body = R"({"job_id": "", "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2})";
  auto job = client.Post("/register_job", job_body, "application/json");
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
}

TEST_F(PfoHttpServerTest, OversizedBodiesGet413WithJson) {
  httplib::Client client("127.0.0.1", port_);
  auto response = client.Post("/register_job", std::string(8192, ' '), "application/json");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 413);
  EXPECT_EQ(json::parse(response->body)["detail"], "request body too large");
}

TEST(PfoHttpServer, StopBeforeRunReturnsAndBusyPortIsAnError) {
  PfoService service({{4.0, 3000, "p", testing::test_plan(testing::test_workload(1, 2))}}, nullptr);
  HttpServerOptions options;
  options.port = 0;
  PfoHttpServer first(service, options);
  const int port = first.bind();
  first.stop();
  first.run();          // returns at once: the stop was not lost
  options.port = port;  // still bound by `first`
  PfoHttpServer second(service, options);
  EXPECT_THROW((void)second.bind(), kareus::Error);
}

}  // namespace
}  // namespace kareus::interop
