#include "kareus/pipeline/operation.h"

#include <vector>

#include <gtest/gtest.h>

namespace kareus::pipeline {
namespace {

ExecutionOption option(double time_s, double effective_energy_j, int knob) {
  return {time_s, effective_energy_j, effective_energy_j, knob, 0};
}

TEST(ExecutionOption, EffectiveEnergySubtractsStaticPower) {
  const ExecutionOption made = make_execution_option(0.5, 100, 1410, 85);
  EXPECT_DOUBLE_EQ(made.effective_energy_j, 100 - 85 * 0.5);
  EXPECT_EQ(made.knob, 1410);
}

TEST(ExecutionOption, QuantizeFloorsRobustly) {
  EXPECT_EQ(quantize_time(0.003, 0.001), 3);  // 2.9999999999999996 units in double
  EXPECT_EQ(quantize_time(0.0039, 0.001), 3);
  EXPECT_EQ(quantize_time(0.0004, 0.001), 0);
  EXPECT_EQ(quantize_time(12.3456, 0.01), 1234);
}

TEST(CandidateExecutionOptions, FiltersDominatedAndPicksARepresentativePerQuantTime) {
  // quant times with unit 1: 2, 3, 3, 4, 5, 6
  const std::vector<ExecutionOption> raw = {option(4.2, 6, 40), option(2.0, 10, 20),  option(3.1, 9, 31),
                                            option(3.7, 7, 37), option(5.5, 6.5, 55), option(6.0, 5, 60)};
  const CandidateExecutionOptions fastest(raw, 1.0);
  // 5.5 (6.5) is dominated by 4.2 (6); every other option is Pareto-optimal and kept.
  std::vector<int> knobs;
  for (const ExecutionOption& kept : fastest.options()) knobs.push_back(kept.knob);
  EXPECT_EQ(knobs, (std::vector<int>{20, 31, 37, 40, 60}));
  // Quantum 3 holds 3.1 (cost 9) and 3.7 (cost 7): the faster represents it, or the cheaper.
  EXPECT_EQ(fastest.representatives(), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(CandidateExecutionOptions(raw, 1.0, QuantumRule::kCheapest).representatives(),
            (std::vector<int>{0, 2, 3, 4}));
  EXPECT_EQ(fastest.min_quant_time(), 2);
  EXPECT_EQ(fastest.max_quant_time(), 6);
  // A step between representatives, from a representative or from the option between them.
  EXPECT_EQ(fastest.faster_representative(3), 1);
  EXPECT_EQ(fastest.faster_representative(2), 1);
  // kCheapest's first representative is not the fastest option: below it, one option faster.
  EXPECT_EQ(
      CandidateExecutionOptions({option(1.2, 10, 1), option(1.6, 9, 2), option(2.5, 8, 3)}, 1.0, QuantumRule::kCheapest)
          .faster_representative(1),
      0);
}

TEST(CandidateExecutionOptions, SlowestOptionThatFits) {
  const CandidateExecutionOptions candidates({option(2, 10, 1), option(4, 6, 2), option(7, 5, 3)}, 1.0);
  EXPECT_EQ(candidates.knob_for(1), 1);  // nothing fits: the fastest
  EXPECT_EQ(candidates.knob_for(2), 1);
  EXPECT_EQ(candidates.knob_for(3), 1);
  EXPECT_EQ(candidates.knob_for(4), 2);
  EXPECT_EQ(candidates.knob_for(6), 2);
  EXPECT_EQ(candidates.knob_for(7), 3);
  EXPECT_EQ(candidates.knob_for(100), 3);
}

TEST(CandidateExecutionOptions, HullIsExactPiecewiseLinearLowerHull) {
  // (2,10) (3,9.5) (4,6) (7,5): (3,9.5) lies above the segment (2,10)-(4,6) and leaves the hull.
  const CandidateExecutionOptions candidates({option(2, 10, 1), option(3, 9.5, 2), option(4, 6, 3), option(7, 5, 4)},
                                             1.0);
  ASSERT_EQ(candidates.hull_vertices(), (std::vector<int>{0, 2, 3}));
  EXPECT_DOUBLE_EQ(candidates.hull_cost(2), 10);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(3), 8);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(4), 6);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(5), 6 - 1.0 / 3);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(7), 5);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(9), 5);  // clamped
  EXPECT_DOUBLE_EQ(candidates.hull_cost(0), 10);
}

TEST(CandidateExecutionOptions, HullCostIsTheSameBeyondTheTableSpan) {
  // The same options at a unit 10^4 times finer: 50,000 units from fastest to slowest, more
  // than a table holds, so the hull is searched instead of looked up.
  const double unit_s = 1e-4;
  const CandidateExecutionOptions candidates({option(2, 10, 1), option(3, 9.5, 2), option(4, 6, 3), option(7, 5, 4)},
                                             unit_s);
  ASSERT_GT(candidates.max_quant_time() - candidates.min_quant_time(), CandidateExecutionOptions::kMaxHullTable);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(30000), 8);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(40000), 6);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(50000), 6 - 1.0 / 3);
  EXPECT_DOUBLE_EQ(candidates.hull_cost(90000), 5);  // clamped
  EXPECT_DOUBLE_EQ(candidates.hull_cost(0), 10);
}

}  // namespace
}  // namespace kareus::pipeline
