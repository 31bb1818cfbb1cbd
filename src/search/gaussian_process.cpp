#include "kareus/search/surrogate.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <random>

#include <Eigen/Cholesky>
#include <Eigen/Dense>

#include "kareus/common/nelder_mead.h"

namespace kareus::search {
namespace {

// Bounds of the log hyperparameters, in standardised-target and [0, 1]-feature units. The
// lower noise bound keeps the Cholesky factor well conditioned; the length-scale bounds
// exclude a kernel that interpolates every point independently or ignores a feature's range.
constexpr double kLogLengthMin = -3.5;  // 0.03
constexpr double kLogLengthMax = 3.0;   // 20
constexpr double kLogSignalMin = -3.0;
constexpr double kLogSignalMax = 3.0;
constexpr double kLogNoiseMin = -13.8;  // 1e-6
constexpr double kLogNoiseMax = -0.7;   // 0.5
constexpr double kJitter = 1e-9;
constexpr double kLikelihoodTolerance = 1e-8;  // simplex spread of the negative log likelihood at which a fit stops

}  // namespace

struct GaussianProcess::State {
  Eigen::MatrixXd inputs;   // n x d
  Eigen::VectorXd targets;  // standardised
  double target_mean = 0;
  double target_scale = 1;
  // log length scales (d), log signal variance, log noise variance.
  Eigen::VectorXd log_parameters;
  Eigen::LLT<Eigen::MatrixXd> factor;
  Eigen::VectorXd alpha;
  double log_likelihood = 0;
  bool fitted = false;

  [[nodiscard]] std::size_t dims() const { return static_cast<std::size_t>(inputs.cols()); }

  // Squared scaled distances between rows of a and b under `parameters`' length scales.
  static Eigen::MatrixXd squared_distances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                                           const Eigen::VectorXd& parameters) {
    const Eigen::RowVectorXd inverse_length = (-parameters.head(a.cols())).array().exp().transpose();
    const Eigen::MatrixXd scaled_a = a.array().rowwise() * inverse_length.array();
    const Eigen::MatrixXd scaled_b = b.array().rowwise() * inverse_length.array();
    Eigen::MatrixXd squared = (-2.0 * scaled_a * scaled_b.transpose()).eval();
    squared.colwise() += scaled_a.rowwise().squaredNorm();
    squared.rowwise() += scaled_b.rowwise().squaredNorm().transpose();
    return squared;
  }

  // Matern 5/2 of a squared scaled distance, times the signal variance.
  static auto matern(double signal) {
    return [signal](double r2) {
      const double root5 = std::sqrt(5.0);
      const double r = std::sqrt(std::max(r2, 0.0));
      return signal * (1 + root5 * r + 5.0 / 3.0 * r * r) * std::exp(-root5 * r);
    };
  }

  // Matern 5/2 between rows of a and b under `parameters`.
  static Eigen::MatrixXd kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const Eigen::VectorXd& parameters) {
    return squared_distances(a, b, parameters).unaryExpr(matern(std::exp(parameters(a.cols()))));
  }

  // Factorises the training covariance under `parameters`; returns the log marginal
  // likelihood, or -inf if the matrix is not positive definite.
  double factorise(const Eigen::VectorXd& parameters, Eigen::LLT<Eigen::MatrixXd>& llt,
                   Eigen::VectorXd& weights) const {
    const Eigen::Index n = inputs.rows();
    // The Cholesky factorisation reads the lower triangle only, so only it is evaluated (the
    // kernel's exponentials are most of a fit's work); the upper one is left as it comes.
    Eigen::MatrixXd covariance = squared_distances(inputs, inputs, parameters);
    covariance.triangularView<Eigen::Lower>() = covariance.unaryExpr(matern(std::exp(parameters(inputs.cols()))));
    covariance.diagonal().array() += std::exp(parameters(parameters.size() - 1)) + kJitter;
    llt.compute(covariance);
    if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
    weights = llt.solve(targets);
    const double log_determinant = 2 * llt.matrixLLT().diagonal().array().log().sum();
    return -0.5 * targets.dot(weights) - 0.5 * log_determinant -
           0.5 * static_cast<double>(n) * std::log(2 * std::numbers::pi);
  }

  void set_data(const FeatureRows& rows, const std::vector<double>& values) {
    assert(!rows.empty() && rows.size() == values.size() && "GaussianProcess needs matching, non-empty data");
    const std::size_t dims = rows.front().size();
    inputs.resize(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(dims));
    for (std::size_t row = 0; row < rows.size(); ++row) {
      assert(rows[row].size() == dims && "every row needs the same features");
      for (std::size_t feature = 0; feature < dims; ++feature) {
        inputs(static_cast<Eigen::Index>(row), static_cast<Eigen::Index>(feature)) = rows[row][feature];
      }
    }
    targets.resize(static_cast<Eigen::Index>(values.size()));
    for (std::size_t row = 0; row < values.size(); ++row) {
      targets(static_cast<Eigen::Index>(row)) = (values[row] - target_mean) / target_scale;
    }
  }
};

GaussianProcess::GaussianProcess(GaussianProcessOptions options)
    : options_(options), state_(std::make_unique<State>()) {}
GaussianProcess::~GaussianProcess() = default;
GaussianProcess::GaussianProcess(GaussianProcess&&) noexcept = default;
GaussianProcess& GaussianProcess::operator=(GaussianProcess&&) noexcept = default;

void GaussianProcess::fit(const FeatureRows& inputs, const std::vector<double>& targets) {
  State& state = *state_;
  double mean = 0;
  for (double value : targets) mean += value;
  mean /= static_cast<double>(targets.size());
  double variance = 0;
  for (double value : targets) variance += (value - mean) * (value - mean);
  variance /= static_cast<double>(targets.size());
  state.target_mean = mean;
  state.target_scale = variance > 1e-24 ? std::sqrt(variance) : 1.0;
  state.set_data(inputs, targets);

  const Eigen::Index dims = state.inputs.cols();
  const Eigen::Index count = dims + 2;
  Eigen::VectorXd lower(count), upper(count);
  lower.head(dims).setConstant(kLogLengthMin);
  upper.head(dims).setConstant(kLogLengthMax);
  lower(dims) = kLogSignalMin;
  upper(dims) = kLogSignalMax;
  lower(dims + 1) = kLogNoiseMin;
  upper(dims + 1) = kLogNoiseMax;

  // Negative log likelihood at the point clamped into the box, plus a quadratic penalty for
  // the distance outside it, so the simplex is pulled back in.
  Eigen::LLT<Eigen::MatrixXd> scratch;
  Eigen::VectorXd weights;
  const auto objective = [&](const std::vector<double>& point) {
    Eigen::VectorXd parameters(count);
    double penalty = 0;
    for (Eigen::Index index = 0; index < count; ++index) {
      const double value = point[static_cast<std::size_t>(index)];
      const double clamped = std::clamp(value, lower(index), upper(index));
      penalty += (value - clamped) * (value - clamped);
      parameters(index) = clamped;
    }
    const double likelihood = state.factorise(parameters, scratch, weights);
    if (!std::isfinite(likelihood)) return 1e30;
    return -likelihood + 10 * penalty;
  };

  std::vector<std::vector<double>> starts;
  if (state.fitted && state.log_parameters.size() == count) {
    starts.emplace_back(state.log_parameters.data(), state.log_parameters.data() + count);
  }
  std::vector<double> default_start(static_cast<std::size_t>(count), std::log(0.5));
  default_start[static_cast<std::size_t>(dims)] = 0;
  default_start[static_cast<std::size_t>(dims + 1)] = std::log(1e-3);
  starts.push_back(default_start);
  std::mt19937_64 random(options_.seed ^ (static_cast<std::uint64_t>(targets.size()) * 0x9e3779b97f4a7c15ULL));
  while (static_cast<int>(starts.size()) < std::max(1, options_.restarts)) {
    std::vector<double> start(static_cast<std::size_t>(count));
    for (Eigen::Index index = 0; index < count; ++index) {
      std::uniform_real_distribution<double> uniform(lower(index), upper(index));
      start[static_cast<std::size_t>(index)] = uniform(random);
    }
    start[static_cast<std::size_t>(dims + 1)] = std::min(start[static_cast<std::size_t>(dims + 1)], std::log(0.05));
    starts.push_back(std::move(start));
  }

  std::vector<double> best;
  double best_value = std::numeric_limits<double>::infinity();
  for (const std::vector<double>& start : starts) {
    int evaluations = 0;
    std::vector<double> point =
        kareus::nelder_mead(objective, start, 0.5, options_.max_evaluations, kLikelihoodTolerance, evaluations);
    const double value = objective(point);
    if (value < best_value) {
      best_value = value;
      best = std::move(point);
    }
  }
  state.log_parameters.resize(count);
  for (Eigen::Index index = 0; index < count; ++index) {
    state.log_parameters(index) = std::clamp(best[static_cast<std::size_t>(index)], lower(index), upper(index));
  }
  state.log_likelihood = state.factorise(state.log_parameters, state.factor, state.alpha);
  if (!std::isfinite(state.log_likelihood)) {
    // Only reachable with duplicated inputs and the smallest noise: fall back to more noise.
    state.log_parameters(dims + 1) = kLogNoiseMax;
    state.log_likelihood = state.factorise(state.log_parameters, state.factor, state.alpha);
  }
  state.fitted = true;
}

void GaussianProcess::condition(const FeatureRows& inputs, const std::vector<double>& targets) {
  if (!state_->fitted) {
    fit(inputs, targets);
    return;
  }
  State& state = *state_;
  state.set_data(inputs, targets);
  state.log_likelihood = state.factorise(state.log_parameters, state.factor, state.alpha);
  if (!std::isfinite(state.log_likelihood)) {
    state.log_parameters(state.log_parameters.size() - 1) = kLogNoiseMax;
    state.log_likelihood = state.factorise(state.log_parameters, state.factor, state.alpha);
  }
}

std::vector<Prediction> GaussianProcess::predict(const FeatureRows& inputs) const {
  const State& state = *state_;
  assert(state.fitted && "predict before fit");
  std::vector<Prediction> predictions(inputs.size());
  if (inputs.empty()) return predictions;
  Eigen::MatrixXd points(static_cast<Eigen::Index>(inputs.size()), state.inputs.cols());
  for (std::size_t row = 0; row < inputs.size(); ++row) {
    for (Eigen::Index feature = 0; feature < state.inputs.cols(); ++feature) {
      points(static_cast<Eigen::Index>(row), feature) = inputs[row][static_cast<std::size_t>(feature)];
    }
  }
  const Eigen::MatrixXd cross = State::kernel(points, state.inputs, state.log_parameters);  // m x n
  const Eigen::VectorXd means = cross * state.alpha;
  const Eigen::MatrixXd solved = state.factor.matrixL().solve(cross.transpose());  // n x m
  const double signal = std::exp(state.log_parameters(state.inputs.cols()));
  const double scale2 = state.target_scale * state.target_scale;
  for (std::size_t row = 0; row < inputs.size(); ++row) {
    const auto column = static_cast<Eigen::Index>(row);
    predictions[row].mean = state.target_mean + state.target_scale * means(column);
    predictions[row].variance = std::max(signal - solved.col(column).squaredNorm(), 1e-12) * scale2;
  }
  return predictions;
}

GaussianProcessHyperparameters GaussianProcess::hyperparameters() const {
  const State& state = *state_;
  GaussianProcessHyperparameters result;
  const Eigen::Index dims = state.inputs.cols();
  for (Eigen::Index index = 0; index < dims; ++index)
    result.length_scales.push_back(std::exp(state.log_parameters(index)));
  result.signal_variance = std::exp(state.log_parameters(dims));
  result.noise_variance = std::exp(state.log_parameters(dims + 1));
  return result;
}

double GaussianProcess::log_marginal_likelihood() const { return state_->log_likelihood; }

}  // namespace kareus::search
