// Our search strategy (search.h, steps 1-3): a maximin Latin design, batches by expected
// hypervolume improvement under Gaussian-process posteriors (Kriging believer), and a refinement
// pass near the measured fronts.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <utility>

#include "kareus/search/hypervolume_improvement.h"
#include "kareus/search/surrogate.h"
#include "search_internal.h"

namespace kareus::search {
namespace {

GaussianMarginal lognormal_marginal(const Prediction& prediction) {
  const double mean = std::exp(prediction.mean + 0.5 * prediction.variance);
  return {mean, mean * std::sqrt(std::expm1(prediction.variance))};
}

constexpr std::array<Objective, 2> kObjectives{Objective::kEnergy, Objective::kEffectiveEnergy};

// Our strategy: maximin design, EHVI batches (Kriging believer), refinement near the fronts.
class KareusStrategy {
 public:
  KareusStrategy(BatchEvaluator& evaluator, const partition::SearchSpace& space, const SearchOptions& options)
      : measured_(evaluator, space, options),
        space_(space),
        options_(options),
        static_power_w_(evaluator.static_power_w()),
        time_model_(GaussianProcessOptions{3, 200, options.seed}),
        energy_model_(GaussianProcessOptions{3, 200, options.seed + 1}) {
    features_.reserve(space.size());
    for (std::size_t index = 0; index < space.size(); ++index) features_.push_back(config_features(space, index));
  }

  SearchResult run() {
    const std::size_t budget = options_.budget;
    std::size_t initial = options_.initial_design;
    if (initial == 0) initial = std::max<std::size_t>(std::min<std::size_t>(budget, 8), (budget + 2) / 4);
    initial = std::min(initial, budget);
    measured_.measure(initial_design(initial));
    const auto reserve =
        static_cast<std::size_t>(std::lround(options_.refinement_fraction * static_cast<double>(budget)));
    const std::size_t refine_from = budget > reserve ? budget - reserve : 0;
    bool refining = false;
    StopReason stop = StopReason::kBudget;
    while (measured_.order().size() < budget && measured_.order().size() < space_.size()) {
      refining = refining || measured_.order().size() >= refine_from;
      const Objective objective = measured_.batches() % 2 == 0 ? Objective::kEnergy : Objective::kEffectiveEnergy;
      const std::vector<std::size_t> batch = choose_batch(objective, refining);
      if (batch.empty()) {
        if (!refining) {
          refining = true;  // the global gain is exhausted: look around the fronts
          continue;
        }
        stop = StopReason::kConverged;
        break;
      }
      measured_.measure(batch);
    }
    SearchResult result = measured_.finish(stop);
    result.surrogate_fits = fits_;
    return result;
  }

 private:
  // A maximin Latin design: in each of many seeded random Latin designs every feature's range
  // is cut into `count` strata with one point each (snapped to the nearest grid level), so
  // every CTA count region (and its knee) is sampled; the design whose closest pair is farthest
  // apart wins. Points that snap onto the same config are replaced greedily by the config
  // farthest from those chosen.
  std::vector<std::size_t> initial_design(std::size_t count) const {
    std::mt19937_64 random(options_.seed * 0x9e3779b97f4a7c15ULL + 17);
    const std::array<std::size_t, 3> levels{space_.clocks_mhz().size(), space_.ctas().size(), space_.slots().size()};
    // Feature value of each level of each dimension (config_features at one coordinate).
    std::array<std::vector<double>, 3> level_values;
    for (std::size_t level = 0; level < levels[0]; ++level)
      level_values[0].push_back(features_[space_.index_at({level, 0, 0})][0]);
    for (std::size_t level = 0; level < levels[1]; ++level)
      level_values[1].push_back(features_[space_.index_at({0, level, 0})][1]);
    for (std::size_t level = 0; level < levels[2]; ++level)
      level_values[2].push_back(features_[space_.index_at({0, 0, level})][2]);
    const auto nearest_level = [&](std::size_t dim, double value) {
      std::size_t best = 0;
      for (std::size_t level = 1; level < levels[dim]; ++level) {
        if (std::abs(level_values[dim][level] - value) < std::abs(level_values[dim][best] - value)) best = level;
      }
      return best;
    };
    const auto distance2 = [&](std::size_t a, std::size_t b) {
      double sum = 0;
      for (std::size_t feature = 0; feature < 3; ++feature) {
        const double delta = features_[a][feature] - features_[b][feature];
        sum += delta * delta;
      }
      return sum;
    };
    std::vector<std::size_t> best_design;
    double best_spread = -1;
    std::uniform_real_distribution<double> uniform(0, 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      std::array<std::vector<std::size_t>, 3> coordinates;
      for (std::size_t dim = 0; dim < 3; ++dim) {
        for (std::size_t stratum = 0; stratum < count; ++stratum) {
          const double position = (static_cast<double>(stratum) + uniform(random)) / static_cast<double>(count);
          coordinates[dim].push_back(nearest_level(dim, position));
        }
        std::shuffle(coordinates[dim].begin(), coordinates[dim].end(), random);
      }
      std::vector<std::size_t> design;
      std::vector<bool> used(space_.size(), false);
      for (std::size_t point = 0; point < count; ++point) {
        const std::size_t index =
            space_.index_at({coordinates[0][point], coordinates[1][point], coordinates[2][point]});
        if (!used[index]) design.push_back(index);
        used[index] = true;
      }
      double spread = std::numeric_limits<double>::infinity();
      for (std::size_t a = 0; a < design.size(); ++a) {
        for (std::size_t b = 0; b < a; ++b) spread = std::min(spread, distance2(design[a], design[b]));
      }
      // Fewer distinct points (collisions) lose to a full design.
      if (design.size() > best_design.size() || (design.size() == best_design.size() && spread > best_spread)) {
        best_design = std::move(design);
        best_spread = spread;
      }
    }
    std::vector<bool> taken(space_.size(), false);
    for (std::size_t index : best_design) taken[index] = true;
    while (best_design.size() < count) {
      std::size_t farthest = space_.size();
      double farthest_distance = -1;
      for (std::size_t index = 0; index < space_.size(); ++index) {
        if (taken[index]) continue;
        double nearest = std::numeric_limits<double>::infinity();
        for (std::size_t chosen : best_design) nearest = std::min(nearest, distance2(index, chosen));
        if (nearest > farthest_distance) {
          farthest_distance = nearest;
          farthest = index;
        }
      }
      best_design.push_back(farthest);
      taken[farthest] = true;
    }
    return best_design;
  }

  // Configs one step away from `index` in CTA count or slot, and in clock if `clocks`.
  std::vector<std::size_t> neighbours(std::size_t index, bool clocks) const {
    const auto [clock, cta, slot] = space_.coordinates(index);
    std::vector<std::size_t> result;
    const auto add = [&](std::size_t c, std::size_t t, std::size_t s) { result.push_back(space_.index_at({c, t, s})); };
    if (clocks && clock > 0) add(clock - 1, cta, slot);
    if (clocks && clock + 1 < space_.clocks_mhz().size()) add(clock + 1, cta, slot);
    if (cta > 0) add(clock, cta - 1, slot);
    if (cta + 1 < space_.ctas().size()) add(clock, cta + 1, slot);
    if (slot > 0) add(clock, cta, slot - 1);
    if (slot + 1 < space_.slots().size()) add(clock, cta, slot + 1);
    return result;
  }

  // The fronts the acquisition improves on are those of the posterior means at the measured
  // configs, not of the raw measurements: a measurement that noise made look good would
  // otherwise hide the region around it from the search.
  std::vector<Evaluation> believed_measurements(const std::vector<Evaluation>& measured,
                                                const FeatureRows& rows) const {
    std::vector<Evaluation> believed;
    const std::vector<Prediction> times = time_model_.predict(rows);
    const std::vector<Prediction> energies = energy_model_.predict(rows);
    for (std::size_t position = 0; position < rows.size(); ++position) {
      const double time_s = std::exp(times[position].mean);
      believed.push_back(
          {measured[position].config, time_s, std::exp(energies[position].mean) + static_power_w_ * time_s});
    }
    return believed;
  }

  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

  // Refinement is a local search around the measured front of the batch's objective that does
  // not trust the model's ranking across CTA counts and slots: a collective's time has a kink
  // where it stops being CTA-bound (the optimum often sits right there), which a smooth kernel
  // rounds off. The untried CTA/slot neighbours of the front point with the largest exclusive
  // hypervolume contribution come first (EHVI breaks ties); each pick halves that point's
  // weight so a batch spreads over the front. Clock neighbours (smooth, well modelled) only
  // when no CTA/slot neighbour is left.
  struct FrontNeighbourhood {
    std::vector<double> contribution;  // per point of the front
    std::vector<std::size_t> source;   // per config: the front point it neighbours, or kNone
  };

  FrontNeighbourhood front_neighbourhood(const std::vector<Evaluation>& measured, Objective objective,
                                         const ObjectivePoint& reference) const {
    FrontNeighbourhood near;
    const std::vector<Evaluation> front = pareto_front(measured, static_power_w_, objective);
    std::vector<ObjectivePoint> points;
    for (const Evaluation& point : front) {
      points.push_back(normalise(objective_point(point, static_power_w_, objective), reference));
    }
    const double total = hypervolume(points, {1, 1});
    for (std::size_t which = 0; which < points.size(); ++which) {
      std::vector<ObjectivePoint> without = points;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(which));
      near.contribution.push_back(total - hypervolume(without, {1, 1}));
    }
    near.source.assign(space_.size(), kNone);
    for (bool clocks : {false, true}) {
      bool any = false;
      for (std::size_t which = 0; which < front.size(); ++which) {
        for (std::size_t neighbour : neighbours(space_.index_of(front[which].config), clocks)) {
          if (measured_.evaluated()[neighbour]) continue;
          if (near.source[neighbour] == kNone || near.contribution[which] > near.contribution[near.source[neighbour]]) {
            near.source[neighbour] = which;
          }
          any = true;
        }
      }
      if (any) break;
    }
    return near;
  }

  // The position in `candidates` of the next config to measure, or candidates.size() when none
  // is worth it. Refining (`near` set), the best neighbour of the front (see
  // front_neighbourhood; its front point's weight is halved); otherwise the best EHVI of the
  // batch's objective, if some candidate's relative gain in either objective reaches
  // min_relative_gain.
  std::size_t pick_candidate(const std::vector<std::size_t>& candidates, const std::vector<Prediction>& times,
                             const std::vector<Prediction>& energies, const std::vector<Evaluation>& believed,
                             const std::array<ObjectivePoint, 2>& references, Objective batch_objective,
                             FrontNeighbourhood* near) const {
    std::array<std::optional<HypervolumeImprovement>, 2> improvements;
    for (std::size_t which = 0; which < 2; ++which) {
      std::vector<ObjectivePoint> points;
      for (const Evaluation& point : pareto_front(believed, static_power_w_, kObjectives[which])) {
        points.push_back(normalise(objective_point(point, static_power_w_, kObjectives[which]), references[which]));
      }
      improvements[which].emplace(points, ObjectivePoint{1, 1});
    }
    std::size_t best_global = candidates.size();
    std::size_t best_near = candidates.size();
    double best_global_score = -1;
    double best_near_score = -1;
    double best_near_weight = -1;
    double best_gain = 0;
    for (std::size_t position = 0; position < candidates.size(); ++position) {
      const GaussianMarginal time = lognormal_marginal(times[position]);
      const GaussianMarginal effective = lognormal_marginal(energies[position]);
      // E = E_eff + P t with independent parts: add means and variances.
      const GaussianMarginal energy{effective.mean + static_power_w_ * time.mean,
                                    std::hypot(effective.stddev, static_power_w_ * time.stddev)};
      std::array<double, 2> gains{};
      for (std::size_t which = 0; which < 2; ++which) {
        const ObjectivePoint& reference = references[which];
        const GaussianMarginal& second = which == 0 ? energy : effective;
        const double improvement = improvements[which]->expected_improvement(
            {time.mean / reference.time_s, time.stddev / reference.time_s},
            {second.mean / reference.energy_j, second.stddev / std::abs(reference.energy_j)});
        gains[which] = improvement / std::max(improvements[which]->hypervolume(), 1e-12);
      }
      const double gain = std::max(gains[0], gains[1]);
      best_gain = std::max(best_gain, gain);
      const double score = gains[batch_objective == Objective::kEnergy ? 0 : 1];
      if (score > best_global_score) {
        best_global_score = score;
        best_global = position;
      }
      const std::size_t source = near != nullptr ? near->source[candidates[position]] : kNone;
      if (source != kNone && (near->contribution[source] > best_near_weight ||
                              (near->contribution[source] == best_near_weight && score > best_near_score))) {
        best_near_weight = near->contribution[source];
        best_near_score = score;
        best_near = position;
      }
    }
    if (near != nullptr && best_near < candidates.size()) {
      near->contribution[near->source[candidates[best_near]]] *= 0.5;
      return best_near;
    }
    return best_gain >= options_.min_relative_gain ? best_global : candidates.size();
  }

  // The next batch from the measurements so far (measured_), or empty when
  // nothing promises a gain above the threshold (global phase) or, refining, when no neighbour
  // of the fronts is left and nothing else promises a gain.
  std::vector<std::size_t> choose_batch(Objective batch_objective, bool refining) {
    const std::vector<Evaluation>& measured = measured_.evaluations();
    // The batch appends its Kriging-believer fantasies to what the surrogates are fitted to.
    Observations observed = observe(features_, measured_);
    update_models(observed);
    std::array<ObjectivePoint, 2> references{};
    for (std::size_t which = 0; which < 2; ++which) {
      references[which] = reference_point(measured, static_power_w_, kObjectives[which]);
    }
    std::vector<Evaluation> believed = believed_measurements(measured, observed.rows);  // then the batch's fantasies
    std::optional<FrontNeighbourhood> near;
    if (refining) {
      near = front_neighbourhood(measured, batch_objective, references[batch_objective == Objective::kEnergy ? 0 : 1]);
    }

    std::vector<bool> taken = measured_.evaluated();
    std::vector<std::size_t> batch;
    while (batch.size() < options_.batch_size && measured_.order().size() + batch.size() < options_.budget) {
      std::vector<std::size_t> candidates;
      for (std::size_t index = 0; index < space_.size(); ++index) {
        if (!taken[index]) candidates.push_back(index);
      }
      if (candidates.empty()) break;
      FeatureRows candidate_rows;
      for (std::size_t index : candidates) candidate_rows.push_back(features_[index]);
      const std::vector<Prediction> times = time_model_.predict(candidate_rows);
      const std::vector<Prediction> energies = energy_model_.predict(candidate_rows);
      const std::size_t pick =
          pick_candidate(candidates, times, energies, believed, references, batch_objective, near ? &*near : nullptr);
      if (pick == candidates.size()) break;
      const std::size_t index = candidates[pick];
      batch.push_back(index);
      taken[index] = true;
      // Kriging believer: pretend the posterior mean was measured and condition on it.
      observed.rows.push_back(features_[index]);
      observed.log_times.push_back(times[pick].mean);
      observed.log_energies.push_back(energies[pick].mean);
      if (batch.size() < options_.batch_size) {
        time_model_.condition(observed.rows, observed.log_times);
        energy_model_.condition(observed.rows, observed.log_energies);
      }
      const double time_s = std::exp(times[pick].mean);
      believed.push_back({space_.at(index), time_s, std::exp(energies[pick].mean) + static_power_w_ * time_s});
    }
    return batch;
  }

  // Hyperparameter fits are the search's own cost: O(n^3) per likelihood evaluation, ~1,200 of
  // them per batch for the two GPs. Past options_.refit_every_batch_up_to measurements the
  // hyperparameters, which move little by then, are refitted once the measurements have grown by
  // a quarter since the last fit, and in between only conditioned on the new data (one
  // factorisation each).
  void update_models(const Observations& observed) {
    const std::size_t count = observed.rows.size();
    if (count <= options_.refit_every_batch_up_to || count >= fitted_at_ + fitted_at_ / 4) {
      time_model_.fit(observed.rows, observed.log_times);
      energy_model_.fit(observed.rows, observed.log_energies);
      fitted_at_ = count;
      ++fits_;
      return;
    }
    time_model_.condition(observed.rows, observed.log_times);
    energy_model_.condition(observed.rows, observed.log_energies);
  }

  static ObjectivePoint normalise(ObjectivePoint point, ObjectivePoint reference) {
    return {point.time_s / reference.time_s, point.energy_j / std::abs(reference.energy_j)};
  }

  MeasuredConfigs measured_;
  const partition::SearchSpace& space_;
  const SearchOptions& options_;
  double static_power_w_;
  FeatureRows features_;
  GaussianProcess time_model_;
  GaussianProcess energy_model_;
  std::size_t fitted_at_ = 0;  // measurements at the last hyperparameter fit
  std::size_t fits_ = 0;
};

}  // namespace

SearchResult run_kareus_strategy(BatchEvaluator& evaluator, const partition::SearchSpace& space,
                                 const SearchOptions& options) {
  return KareusStrategy(evaluator, space, options).run();
}

}  // namespace kareus::search
