#include "kareus/search/pareto.h"

#include <random>

#include <gtest/gtest.h>

#include "kareus/search/hypervolume_improvement.h"

namespace kareus::search {
namespace {

Evaluation at(double time_s, double energy_j, int freq_mhz = 1410) {
  return {{freq_mhz, 3, "norm_0"}, time_s, energy_j};
}

TEST(ParetoFront, KeepsNonDominatedSortedByTime) {
  const std::vector<Evaluation> points = {at(3, 1, 1), at(1, 5, 2), at(2, 2, 3), at(2, 3, 4), at(4, 1, 5), at(1, 5, 6)};
  const std::vector<Evaluation> front = pareto_front(points, 0, Objective::kEnergy);
  ASSERT_EQ(front.size(), 3u);
  EXPECT_EQ(front[0].config.freq_mhz, 2);  // the first of two equal points
  EXPECT_EQ(front[1].config.freq_mhz, 3);
  EXPECT_EQ(front[2].config.freq_mhz, 1);
}

TEST(ParetoFront, EffectiveEnergySubtractsStaticPower) {
  // E: (1, 10) dominates nothing; with P = 5, E_eff = (1, 5) and (2, 4): both on the front,
  // while on (t, E) the second, (2, 14), is dominated.
  const std::vector<Evaluation> points = {at(1, 10), at(2, 14)};
  EXPECT_EQ(pareto_front(points, 5, Objective::kEnergy).size(), 1u);
  EXPECT_EQ(pareto_front(points, 5, Objective::kEffectiveEnergy).size(), 2u);
  EXPECT_DOUBLE_EQ(objective_point(points[1], 5, Objective::kEffectiveEnergy).energy_j, 4);
}

TEST(Hypervolume, MatchesHandComputedStaircase) {
  // Points (1,3), (2,2), (3,1) under reference (4,4): 3*1 + 2*1 + 1*1 strips = 1*... by hand:
  // column [1,2): height 4-3 = 1; [2,3): 4-2 = 2; [3,4): 4-1 = 3 -> 6.
  EXPECT_DOUBLE_EQ(hypervolume({{1, 3}, {2, 2}, {3, 1}}, {4, 4}), 6);
  // Dominated and out-of-reference points add nothing.
  EXPECT_DOUBLE_EQ(hypervolume({{1, 3}, {2, 2}, {3, 1}, {3, 3}, {5, 0}, {0, 4}}, {4, 4}), 6);
  EXPECT_DOUBLE_EQ(hypervolume({}, {4, 4}), 0);
  EXPECT_DOUBLE_EQ(reference_point({at(2, 10), at(4, 5)}, 0, Objective::kEnergy).time_s, 4.4);
}

TEST(HypervolumeImprovement, ExactImprovementIsTheHypervolumeDifference) {
  const std::vector<ObjectivePoint> front = {{1, 3}, {2, 2}, {3, 1}};
  const ObjectivePoint reference{4, 4};
  const HypervolumeImprovement improvement(front, reference);
  EXPECT_DOUBLE_EQ(improvement.hypervolume(), 6);
  std::mt19937_64 random(1);
  std::uniform_real_distribution<double> uniform(-0.5, 4.5);
  for (int trial = 0; trial < 200; ++trial) {
    const ObjectivePoint point{uniform(random), uniform(random)};
    std::vector<ObjectivePoint> with = front;
    with.push_back(point);
    EXPECT_NEAR(improvement.improvement(point), hypervolume(with, reference) - 6, 1e-12);
  }
  // By hand: (1.5, 1.5) adds [1.5,2) x [1.5,3) + [2,3) x [1.5,2) = 0.75 + 0.5.
  EXPECT_DOUBLE_EQ(improvement.improvement({1.5, 1.5}), 1.25);
}

TEST(HypervolumeImprovement, ExpectedImprovementMatchesHandCaseAndKnownValues) {
  const HypervolumeImprovement empty({}, {1, 1});
  // Known point: the expectation is the exact improvement.
  EXPECT_DOUBLE_EQ(empty.expected_improvement({0.5, 0}, {0.25, 0}), 0.5 * 0.75);
  // Time N(1, 1) against reference 1 with known energy 0: E[(1 - Y)+] = sigma * phi(0) = 0.39894.
  EXPECT_NEAR(empty.expected_improvement({1, 1}, {0, 0}), 0.3989422804014327, 1e-12);
}

TEST(HypervolumeImprovement, ExpectedImprovementMatchesMonteCarlo) {
  const std::vector<ObjectivePoint> front = {{0.2, 0.9}, {0.4, 0.5}, {0.5, 0.45}, {0.8, 0.1}};
  const ObjectivePoint reference{1, 1};
  const HypervolumeImprovement improvement(front, reference);
  struct Case {
    GaussianMarginal time, energy;
  };
  const std::vector<Case> cases = {{{0.3, 0.1}, {0.4, 0.2}},
                                   {{0.9, 0.3}, {0.9, 0.3}},
                                   {{0.1, 0.02}, {0.1, 0.5}},
                                   {{0.6, 0.0}, {0.2, 0.1}},
                                   {{1.5, 0.4}, {-0.2, 0.05}}};
  std::mt19937_64 random(7);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "time " << c.time.mean << "+-" << c.time.stddev << ", energy " << c.energy.mean
                                    << "+-" << c.energy.stddev);
    std::normal_distribution<double> time(c.time.mean, std::max(c.time.stddev, 1e-300));
    std::normal_distribution<double> energy(c.energy.mean, std::max(c.energy.stddev, 1e-300));
    const int samples = 400000;
    double sum = 0;
    double sum2 = 0;
    for (int sample = 0; sample < samples; ++sample) {
      const double value = improvement.improvement({time(random), energy(random)});
      sum += value;
      sum2 += value * value;
    }
    const double mean = sum / samples;
    const double standard_error = std::sqrt((sum2 / samples - mean * mean) / samples);
    EXPECT_NEAR(improvement.expected_improvement(c.time, c.energy), mean, 4 * standard_error + 1e-9);
  }
}

}  // namespace
}  // namespace kareus::search
