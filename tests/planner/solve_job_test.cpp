#include "kareus/planner/solve_job.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/plan/plan.h"

namespace kareus::planner {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kareus_solve_job_test_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

/// Two stages x four microbatches of tests/data/plan/perseus_csv/valid.csv, into a fresh folder.
SolveRequest valid_request(const std::string& out_name) {
  SolveRequest request;
  request.profile = std::string(KAREUS_TEST_DATA_DIR) + "/plan/perseus_csv/valid.csv";
  request.stages = 2;
  request.microbatches = 4;
  request.out = fresh_dir(out_name);
  return request;
}

TEST(SolvePerseusProfile, WritesSortedFrontierWithValidPlans) {
  SolveRequest request = valid_request("valid");
  request.static_power_w = 30;
  const SolveSummary summary = solve_perseus_profile(request);
  const nlohmann::json frontier = read_json_file(request.out / "frontier.json");
  EXPECT_EQ(frontier["schema"], "kareus.frontier/1");
  // Exactly docs/formats.md's keys: the runtime's frontier reader rejects any other.
  EXPECT_EQ(frontier.size(), 2U);
  for (const auto& point : frontier["points"]) EXPECT_EQ(point.size(), 3U);
  ASSERT_EQ(frontier["points"].size(), summary.points.size());
  ASSERT_GE(summary.points.size(), 2U);
  // Fastest plan: stage 0's critical F0 and B3 at 1410 MHz; slack reclaimed elsewhere.
  const plan::Plan fastest = plan::read_plan(request.out / summary.points.front().plan);
  EXPECT_EQ(fastest.stages[0].instructions.front().freq_mhz, 1410);
  EXPECT_EQ(fastest.stages[0].instructions.back().freq_mhz, 1410);
  for (std::size_t index = 0; index + 1 < summary.points.size(); ++index) {
    EXPECT_LT(summary.points[index].time_s, summary.points[index + 1].time_s);
    EXPECT_GT(summary.points[index].energy_j, summary.points[index + 1].energy_j);
  }
  for (const plan::FrontierPoint& point : summary.points) {
    const plan::Plan solved = plan::read_plan(request.out / point.plan);  // validates schema and 1F1B order
    EXPECT_EQ(plan::microbatch_count(solved), 4);
    EXPECT_DOUBLE_EQ(solved.predicted_time_s, point.time_s);
    EXPECT_DOUBLE_EQ(solved.predicted_energy_j, point.energy_j);
  }
  // Fastest point by hand: stage 0: F 10 ms, B 20 ms at 1410; stage 1: F 11 ms, B 22 ms; the
  // critical path F(0,0), stage 1's 8 instructions, B(0,3): 0.010 + 4 x 0.033 + 0.020 = 0.162 s.
  // All at 1410 MHz: 74 J of work + 30 W x (2 x 0.162 - 0.252) s idle = 76.16 J. Moving three
  // slack forwards (-0.4 J, -0.06 J idle each) and one backward (-0.9 J, -0.12 J) to 1200 MHz
  // gives 73.76 J, which a brute force over all 256 stage-0 clock assignments confirms optimal.
  EXPECT_NEAR(summary.points.front().time_s, 0.162, 1e-12);
  EXPECT_NEAR(summary.points.front().energy_j, 76.16 - 3 * 0.46 - 1.02, 1e-9);
  EXPECT_FALSE(std::filesystem::exists(request.out / "frontier.json.tmp"));
}

TEST(SolvePerseusProfile, BoundIsBelowEveryPointAndTightAtTheFastest) {
  SolveRequest request = valid_request("bound");
  request.static_power_w = 30;
  request.bound = true;
  const SolveSummary summary = solve_perseus_profile(request);
  for (const plan::FrontierPoint& point : summary.points) {
    EXPECT_GT(point.lower_bound_energy_j, 0);
    EXPECT_LE(point.lower_bound_energy_j, point.energy_j + 1e-9);
  }
  // At 0.162 s the relaxation can do no better than the brute-force optimum of 73.76 J
  // (frontier above); the bound must not exceed it.
  EXPECT_LE(summary.points.front().lower_bound_energy_j, 73.76 + 1e-9);
  const nlohmann::json report = read_json_file(request.out / "solve.json");
  EXPECT_EQ(report["schema"], "kareus.solve/1");
  EXPECT_EQ(report["points"].size(), summary.points.size());
  EXPECT_DOUBLE_EQ(report["points"][0]["lower_bound_energy_j"].get<double>(),
                   summary.points.front().lower_bound_energy_j);
}

TEST(SolvePerseusProfile, MaxPointsKeepsEnds) {
  SolveRequest request = valid_request("max_points");
  request.max_points = 2;
  const SolveSummary summary = solve_perseus_profile(request);
  ASSERT_EQ(summary.points.size(), 2U);
  EXPECT_NEAR(summary.points.front().time_s, 0.162, 1e-12);
}

TEST(SolvePerseusProfile, RefinesACoarseUnitUnlessAskedNotTo) {
  // valid.csv's stage 0 forward options take 10 and 12 ms: at 10 ms both are one quantum, at
  // 1.25 ms they are 8 and 9 (the backward's 20 and 24 ms: 16 and 19).
  SolveRequest request = valid_request("refined_unit");
  request.unit_time_s = 0.01;
  EXPECT_DOUBLE_EQ(solve_perseus_profile(request).unit_time_s, 0.00125);
  EXPECT_DOUBLE_EQ(read_json_file(request.out / "solve.json")["unit_time_s"].get<double>(), 0.00125);
  request.refine_unit = false;
  EXPECT_DOUBLE_EQ(solve_perseus_profile(request).unit_time_s, 0.01);
  EXPECT_DOUBLE_EQ(read_json_file(request.out / "solve.json")["unit_time_s"].get<double>(), 0.01);
}

TEST(SolvePerseusProfile, BadInputFailsBeforeWriting) {
  SolveRequest request;
  request.profile = std::string(KAREUS_TEST_DATA_DIR) + "/plan/perseus_csv/missing_stage.csv";
  request.stages = 2;
  request.microbatches = 4;
  request.out = fresh_dir("bad");
  EXPECT_THROW((void)solve_perseus_profile(request), InputError);
  EXPECT_FALSE(std::filesystem::exists(request.out / "frontier.json"));
  request.profile = std::string(KAREUS_TEST_DATA_DIR) + "/plan/perseus_csv/valid.csv";
  request.unit_time_s = -1;
  EXPECT_THROW((void)solve_perseus_profile(request), InputError);
}

}  // namespace
}  // namespace kareus::planner
