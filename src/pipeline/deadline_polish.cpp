#include "pipeline/deadline_polish.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "pipeline/plan_realization.h"

namespace kareus::pipeline::detail {
namespace {
constexpr std::uint32_t kPerturbationSeed = 2026;
}  // namespace

DeadlinePolish::DeadlinePolish(const PipelineDag& dag, const Topology& topology, int gpus)
    : dag_(dag),
      topology_(topology),
      count_(static_cast<int>(dag.operations.size())),
      gpus_(gpus),
      exchange_(dag, topology, gpus),
      reassignment_(dag, topology, dag.static_power_w * gpus, kMaxStates),
      start_s_(count_),
      latest_finish_s_(count_) {}

bool DeadlinePolish::Incumbent::offer(std::vector<int>& trial, double trial_j) {
  if (trial_j >= energy_j * (1 - 1e-12)) return false;
  energy_j = trial_j;
  options = std::move(trial);
  return true;
}

std::vector<int> DeadlinePolish::best_by(std::vector<std::vector<int>> seeds, double deadline_s,
                                         std::int64_t max_work) {
  budget_ = max_work;
  Incumbent best;
  for (std::vector<int>& seed : seeds) {
    polish(seed, deadline_s);
    const double seed_j = energy_j(seed);
    if (seed_j < best.energy_j) {
      best.energy_j = seed_j;
      best.options = std::move(seed);
    }
  }
  if (best.options.empty()) return {};
  search_kicks(best, deadline_s);
  perturb_and_search(best, deadline_s);
  return std::move(best.options);
}

void DeadlinePolish::search_kicks(Incumbent& best, double deadline_s) {
  bool kept = true;
  for (int round = 0; round < kKickRounds && kept && budget_ > 0; ++round) {
    kept = false;
    for (int spec = 0; spec < static_cast<int>(dag_.specs.size()); ++spec) {
      for (std::vector<int>& trial : kicks(best.options, spec)) {
        if (budget_ <= 0 || !repair_to(trial, deadline_s)) continue;
        polish(trial, deadline_s);
        kept |= best.offer(trial, energy_j(trial));
      }
    }
  }
}

std::vector<std::vector<int>> DeadlinePolish::kicks(const std::vector<int>& options, int spec) const {
  const int last = static_cast<int>(dag_.specs[spec].options().size()) - 1;
  std::vector<int> used;
  for (int op = 0; op < count_; ++op) {
    if (dag_.operations[op].spec == spec) used.push_back(options[op]);
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  std::vector<std::vector<int>> made;
  auto add = [&](auto&& to) {
    std::vector<int> trial = options;
    bool moved = false;
    for (int op = 0; op < count_; ++op) {
      if (dag_.operations[op].spec != spec) continue;
      const int option = std::clamp(to(options[op]), 0, last);
      moved |= option != trial[op];
      trial[op] = option;
    }
    if (moved) made.push_back(std::move(trial));
  };
  for (const int shift : kKickShifts) add([shift](int option) { return option - shift; });
  if (used.size() > 1) {
    const std::size_t targets = std::min(used.size(), kMaxUniformKicks);
    for (std::size_t k = 0; k < targets; ++k) {
      const int option = used[k * (used.size() - 1) / std::max<std::size_t>(targets - 1, 1)];
      add([option](int) { return option; });
    }
  }
  return made;
}

void DeadlinePolish::perturb_and_search(Incumbent& best, double deadline_s) {
  std::mt19937 random(kPerturbationSeed);
  for (int fruitless = 0; fruitless < kPatience && budget_ > 0;) {
    ++fruitless;
    std::vector<int> trial = perturbed(best.options, random);
    if (!repair_to(trial, deadline_s)) continue;
    reclaim_slack(dag_, topology_, trial, start_s_, latest_finish_s_, true);
    budget_ -= 3 * count_;  // the reclamation's passes and the evaluation below
    exchange_.improve(trial, deadline_s, budget_);
    if (best.offer(trial, energy_j(trial))) fruitless = 0;
  }
}

std::vector<int> DeadlinePolish::perturbed(std::vector<int> options, std::mt19937& random) const {
  constexpr int kShifts[] = {-2, -1, 1, 2};
  const int moved = 2 + static_cast<int>(random() % (kMaxPerturbed - 1));
  for (int k = 0; k < moved; ++k) {
    const int op = static_cast<int>(random() % static_cast<std::uint32_t>(count_));
    const int last = static_cast<int>(spec_of(op).options().size()) - 1;
    options[op] = std::clamp(options[op] + kShifts[random() % 4], 0, last);
  }
  return options;
}

void DeadlinePolish::polish(std::vector<int>& options, double deadline_s) {
  for (int round = 0; round < kPolishRounds; ++round) {
    bool changed = exchange_.improve(options, deadline_s, budget_);
    if (budget_ <= 0) return;
    std::vector<int> rechosen = options;
    const std::int64_t states_before = reassignment_.states_made();
    const bool rechose = reassignment_.improve(rechosen, deadline_s);
    budget_ -= reassignment_.states_made() - states_before;
    if (rechose && energy_j(rechosen) < energy_j(options)) {
      options = std::move(rechosen);
      changed = true;
    }
    if (!changed) return;
  }
}

bool DeadlinePolish::repair_to(std::vector<int>& options, double deadline_s) {
  auto time_s = [&](int op) { return option(op, options[op]).time_s; };
  for (;;) {
    budget_ -= count_;
    const double makespan_s = forward_pass<double>(topology_, start_s_, time_s);
    if (makespan_s <= deadline_s * (1 + 1e-12)) return true;
    latest_finish_pass<double>(topology_, latest_finish_s_, makespan_s, time_s);
    int chosen = -1;
    double best_rate = std::numeric_limits<double>::infinity();
    for (int op = 0; op < count_; ++op) {
      if (options[op] == 0 || latest_finish_s_[op] - start_s_[op] - time_s(op) > 1e-12 * makespan_s) continue;
      const ExecutionOption& now = option(op, options[op]);
      const ExecutionOption& faster = option(op, options[op] - 1);
      if (faster.time_s >= now.time_s) continue;
      const double rate = (faster.effective_energy_j - now.effective_energy_j) / (now.time_s - faster.time_s);
      if (rate < best_rate) {
        best_rate = rate;
        chosen = op;
      }
    }
    if (chosen < 0) return false;
    --options[chosen];
  }
}

double DeadlinePolish::energy_j(std::span<const int> options) {
  return evaluate(dag_, topology_, options, gpus_, start_s_).energy_j;
}

}  // namespace kareus::pipeline::detail

namespace kareus::pipeline {

std::vector<int> cheapest_plan_by(const PipelineDag& dag, int gpus, std::vector<std::vector<int>> seeds,
                                  double deadline_s, std::int64_t max_work) {
  if (gpus <= 0) throw InputError(fmt::format("cheapest_plan_by: gpus must be > 0, found {}", gpus));
  if (!std::isfinite(deadline_s) || deadline_s <= 0) {
    throw InputError(fmt::format("cheapest_plan_by: the deadline must be finite and > 0 s, found {}", deadline_s));
  }
  if (max_work < 0) throw InputError(fmt::format("cheapest_plan_by: max_work must be >= 0, found {}", max_work));
  const detail::Topology topology(dag);
  std::vector<double> start_s(dag.operations.size());
  std::vector<std::vector<int>> meeting;
  for (std::vector<int>& seed : seeds) {
    if (seed.size() != dag.operations.size()) {
      throw InputError(
          fmt::format("cheapest_plan_by: a seed has {} options for {} operations", seed.size(), dag.operations.size()));
    }
    for (std::size_t op = 0; op < seed.size(); ++op) {
      const std::size_t options = dag.specs[dag.operations[op].spec].options().size();
      if (seed[op] < 0 || static_cast<std::size_t>(seed[op]) >= options) {
        throw InputError(fmt::format("cheapest_plan_by: operation {} has option {} of {}", op, seed[op], options));
      }
    }
    if (detail::evaluate(dag, topology, seed, gpus, start_s).time_s <= deadline_s) meeting.push_back(std::move(seed));
  }
  return detail::DeadlinePolish(dag, topology, gpus).best_by(std::move(meeting), deadline_s, max_work);
}

}  // namespace kareus::pipeline
