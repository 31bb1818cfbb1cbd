// The artifact's search strategy (docs/kareus.md section 4), as a baseline for ours. Its
// surrogate is a 5-member bootstrap ensemble of gradient-boosted regression trees; we seed
// every random choice so the baseline is reproducible (the artifact is not).
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>

#include "kareus/search/hypervolume_improvement.h"
#include "kareus/search/surrogate.h"
#include "search_internal.h"

namespace kareus::search {
namespace {

constexpr int kTreeDepth = 3;
constexpr int kBoostingRounds = 60;
constexpr double kLearningRate = 0.1;
constexpr std::size_t kMinLeafSamples = 2;
constexpr int kEnsembleMembers = 5;

struct TreeNode {
  int feature = -1;  // -1: leaf
  double threshold = 0;
  double value = 0;
  int left = -1;
  int right = -1;
};

// A least-squares regression tree (CART) of bounded depth.
class RegressionTree {
 public:
  void fit(const FeatureRows& rows, const std::vector<double>& targets, std::vector<std::size_t> samples) {
    nodes_.clear();
    build(rows, targets, samples, 0);
  }

  [[nodiscard]] double predict(const std::vector<double>& row) const {
    int node = 0;
    while (nodes_[static_cast<std::size_t>(node)].feature >= 0) {
      const TreeNode& split = nodes_[static_cast<std::size_t>(node)];
      node = row[static_cast<std::size_t>(split.feature)] <= split.threshold ? split.left : split.right;
    }
    return nodes_[static_cast<std::size_t>(node)].value;
  }

 private:
  int build(const FeatureRows& rows, const std::vector<double>& targets, std::vector<std::size_t>& samples, int depth) {
    const int node = static_cast<int>(nodes_.size());
    nodes_.emplace_back();
    double sum = 0;
    for (std::size_t sample : samples) sum += targets[sample];
    nodes_.back().value = sum / static_cast<double>(samples.size());
    if (depth >= kTreeDepth || samples.size() < 2 * kMinLeafSamples) return node;

    double best_gain = 1e-12;
    int best_feature = -1;
    double best_threshold = 0;
    const double total = sum;
    const double count = static_cast<double>(samples.size());
    for (std::size_t feature = 0; feature < rows.front().size(); ++feature) {
      std::sort(samples.begin(), samples.end(),
                [&](std::size_t a, std::size_t b) { return rows[a][feature] < rows[b][feature]; });
      double left_sum = 0;
      for (std::size_t split = 1; split < samples.size(); ++split) {
        left_sum += targets[samples[split - 1]];
        const double left_value = rows[samples[split - 1]][feature];
        const double right_value = rows[samples[split]][feature];
        if (left_value == right_value || split < kMinLeafSamples || samples.size() - split < kMinLeafSamples) continue;
        const double left_count = static_cast<double>(split);
        // Reduction of the squared error = sum_l^2/n_l + sum_r^2/n_r - sum^2/n.
        const double gain = left_sum * left_sum / left_count +
                            (total - left_sum) * (total - left_sum) / (count - left_count) - total * total / count;
        if (gain > best_gain) {
          best_gain = gain;
          best_feature = static_cast<int>(feature);
          best_threshold = 0.5 * (left_value + right_value);
        }
      }
    }
    if (best_feature < 0) return node;
    std::vector<std::size_t> left;
    std::vector<std::size_t> right;
    for (std::size_t sample : samples) {
      (rows[sample][static_cast<std::size_t>(best_feature)] <= best_threshold ? left : right).push_back(sample);
    }
    const int left_node = build(rows, targets, left, depth + 1);
    const int right_node = build(rows, targets, right, depth + 1);
    TreeNode& self = nodes_[static_cast<std::size_t>(node)];
    self.feature = best_feature;
    self.threshold = best_threshold;
    self.left = left_node;
    self.right = right_node;
    return node;
  }

  std::vector<TreeNode> nodes_;
};

class BoostedTrees {
 public:
  void fit(const FeatureRows& rows, const std::vector<double>& targets, const std::vector<std::size_t>& samples) {
    base_ = 0;
    for (std::size_t sample : samples) base_ += targets[sample];
    base_ /= static_cast<double>(samples.size());
    std::vector<double> prediction(rows.size(), base_);
    std::vector<double> residuals(rows.size(), 0.0);
    trees_.assign(kBoostingRounds, {});
    for (RegressionTree& tree : trees_) {
      for (std::size_t sample : samples) residuals[sample] = targets[sample] - prediction[sample];
      tree.fit(rows, residuals, samples);
      for (std::size_t sample : samples) prediction[sample] += kLearningRate * tree.predict(rows[sample]);
    }
  }

  [[nodiscard]] double predict(const std::vector<double>& row) const {
    double value = base_;
    for (const RegressionTree& tree : trees_) value += kLearningRate * tree.predict(row);
    return value;
  }

 private:
  double base_ = 0;
  std::vector<RegressionTree> trees_;
};

// Mean and spread over a bootstrap ensemble.
class BootstrapEnsemble final : public Surrogate {
 public:
  explicit BootstrapEnsemble(std::uint64_t seed) : random_(seed) {}

  void fit(const FeatureRows& inputs, const std::vector<double>& targets) override {
    members_.assign(kEnsembleMembers, {});
    std::uniform_int_distribution<std::size_t> pick(0, inputs.size() - 1);
    for (BoostedTrees& member : members_) {
      std::vector<std::size_t> samples(inputs.size());
      for (std::size_t& sample : samples) sample = pick(random_);
      member.fit(inputs, targets, samples);
    }
  }
  void condition(const FeatureRows& inputs, const std::vector<double>& targets) override { fit(inputs, targets); }

  [[nodiscard]] std::vector<Prediction> predict(const FeatureRows& inputs) const override {
    std::vector<Prediction> predictions;
    for (const std::vector<double>& row : inputs) {
      double sum = 0;
      double sum2 = 0;
      for (const BoostedTrees& member : members_) {
        const double value = member.predict(row);
        sum += value;
        sum2 += value * value;
      }
      const double mean = sum / kEnsembleMembers;
      predictions.push_back({mean, std::max(0.0, sum2 / kEnsembleMembers - mean * mean)});
    }
    return predictions;
  }

 private:
  std::mt19937_64 random_;
  std::vector<BoostedTrees> members_;
};

// The artifact's four scores of each candidate, from the surrogates' predictions of log t and
// log E_eff: hypervolume improvement on (t, E) and on (t, E_eff) over everything measured,
// speed, and uncertainty.
struct CandidateScores {
  std::vector<double> energy;
  std::vector<double> effective;
  std::vector<double> speed;
  std::vector<double> uncertainty;
};

CandidateScores artifact_scores(const std::vector<Prediction>& times, const std::vector<Prediction>& energies,
                                const std::vector<Evaluation>& evaluations, double static_power_w) {
  const auto gain_over_measured = [&](Objective objective) {
    std::vector<ObjectivePoint> points;
    for (const Evaluation& e : evaluations) points.push_back(objective_point(e, static_power_w, objective));
    return HypervolumeImprovement(points, reference_point(evaluations, static_power_w, objective));
  };
  const HypervolumeImprovement energy_gain = gain_over_measured(Objective::kEnergy);
  const HypervolumeImprovement effective_gain = gain_over_measured(Objective::kEffectiveEnergy);
  CandidateScores scores;
  for (std::size_t position = 0; position < times.size(); ++position) {
    const double time_s = std::exp(times[position].mean);
    const double effective_j = std::exp(energies[position].mean);
    scores.energy.push_back(energy_gain.improvement({time_s, effective_j + static_power_w * time_s}));
    scores.effective.push_back(effective_gain.improvement({time_s, effective_j}));
    scores.speed.push_back(-time_s);
    scores.uncertainty.push_back(std::sqrt(times[position].variance) + std::sqrt(energies[position].variance));
  }
  return scores;
}

// A batch of `batch_size` candidates split 40/20/20/20 between the best of each score, in that
// order, each candidate taken once.
std::vector<std::size_t> quota_batch(const std::vector<std::size_t>& candidates, const CandidateScores& scores,
                                     std::size_t batch_size) {
  const auto share = [&](double fraction) {
    return static_cast<std::size_t>(std::lround(fraction * static_cast<double>(batch_size)));
  };
  const std::size_t by_energy = share(0.4);
  const std::size_t by_effective = share(0.2);
  const std::size_t by_speed = share(0.2);
  const std::array<std::pair<const std::vector<double>*, std::size_t>, 4> quotas{
      {{&scores.energy, by_energy},
       {&scores.effective, by_effective},
       {&scores.speed, by_speed},
       {&scores.uncertainty, batch_size - std::min(batch_size, by_energy + by_effective + by_speed)}}};
  std::vector<bool> chosen(candidates.size(), false);
  std::vector<std::size_t> batch;
  for (const auto& [ranked_by, quota] : quotas) {
    std::vector<std::size_t> ranking(candidates.size());
    std::iota(ranking.begin(), ranking.end(), 0);
    std::stable_sort(ranking.begin(), ranking.end(),
                     [&](std::size_t a, std::size_t b) { return (*ranked_by)[a] > (*ranked_by)[b]; });
    std::size_t taken = 0;
    for (std::size_t position : ranking) {
      if (taken == quota || batch.size() == batch_size) break;
      if (chosen[position]) continue;
      chosen[position] = true;
      batch.push_back(candidates[position]);
      ++taken;
    }
  }
  return batch;
}

}  // namespace

SearchResult run_artifact_strategy(BatchEvaluator& evaluator, const partition::SearchSpace& space,
                                   const SearchOptions& options) {
  const double static_power_w = evaluator.static_power_w();
  std::mt19937_64 random(options.seed * 0x9e3779b97f4a7c15ULL + 3);
  FeatureRows features;
  for (std::size_t index = 0; index < space.size(); ++index) features.push_back(config_features(space, index));
  MeasuredConfigs measured(evaluator, space, options);

  // The artifact's budgets put 43% (96 of 224, 48 of 112) into the random design and the rest
  // into four equal batches.
  const std::size_t budget = options.budget;
  const std::size_t initial =
      budget < 8 ? budget : static_cast<std::size_t>(std::lround(0.43 * static_cast<double>(budget)));
  std::vector<std::size_t> shuffled(space.size());
  std::iota(shuffled.begin(), shuffled.end(), 0);
  std::shuffle(shuffled.begin(), shuffled.end(), random);
  measured.measure(std::vector<std::size_t>(shuffled.begin(), shuffled.begin() + static_cast<std::ptrdiff_t>(initial)));

  BootstrapEnsemble time_model(options.seed * 31 + 1);
  BootstrapEnsemble energy_model(options.seed * 31 + 2);
  const std::size_t rounds = 4;
  for (std::size_t round = 0; round < rounds && measured.order().size() < budget; ++round) {
    const std::size_t batch_size = (budget - measured.order().size() + (rounds - round) - 1) / (rounds - round);
    const Observations observed = observe(features, measured);
    time_model.fit(observed.rows, observed.log_times);
    energy_model.fit(observed.rows, observed.log_energies);
    std::vector<std::size_t> candidates;
    FeatureRows candidate_rows;
    for (std::size_t index = 0; index < space.size(); ++index) {
      if (measured.evaluated()[index]) continue;
      candidates.push_back(index);
      candidate_rows.push_back(features[index]);
    }
    const std::vector<Prediction> times = time_model.predict(candidate_rows);
    const std::vector<Prediction> energies = energy_model.predict(candidate_rows);
    const std::vector<std::size_t> batch =
        quota_batch(candidates, artifact_scores(times, energies, measured.evaluations(), static_power_w), batch_size);
    if (batch.empty()) break;
    measured.measure(batch);
  }
  return measured.finish(StopReason::kBudget);
}

}  // namespace kareus::search
