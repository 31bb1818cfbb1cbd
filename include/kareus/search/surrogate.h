// kareus/search/surrogate.h - regression models of one objective over the knob space.
//
// The per-partition search (search.h) models log time and log effective energy over the
// normalised knob features (clock, CTA count, slot index, each in [0, 1]) and asks the model
// for a mean and a variance at every unevaluated config. GaussianProcess is the model of our
// search: a Matern 5/2 kernel with one length scale per feature (ARD), a signal and a noise
// variance, all chosen by maximising the log marginal likelihood (Rasmussen & Williams 2006,
// ch. 5) with a few Nelder-Mead restarts; targets are standardised. Fitting is O(n^3) per
// likelihood evaluation, prediction O(n^2) per point.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace kareus::search {

/// Points as rows; every row has the same number of features.
using FeatureRows = std::vector<std::vector<double>>;

struct Prediction {
  double mean = 0;
  double variance = 0;  ///< of the latent function (no measurement noise)
};

class Surrogate {
 public:
  virtual ~Surrogate() = default;
  /// Fits the model (hyperparameters included) to `targets` at `inputs` (same size, >= 1).
  virtual void fit(const FeatureRows& inputs, const std::vector<double>& targets) = 0;
  /// Conditions on new data with the hyperparameters of the last fit (Kriging believer).
  /// Before any fit() it fits.
  virtual void condition(const FeatureRows& inputs, const std::vector<double>& targets) = 0;
  [[nodiscard]] virtual std::vector<Prediction> predict(const FeatureRows& inputs) const = 0;
};

struct GaussianProcessOptions {
  int restarts = 3;           ///< Nelder-Mead starts: the previous optimum, a default, random ones
  int max_evaluations = 200;  ///< likelihood evaluations per start
  std::uint64_t seed = 0;     ///< of the random starts
};

/// Hyperparameters of the Gaussian process in the units of the standardised targets.
struct GaussianProcessHyperparameters {
  std::vector<double> length_scales;  ///< one per feature, in feature units
  double signal_variance = 1;
  double noise_variance = 1e-3;
};

class GaussianProcess final : public Surrogate {
 public:
  explicit GaussianProcess(GaussianProcessOptions options = {});
  ~GaussianProcess() override;
  GaussianProcess(GaussianProcess&&) noexcept;
  GaussianProcess& operator=(GaussianProcess&&) noexcept;

  void fit(const FeatureRows& inputs, const std::vector<double>& targets) override;
  void condition(const FeatureRows& inputs, const std::vector<double>& targets) override;
  [[nodiscard]] std::vector<Prediction> predict(const FeatureRows& inputs) const override;

  [[nodiscard]] GaussianProcessHyperparameters hyperparameters() const;
  /// Log marginal likelihood of the training data under the current hyperparameters.
  [[nodiscard]] double log_marginal_likelihood() const;

 private:
  struct State;
  GaussianProcessOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace kareus::search
