#include "kareus/planner/solve_job.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/plan/perseus_csv.h"
#include "kareus/plan/plan.h"

namespace kareus::planner {
namespace {

// A fresh folder of this test's own (mkdtemp), so parallel runs never share one; `out` inside it
// does not exist yet, as a user's --out need not.
std::filesystem::path fresh_dir(const std::string& name) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / ("kareus_solve_job_test_" + name + ".XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return std::filesystem::path(pattern) / "out";
}

/// The fastest option's time (s) and energy (J) of one stage's forward or backward.
plan::ProfileOption fastest_option(const std::vector<plan::ProfileOption>& options) {
  return *std::min_element(options.begin(), options.end(),
                           [](const auto& left, const auto& right) { return left.time_s < right.time_s; });
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
  // Fastest point from the profile: stage 1 (one clock) is the bottleneck, so the critical path
  // is F(0,0), stage 1's 4 forwards and 4 backwards, B(0,3), all at their fastest clocks
  // (valid.csv: 0.010 + 4 x 0.033 + 0.020 = 0.162 s).
  const plan::PerseusProfile profile = plan::read_perseus_csv(request.profile, 2);
  const plan::ProfileOption f0 = fastest_option(profile.stages[0].forward);
  const plan::ProfileOption b0 = fastest_option(profile.stages[0].backward);
  const plan::ProfileOption f1 = fastest_option(profile.stages[1].forward);
  const plan::ProfileOption b1 = fastest_option(profile.stages[1].backward);
  const double makespan_s = f0.time_s + 4 * (f1.time_s + b1.time_s) + b0.time_s;
  EXPECT_NEAR(summary.points.front().time_s, makespan_s, 1e-12);
  // Its energy: the least over every clock assignment of stage 0's 8 instructions (stage 1 has
  // one clock) that finishes by that makespan, each timed by 1F1B (pipeline's simulator) and
  // priced as the solver does: the instructions' energies + 30 W x (2 x makespan - busy time).
  const double idle_w = 30;
  double least_j = std::numeric_limits<double>::infinity();
  for (unsigned assignment = 0; assignment < 256; ++assignment) {
    const auto cost = [&](const pipeline::Instruction& instruction) {
      const bool forward = instruction.type == Direction::kForward;
      const plan::StageProfile& stage = profile.stages[instruction.stage];
      const std::vector<plan::ProfileOption>& options = forward ? stage.forward : stage.backward;
      const unsigned bit = (forward ? 0u : 4u) + static_cast<unsigned>(instruction.microbatch);
      const plan::ProfileOption option =
          instruction.stage == 0 ? options[(assignment >> bit) & 1u] : fastest_option(options);
      return pipeline::InstructionCost{option.time_s, option.energy_j};
    };
    const pipeline::IterationRun run = pipeline::simulate_one_f_one_b(2, 4, cost, idle_w, 1);
    if (run.time_s > makespan_s + 1e-12) continue;
    double energy_j = idle_w * 2 * makespan_s;
    for (const pipeline::StageRun& stage : run.stages) {
      energy_j -= idle_w * stage.busy_s;
      for (const pipeline::ScheduledInstruction& instruction : stage.instructions) energy_j += instruction.energy_j;
    }
    least_j = std::min(least_j, energy_j);
  }
  EXPECT_NEAR(summary.points.front().energy_j, least_j, 1e-9);
  for (const auto& entry : std::filesystem::directory_iterator(request.out)) {
    EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();  // no temporary left behind
  }
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
  // At the fastest makespan the relaxation can do no better than the optimum, which the
  // frontier's fastest point is (brute force above); the bound must not exceed it.
  EXPECT_LE(summary.points.front().lower_bound_energy_j, summary.points.front().energy_j + 1e-9);
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
  EXPECT_DOUBLE_EQ(summary.points.front().time_s,
                   solve_perseus_profile(valid_request("all_points")).points.front().time_s);
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
