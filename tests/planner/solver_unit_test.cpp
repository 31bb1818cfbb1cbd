#include "kareus/planner/solver_unit.h"

#include <vector>

#include <gtest/gtest.h>

namespace kareus::planner {
namespace {

// One stage whose forward has `times_ms` options and whose backward is one option.
pipeline::OneFOneBConfig one_stage(const std::vector<double>& times_ms, double unit_time_s) {
  pipeline::OneFOneBConfig config;
  config.unit_time_s = unit_time_s;
  pipeline::StageOptions stage;
  for (const double time_ms : times_ms) stage.forward.push_back({time_ms * 1e-3, 1.0, 0, 1410, 0});
  stage.backward.push_back({0.2, 2.0, 0, 1410, 0});
  config.stages.push_back(stage);
  return config;
}

TEST(SolverUnit, HalvesUntilTheOptionsHaveTheirOwnQuantizedTimes) {
  // Ten options 0.3 ms apart from 100 ms: at 2, 1 and 0.5 ms they fall into 2, 3 and 6 quanta;
  // at 0.25 ms into 10, at least the 8 wanted.
  std::vector<double> times_ms;
  for (int k = 0; k < 10; ++k) times_ms.push_back(100 + 0.3 * k);
  EXPECT_DOUBLE_EQ(solver_unit_time_s(one_stage(times_ms, 0.002), 1.0, 16), 0.00025);
  // Three options want three quanta: 100, 100.6, 101.2 ms share 50 at 2 ms and take 100, 100,
  // 101 at 1 ms, 200, 201, 202 at 0.5 ms.
  EXPECT_DOUBLE_EQ(solver_unit_time_s(one_stage({100, 100.6, 101.2}, 0.002), 1.0, 16), 0.0005);
  // Options already apart, or equal in time, keep the unit.
  EXPECT_DOUBLE_EQ(solver_unit_time_s(one_stage({100, 110, 120}, 0.002), 1.0, 16), 0.002);
  EXPECT_DOUBLE_EQ(solver_unit_time_s(one_stage({100, 100, 100}, 0.002), 1.0, 16), 0.002);
  // At most 16x finer.
  EXPECT_DOUBLE_EQ(solver_unit_time_s(one_stage({100, 100.001, 100.002}, 0.002), 1.0, 16), 0.002 / 16);
}

TEST(SolverUnit, StaysWithinTheRefinedSolvesBudget) {
  std::vector<double> times_ms;
  for (int k = 0; k < 10; ++k) times_ms.push_back(100 + 0.3 * k);
  // 30 s of range at 2 ms is 15000 units; 1 ms would be 30000, beyond kMaxRefinedUnits.
  EXPECT_DOUBLE_EQ(solver_unit_time_s(one_stage(times_ms, 0.002), 30.0, 16), 0.002);
  // 1000 operations over 3 s: 1 ms would be 3001 x 1000 operation-iterations, beyond kMaxRefinedWork.
  EXPECT_DOUBLE_EQ(solver_unit_time_s(one_stage(times_ms, 0.002), 3.0, 1000), 0.002);
  // 1.5 s over 1000: 1 ms (1501 x 1000) fits, 0.5 ms does not.
  EXPECT_DOUBLE_EQ(solver_unit_time_s(one_stage(times_ms, 0.002), 1.5, 1000), 0.001);
}

}  // namespace
}  // namespace kareus::planner
