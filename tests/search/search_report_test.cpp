#include "kareus/search/search_report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.h"

namespace kareus::search {
namespace {

using test_common::error_of;

TEST(SearchBudget, TenPercentOfTheSpaceUnlessGiven) {
  EXPECT_EQ(search_budget(1000), 100u);
  EXPECT_EQ(search_budget(95), 10u);  // 9.5 rounds up
  EXPECT_EQ(search_budget(94), 9u);
  EXPECT_EQ(search_budget(4), 1u);  // never below one measurement
  EXPECT_EQ(search_budget(95, 95), 95u);
  EXPECT_EQ(search_budget(95, 1), 1u);
  EXPECT_EQ(error_of([] { (void)search_budget(95, 0); }), "--budget 0 must be between 1 and the space size 95");
  EXPECT_EQ(error_of([] { (void)search_budget(95, -3); }), "--budget -3 must be between 1 and the space size 95");
  EXPECT_EQ(error_of([] { (void)search_budget(95, 96); }), "--budget 96 must be between 1 and the space size 95");
}

TEST(SearchReport, JsonCarriesTheContextFrontsAndRatios) {
  SearchResult result;
  const Evaluation fast{{1410, 12, "norm_0"}, 0.010, 3.0};
  const Evaluation slow{{1200, 6, "linear_0"}, 0.012, 2.5};
  result.evaluations = {fast, slow, {{1000, 3, "norm_0"}, 0.015, 2.9}};
  result.energy_front = {fast, slow};
  result.effective_energy_front = {slow};
  result.stop_reason = StopReason::kConverged;
  result.batches = 2;
  result.from_log = 1;
  const SearchQuality quality{{0.97, 0.95}, {0.96, 0.94}};
  const SearchReportContext context{R"({"model":"m"})", "a100-40gb", "fwd_attn", "kareus", 7, 240, 24, 85};
  const nlohmann::json report = nlohmann::json::parse(search_report_json(context, result, quality));
  EXPECT_EQ(report["schema"], "kareus.search/1");
  EXPECT_EQ(report["workload"]["model"], "m");
  EXPECT_EQ(report["gpu"], "a100-40gb");
  EXPECT_EQ(report["partition"], "fwd_attn");
  EXPECT_EQ(report["strategy"], "kareus");
  EXPECT_EQ(report["seed"], 7);
  EXPECT_EQ(report["space_size"], 240);
  EXPECT_EQ(report["budget"], 24);
  EXPECT_EQ(report["evaluations"], 3);
  EXPECT_EQ(report["from_log"], 1);
  EXPECT_EQ(report["batches"], 2);
  EXPECT_EQ(report["stop_reason"], "converged");
  EXPECT_EQ(report["static_power_w"], 85.0);
  ASSERT_EQ(report["frontier"].size(), 2u);
  EXPECT_EQ(report["frontier"][1]["config"]["freq_mhz"], 1200);
  EXPECT_EQ(report["frontier"][1]["config"]["ctas"], 6);
  EXPECT_EQ(report["frontier"][1]["config"]["slot"], "linear_0");
  EXPECT_EQ(report["frontier"][1]["time_s"], 0.012);
  EXPECT_EQ(report["frontier"][1]["energy_j"], 2.5);
  ASSERT_EQ(report["effective_energy_frontier"].size(), 1u);
  EXPECT_EQ(report["hypervolume_ratio"]["energy"], 0.97);
  EXPECT_EQ(report["front_hypervolume_ratio"]["effective_energy"], 0.94);
}

}  // namespace
}  // namespace kareus::search
