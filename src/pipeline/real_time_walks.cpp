#include "pipeline/real_time_walks.h"

#include <algorithm>

#include "pipeline/plan_realization.h"

namespace kareus::pipeline::detail {
RealTimeWalks::RealTimeWalks(const PipelineDag& dag, const Topology& topology, int gpus, bool finer_options)
    : dag_(dag),
      topology_(topology),
      count_(static_cast<int>(dag.operations.size())),
      gpus_(gpus),
      retimer_(dag, topology, gpus, finer_options),
      finer_options_(finer_options),
      start_s_(count_),
      latest_finish_s_(count_) {}

int RealTimeWalks::cheapest_critical_speed_up(std::span<const int> options, SpeedUp step, double& now_s) {
  auto real_time = [&](int op) { return spec(op).options()[options[op]].time_s; };
  now_s = forward_pass<double>(topology_, start_s_, real_time);
  const double tolerance = 1e-12 * now_s;
  latest_finish_pass(topology_, latest_finish_s_, now_s, real_time);
  int best = -1;
  double best_rate = kInfinity;
  for (int op = 0; op < count_; ++op) {
    if (options[op] == 0 || start_s_[op] + real_time(op) < latest_finish_s_[op] - tolerance) continue;
    const std::vector<ExecutionOption>& all = spec(op).options();
    const ExecutionOption& now = all[options[op]];
    const ExecutionOption& faster = all[faster_option(op, options[op], step)];
    const double rate =
        (faster.effective_energy_j - now.effective_energy_j) / std::max(now.time_s - faster.time_s, 1e-15);
    if (rate < best_rate) {
      best_rate = rate;
      best = op;
    }
  }
  return best;
}

void RealTimeWalks::repair_to_minimum_time(std::vector<int>& options) {
  const std::vector<int> fastest(count_, 0);
  const double minimum_s = evaluate(dag_, topology_, fastest, gpus_, start_s_).time_s;
  while (true) {
    double now_s = 0;
    const int best = cheapest_critical_speed_up(options, SpeedUp::kRepresentative, now_s);
    if (now_s <= minimum_s * (1 + 1e-12)) break;
    if (best < 0) {
      std::fill(options.begin(), options.end(), 0);
      break;
    }
    options[best] = faster_option(best, options[best], SpeedUp::kRepresentative);
  }
}

void RealTimeWalks::walk_faster(std::span<const int> seed, int max_steps, const FrontierRecord& frontier,
                                const KeepPlan& keep) {
  std::vector<int> options(seed.begin(), seed.end());
  const std::vector<int> fastest(count_, 0);
  const double minimum_s = evaluate(dag_, topology_, fastest, gpus_, start_s_).time_s;
  for (int step = 0; step < max_steps; ++step) {
    double now_s = 0;
    const int best = cheapest_critical_speed_up(options, SpeedUp::kNextOption, now_s);
    if (now_s <= minimum_s * (1 + 1e-12) || best < 0) break;
    --options[best];
    std::vector<int> reclaimed = options;
    reclaim_slack(dag_, topology_, reclaimed, start_s_, latest_finish_s_, finer_options_);
    const PlanEvaluation evaluated = evaluate(dag_, topology_, reclaimed, gpus_, start_s_);
    if (!frontier.dominated(evaluated.time_s, evaluated.energy_j)) keep(reclaimed, evaluated);
  }
}

void RealTimeWalks::walk_slower(std::span<const int> seed, int max_steps, int patience, const FrontierRecord& frontier,
                                const KeepPlan& keep) {
  struct Move {
    double rate;  // predicted energy saved per second added, before slack reclamation
    int op;
  };
  std::vector<Move> moves;
  retimer_.load(seed);
  const IncrementalTiming& timing = retimer_.timing();
  for (int step = 0, fruitless = 0; step < max_steps && fruitless < patience; ++step) {
    bool kept = false;
    const PlanEvaluation now_plan = retimer_.evaluation();
    const double now_s = now_plan.time_s;
    const std::span<const int> walked = retimer_.options();
    latest_finish_pass(topology_, latest_finish_s_, now_s, [&](int op) { return timing.duration_s(op); });
    moves.clear();
    for (int op = 0; op < count_; ++op) {
      const std::vector<ExecutionOption>& options = spec(op).options();
      if (walked[op] + 1 >= static_cast<int>(options.size())) continue;
      const ExecutionOption& now = options[walked[op]];
      const ExecutionOption& slower = options[walked[op] + 1];
      // Lengthening an operation by d adds max(0, d - its total float) to the makespan.
      const double total_float = latest_finish_s_[op] - (timing.start_s(op) + now.time_s);
      const double added_s = std::max(0.0, slower.time_s - now.time_s - total_float);
      const double saved_j = now.effective_energy_j - slower.effective_energy_j - dag_.static_power_w * gpus_ * added_s;
      if (saved_j <= 0) continue;
      moves.push_back({saved_j / std::max(added_s, 1e-15), op});
    }
    if (moves.empty()) break;
    const std::size_t tried = std::min<std::size_t>(moves.size(), kTriedMoves);
    std::partial_sort(
        moves.begin(), moves.begin() + static_cast<std::ptrdiff_t>(tried), moves.end(),
        [](const Move& a, const Move& b) { return a.rate > b.rate || (a.rate == b.rate && a.op < b.op); });
    int next = -1;
    double next_rate = -kInfinity;
    for (std::size_t index = 0; index < tried; ++index) {
      const PlanEvaluation real = retimer_.slow_down(moves[index].op);
      if (!frontier.dominated(real.time_s, real.energy_j)) {
        keep(retimer_.options(), real);
        kept = true;
      }
      const double saved_j = now_plan.energy_j - real.energy_j;
      const double rate = saved_j / std::max(real.time_s - now_s, 1e-15);
      if (saved_j > 0 && rate > next_rate) {
        next_rate = rate;
        next = moves[index].op;
        retimer_.save();
      }
      retimer_.rollback();
    }
    if (next < 0) break;
    retimer_.restore();
    fruitless = kept ? 0 : fruitless + 1;
  }
}

}  // namespace kareus::pipeline::detail
