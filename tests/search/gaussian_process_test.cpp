#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "kareus/search/surrogate.h"

namespace kareus::search {
namespace {

double known_function(const std::vector<double>& x) { return std::sin(3 * x[0]) + 0.5 * x[1] * x[1]; }

std::vector<double> known_targets(const FeatureRows& rows) {
  std::vector<double> targets;
  for (const std::vector<double>& row : rows) targets.push_back(known_function(row));
  return targets;
}

FeatureRows random_rows(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  FeatureRows rows(count);
  for (std::vector<double>& row : rows) row = {uniform(random), uniform(random), uniform(random)};
  return rows;
}

TEST(GaussianProcess, LearnsASmoothFunctionAndIgnoresAnIrrelevantFeature) {
  const FeatureRows train = random_rows(40, 1);
  const std::vector<double> targets = known_targets(train);
  GaussianProcess model;
  model.fit(train, targets);

  const FeatureRows test = random_rows(200, 2);
  const std::vector<Prediction> predictions = model.predict(test);
  double squared = 0;
  int covered = 0;
  for (std::size_t row = 0; row < test.size(); ++row) {
    const double error = predictions[row].mean - known_function(test[row]);
    squared += error * error;
    if (std::abs(error) <= 3 * std::sqrt(predictions[row].variance) + 1e-3) ++covered;
  }
  EXPECT_LT(std::sqrt(squared / test.size()), 0.02);  // the function spans ~1.5
  EXPECT_GE(covered, 180);                            // calibrated: ~all within 3 sigma

  const GaussianProcessHyperparameters parameters = model.hyperparameters();
  ASSERT_EQ(parameters.length_scales.size(), 3u);
  EXPECT_GT(parameters.length_scales[2], 3 * parameters.length_scales[0]);  // x2 does not matter
  EXPECT_LT(parameters.noise_variance, 1e-3);
  EXPECT_TRUE(std::isfinite(model.log_marginal_likelihood()));
}

TEST(GaussianProcess, VarianceIsSmallAtDataAndGrowsAway) {
  const FeatureRows train = {{0.0, 0.5, 0.5}, {0.2, 0.5, 0.5}, {0.4, 0.5, 0.5}, {0.6, 0.5, 0.5}};
  const std::vector<double> targets = known_targets(train);
  GaussianProcess model;
  model.fit(train, targets);
  const std::vector<Prediction> near = model.predict({{0.2, 0.5, 0.5}});
  const std::vector<Prediction> far = model.predict({{1.0, 0.5, 0.5}});
  EXPECT_NEAR(near[0].mean, known_function({0.2, 0.5, 0.5}), 0.02);
  EXPECT_LT(near[0].variance, far[0].variance / 10);
}

TEST(GaussianProcess, ConditionKeepsHyperparametersAndPassesThroughABelievedPoint) {
  const FeatureRows train = random_rows(20, 3);
  const std::vector<double> targets = known_targets(train);
  GaussianProcess model;
  model.fit(train, targets);
  const GaussianProcessHyperparameters before = model.hyperparameters();
  FeatureRows more = train;
  more.push_back({0.9, 0.9, 0.1});
  std::vector<double> more_targets = targets;
  more_targets.push_back(5.0);
  model.condition(more, more_targets);
  EXPECT_EQ(model.hyperparameters().length_scales, before.length_scales);
  EXPECT_GT(model.predict({{0.9, 0.9, 0.1}})[0].mean, 3.0);
}

TEST(GaussianProcess, SameDataGivesTheSameModel) {
  const FeatureRows train = random_rows(25, 4);
  const std::vector<double> targets = known_targets(train);
  GaussianProcess first(GaussianProcessOptions{3, 200, 9});
  GaussianProcess second(GaussianProcessOptions{3, 200, 9});
  first.fit(train, targets);
  second.fit(train, targets);
  EXPECT_EQ(first.predict({{0.3, 0.3, 0.3}})[0].mean, second.predict({{0.3, 0.3, 0.3}})[0].mean);
}

}  // namespace
}  // namespace kareus::search
