#include "kareus/search/search.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/device/emulator.h"
#include "kareus/search/hypervolume_improvement.h"
#include "kareus/search/surrogate.h"
#include "search_internal.h"

namespace kareus::search {

Strategy parse_strategy(const std::string& text) {
  if (text == "kareus") return Strategy::kKareus;
  if (text == "artifact") return Strategy::kArtifact;
  throw InputError(fmt::format("--strategy {}: expected \"kareus\" or \"artifact\"", text));
}

std::string_view to_string(Strategy strategy) { return strategy == Strategy::kKareus ? "kareus" : "artifact"; }

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kBudget:
      return "budget";
    case StopReason::kConverged:
      return "converged";
    case StopReason::kSpaceExhausted:
      return "space_exhausted";
  }
  return "unknown";
}

std::vector<double> config_features(const partition::SearchSpace& space, std::size_t index) {
  const partition::KnobConfig config = space.at(index);
  const auto scale = [](double value, double low, double high) {
    return high > low ? (value - low) / (high - low) : 0.5;
  };
  const std::vector<int>& clocks = space.clocks_mhz();
  const std::vector<int>& ctas = space.ctas();
  const auto [clock_low, clock_high] = std::minmax_element(clocks.begin(), clocks.end());
  const auto [cta_low, cta_high] = std::minmax_element(ctas.begin(), ctas.end());
  // CTA counts on a log scale: a collective's time goes as 1/CTAs up to its knee, so 1 -> 2 CTAs
  // matters as much as 10 -> 20. (ctas is 0 only for a partition without a collective: one value.)
  const auto log_ctas = [](int value) { return std::log(std::max(value, 1)); };
  const std::size_t slot = space.coordinates(index).slot;
  return {scale(config.freq_mhz, *clock_low, *clock_high),
          scale(log_ctas(config.ctas), log_ctas(*cta_low), log_ctas(*cta_high)),
          scale(static_cast<double>(slot), 0, static_cast<double>(space.slots().size() - 1))};
}

BatchEvaluator::BatchEvaluator(std::span<device::Device* const> devices, const partition::Partition& partition,
                               const SearchOptions& options)
    : devices_(devices), partition_(partition) {
  if (devices_.empty()) throw InputError("the search needs at least one device");
  const device::Device& first = *devices_.front();
  for (const device::Device* device : devices_) {
    if (device->gpu().name != first.gpu().name || device->kind() != first.kind()) {
      throw InputError(fmt::format("every device of a search must be the same: {} {} and {} {}", first.kind(),
                                   first.gpu().name, device->kind(), device->gpu().name));
    }
  }
  static_power_w_ = first.gpu().static_power_w;
  if (options.log_path) {
    const LogHeader header{options.workload_json,     partition.key,    partition.nanobatch,
                           std::string(first.kind()), first.gpu().name, options.seed};
    log_.emplace(*options.log_path, header, options.warn);
  }
}

std::vector<Evaluation> BatchEvaluator::measure(const std::vector<partition::KnobConfig>& configs) {
  std::vector<Evaluation> results(configs.size());
  std::vector<std::size_t> pending;
  for (std::size_t position = 0; position < configs.size(); ++position) {
    if (log_) {
      if (std::optional<Evaluation> recorded = log_->find(configs[position])) {
        results[position] = std::move(*recorded);
        ++from_log_;
        continue;
      }
    }
    pending.push_back(position);
  }
  std::mutex log_mutex;
  const auto run = [&](std::size_t worker, std::size_t workers) {
    for (std::size_t item = worker; item < pending.size(); item += workers) {
      const std::size_t position = pending[item];
      const device::Measurement measurement = devices_[worker]->measure(partition_, configs[position]);
      results[position] = {configs[position], measurement.time_s, measurement.energy_j};
      if (log_) {
        const std::lock_guard<std::mutex> lock(log_mutex);
        log_->append(results[position]);
      }
    }
  };
  const std::size_t workers = std::min(devices_.size(), pending.size());
  if (workers <= 1) {
    run(0, 1);
    return results;
  }
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> threads;
  for (std::size_t worker = 0; worker < workers; ++worker) {
    threads.emplace_back([&, worker] {
      try {
        run(worker, workers);
      } catch (...) {
        errors[worker] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return results;
}

void finish_result(SearchResult& result) {
  result.energy_front = pareto_front(result.evaluations, result.static_power_w, Objective::kEnergy);
  result.effective_energy_front = pareto_front(result.evaluations, result.static_power_w, Objective::kEffectiveEnergy);
}

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
      : evaluator_(evaluator),
        space_(space),
        options_(options),
        static_power_w_(evaluator.static_power_w()),
        evaluated_(space.size(), false),
        time_model_(GaussianProcessOptions{3, 200, options.seed}),
        energy_model_(GaussianProcessOptions{3, 200, options.seed + 1}) {
    features_.reserve(space.size());
    for (std::size_t index = 0; index < space.size(); ++index) features_.push_back(config_features(space, index));
  }

  SearchResult run() {
    SearchResult result;
    result.static_power_w = static_power_w_;
    const std::size_t budget = options_.budget;
    std::size_t initial = options_.initial_design;
    if (initial == 0) initial = std::max<std::size_t>(std::min<std::size_t>(budget, 8), (budget + 2) / 4);
    initial = std::min(initial, budget);
    measure(initial_design(initial), result);
    const auto reserve =
        static_cast<std::size_t>(std::lround(options_.refinement_fraction * static_cast<double>(budget)));
    const std::size_t refine_from = budget > reserve ? budget - reserve : 0;
    bool refining = false;
    result.stop_reason = StopReason::kBudget;
    while (order_.size() < budget) {
      if (order_.size() == space_.size()) break;
      refining = refining || order_.size() >= refine_from;
      const Objective objective = result.batches % 2 == 0 ? Objective::kEnergy : Objective::kEffectiveEnergy;
      const std::vector<std::size_t> batch = choose_batch(result.evaluations, objective, refining);
      if (batch.empty()) {
        if (!refining) {
          refining = true;  // the global gain is exhausted: look around the fronts
          continue;
        }
        result.stop_reason = StopReason::kConverged;
        break;
      }
      measure(batch, result);
    }
    if (order_.size() == space_.size()) result.stop_reason = StopReason::kSpaceExhausted;
    result.from_log = evaluator_.from_log();
    result.surrogate_fits = fits_;
    finish_result(result);
    return result;
  }

 private:
  // Measures `indices`, appending to result.evaluations in order (so evaluation k is of
  // order_[k]), and marks them evaluated.
  void measure(const std::vector<std::size_t>& indices, SearchResult& result) {
    std::vector<partition::KnobConfig> configs;
    for (std::size_t index : indices) configs.push_back(space_.at(index));
    std::vector<Evaluation> measured = evaluator_.measure(configs);
    for (std::size_t position = 0; position < indices.size(); ++position) {
      evaluated_[indices[position]] = true;
      order_.push_back(indices[position]);
      result.evaluations.push_back(std::move(measured[position]));
    }
    ++result.batches;
    if (options_.progress) options_.progress(order_.size(), options_.budget);
  }

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

  // What the surrogates are fitted to: one row per measured config, in measurement order, with
  // log time and log effective energy; the batch appends its Kriging-believer fantasies.
  struct Observations {
    FeatureRows rows;
    std::vector<double> log_times;
    std::vector<double> log_energies;
  };

  Observations observations(const std::vector<Evaluation>& measured) const {
    Observations observed;
    for (std::size_t position = 0; position < order_.size(); ++position) {
      observed.rows.push_back(features_[order_[position]]);
      observed.log_times.push_back(std::log(measured[position].time_s));
      observed.log_energies.push_back(std::log(effective_energy(measured[position])));
    }
    return observed;
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
          if (evaluated_[neighbour]) continue;
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

  // The next batch from the measurements so far (result.evaluations, in order_), or empty when
  // nothing promises a gain above the threshold (global phase) or, refining, when no neighbour
  // of the fronts is left and nothing else promises a gain.
  std::vector<std::size_t> choose_batch(const std::vector<Evaluation>& measured, Objective batch_objective,
                                        bool refining) {
    Observations observed = observations(measured);
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

    std::vector<bool> taken = evaluated_;
    std::vector<std::size_t> batch;
    while (batch.size() < options_.batch_size && order_.size() + batch.size() < options_.budget) {
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

  double effective_energy(const Evaluation& evaluation) const {
    // Floor at 0.1% of E: a noisy near-idle measurement must not give log of a non-positive number.
    return std::max(evaluation.energy_j - static_power_w_ * evaluation.time_s, 1e-3 * evaluation.energy_j);
  }

  static ObjectivePoint normalise(ObjectivePoint point, ObjectivePoint reference) {
    return {point.time_s / reference.time_s, point.energy_j / std::abs(reference.energy_j)};
  }

  BatchEvaluator& evaluator_;
  const partition::SearchSpace& space_;
  const SearchOptions& options_;
  double static_power_w_;
  FeatureRows features_;
  std::vector<bool> evaluated_;
  std::vector<std::size_t> order_;  // evaluated indices in measurement order
  GaussianProcess time_model_;
  GaussianProcess energy_model_;
  std::size_t fitted_at_ = 0;  // measurements at the last hyperparameter fit
  std::size_t fits_ = 0;
};

}  // namespace

SearchResult run_search(std::span<device::Device* const> devices, const partition::Partition& partition,
                        const partition::SearchSpace& space, const SearchOptions& options) {
  check_budget_range(options.budget, space.size());
  if (options.batch_size < 1) throw InputError("--batch must be >= 1");
  BatchEvaluator evaluator(devices, partition, options);
  if (options.strategy == Strategy::kArtifact) return run_artifact_strategy(evaluator, space, options);
  return KareusStrategy(evaluator, space, options).run();
}

SearchResult run_search(device::Device& device, const partition::Partition& partition,
                        const partition::SearchSpace& space, const SearchOptions& options) {
  device::Device* devices[] = {&device};
  return run_search(devices, partition, space, options);
}

SearchResult run_exhaustive(std::span<device::Device* const> devices, const partition::Partition& partition,
                            const partition::SearchSpace& space, const SearchOptions& options) {
  BatchEvaluator evaluator(devices, partition, options);
  SearchResult result;
  result.static_power_w = evaluator.static_power_w();
  // Chunks of a few configs per device, so progress is reported and a kill loses little.
  const std::size_t chunk = 8 * devices.size();
  for (std::size_t start = 0; start < space.size(); start += chunk) {
    std::vector<partition::KnobConfig> configs;
    for (std::size_t index = start; index < std::min(space.size(), start + chunk); ++index) {
      configs.push_back(space.at(index));
    }
    for (Evaluation& evaluation : evaluator.measure(configs)) result.evaluations.push_back(std::move(evaluation));
    ++result.batches;
    if (options.progress) options.progress(result.evaluations.size(), space.size());
  }
  result.stop_reason = StopReason::kSpaceExhausted;
  result.from_log = evaluator.from_log();
  finish_result(result);
  return result;
}

SearchResult run_exhaustive(device::Device& device, const partition::Partition& partition,
                            const partition::SearchSpace& space, const SearchOptions& options) {
  device::Device* devices[] = {&device};
  return run_exhaustive(devices, partition, space, options);
}

std::size_t remeasure_front(device::Device& device, const partition::Partition& representative, int repeats,
                            double static_power_w, std::vector<Evaluation>& evaluations) {
  if (repeats <= 1) return 0;
  const std::vector<Evaluation> front = pareto_front(evaluations, static_power_w, Objective::kEffectiveEnergy);
  std::size_t added = 0;
  for (const Evaluation& point : front) {
    double time_s = 0, energy_j = 0;
    int count = 0;
    for (const Evaluation& one : evaluations) {
      if (one.config != point.config) continue;
      time_s += one.time_s;
      energy_j += one.energy_j;
      ++count;
    }
    for (; count < repeats; ++count, ++added) {
      const device::Measurement again = device.measure(representative, point.config);
      time_s += again.time_s;
      energy_j += again.energy_j;
    }
    std::erase_if(evaluations, [&](const Evaluation& one) { return one.config == point.config; });
    evaluations.push_back({point.config, time_s / count, energy_j / count});
  }
  return added;
}

std::vector<Evaluation> exact_evaluations(const device::GpuSpec& gpu, const partition::Partition& partition,
                                          const partition::SearchSpace& space) {
  device::EmulatedDevice exact = device::exact_emulator(gpu);
  std::vector<Evaluation> result;
  result.reserve(space.size());
  for (std::size_t index = 0; index < space.size(); ++index) {
    const partition::KnobConfig config = space.at(index);
    const device::Measurement run = exact.measure(partition, config);
    result.push_back({config, run.time_s, run.energy_j});
  }
  return result;
}

double hypervolume_ratio(const std::vector<partition::KnobConfig>& found, const std::vector<Evaluation>& exact,
                         const partition::SearchSpace& space, double static_power_w, Objective objective) {
  std::vector<Evaluation> true_values;
  for (const partition::KnobConfig& config : found) {
    const std::size_t index = space.index_of(config);
    if (index >= exact.size()) {
      throw InputError(fmt::format("config {} MHz, {} CTAs, slot '{}' is not in the search space", config.freq_mhz,
                                   config.ctas, config.slot));
    }
    true_values.push_back(exact[index]);
  }
  const ObjectivePoint reference = reference_point(exact, static_power_w, objective);
  const double best = hypervolume(pareto_front(exact, static_power_w, objective), static_power_w, objective, reference);
  return hypervolume(true_values, static_power_w, objective, reference) / best;
}

SearchQuality rate_search(const device::GpuSpec& gpu, const partition::Partition& partition,
                          const partition::SearchSpace& space, const SearchResult& result) {
  const std::vector<Evaluation> exact = exact_evaluations(gpu, partition, space);
  auto configs_of = [](const std::vector<Evaluation>& evaluations) {
    std::vector<partition::KnobConfig> configs;
    for (const Evaluation& evaluation : evaluations) configs.push_back(evaluation.config);
    return configs;
  };
  const std::vector<partition::KnobConfig> evaluated = configs_of(result.evaluations);
  auto ratio = [&](const std::vector<partition::KnobConfig>& configs, Objective objective) {
    return hypervolume_ratio(configs, exact, space, gpu.static_power_w, objective);
  };
  SearchQuality quality;
  quality.evaluated = {ratio(evaluated, Objective::kEnergy), ratio(evaluated, Objective::kEffectiveEnergy)};
  quality.front = {ratio(configs_of(result.energy_front), Objective::kEnergy),
                   ratio(configs_of(result.effective_energy_front), Objective::kEffectiveEnergy)};
  return quality;
}

}  // namespace kareus::search
