#include "pipeline/pair_exchange.h"

#include "pipeline/plan_realization.h"

namespace kareus::pipeline::detail {

PairExchange::PairExchange(const PipelineDag& dag, const Topology& topology, int gpus)
    : dag_(dag),
      topology_(topology),
      count_(static_cast<int>(dag.operations.size())),
      gpus_(gpus),
      start_s_(count_),
      trial_start_s_(count_),
      latest_finish_s_(count_) {}

double PairExchange::effective_j(int op, int option) const {
  return dag_.specs[dag_.operations[op].spec].options()[option].effective_energy_j;
}

double PairExchange::time_s(int op, int option) const {
  return dag_.specs[dag_.operations[op].spec].options()[option].time_s;
}

int PairExchange::option_count(int op) const {
  return static_cast<int>(dag_.specs[dag_.operations[op].spec].options().size());
}

bool PairExchange::improve(std::vector<int>& options, double deadline_s, std::int64_t& budget) {
  const double limit_s = deadline_s * (1 + 1e-12);
  const double static_w = dag_.static_power_w * gpus_;
  double now_j = evaluate(dag_, topology_, options, gpus_, start_s_).energy_j;
  auto timed = [&](std::vector<double>& start_s) {
    budget -= count_;
    return evaluate(dag_, topology_, options, gpus_, start_s);
  };
  bool changed = false;
  for (bool improved = true; improved && budget > 0;) {
    improved = false;
    for (int slower = 0; slower < count_ && budget > 0; ++slower) {
      if (options[slower] + 1 >= option_count(slower)) continue;
      const double saved_j = effective_j(slower, options[slower]) - effective_j(slower, options[slower] + 1);
      if (saved_j <= 0) continue;
      ++options[slower];
      const PlanEvaluation alone = timed(start_s_);
      if (alone.time_s <= limit_s && alone.energy_j < now_j * (1 - 1e-12)) {
        now_j = alone.energy_j;
        improved = true;
        continue;
      }
      // Partners: operations on a path longer than the deadline (float below the excess).
      const double excess_s = alone.time_s - deadline_s;
      latest_finish_pass(topology_, latest_finish_s_, alone.time_s, [&](int op) { return time_s(op, options[op]); });
      bool accepted = false;
      for (int faster = 0; faster < count_ && !accepted && excess_s > 0; ++faster) {
        if (faster == slower) continue;
        const double float_s = latest_finish_s_[faster] - start_s_[faster] - time_s(faster, options[faster]);
        if (float_s >= excess_s) continue;
        const int from = options[faster];
        for (int step = 1; step <= 2 && from - step >= 0; ++step) {
          const double cost_j = effective_j(faster, from - step) - effective_j(faster, from);
          // The makespan falls by at most the partner's speed-up: skip a pair that cannot pay.
          const double static_bound_j = static_w * (time_s(faster, from) - time_s(faster, from - step));
          if (saved_j - cost_j + static_bound_j <= 0) continue;
          options[faster] = from - step;
          const PlanEvaluation paired = timed(trial_start_s_);
          if (paired.time_s <= limit_s && paired.energy_j < now_j * (1 - 1e-12)) {
            now_j = paired.energy_j;
            accepted = true;
            break;
          }
          options[faster] = from;
        }
      }
      if (accepted) {
        improved = true;
      } else {
        --options[slower];
      }
    }
    changed |= improved;
  }
  return changed;
}

}  // namespace kareus::pipeline::detail
