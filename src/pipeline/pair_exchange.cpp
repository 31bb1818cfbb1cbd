#include "pipeline/pair_exchange.h"

#include <algorithm>

namespace kareus::pipeline::detail {

PairExchange::PairExchange(const PipelineDag& dag, const Topology& topology, int gpus)
    : dag_(dag),
      topology_(topology),
      count_(static_cast<int>(dag.operations.size())),
      static_w_(dag.static_power_w * gpus),
      duration_s_(count_),
      start_s_(count_),
      alone_start_s_(count_),
      pair_start_s_(count_),
      latest_finish_s_(count_) {}

const ExecutionOption& PairExchange::option(int op, int index) const {
  return dag_.specs[dag_.operations[op].spec].options()[index];
}

int PairExchange::option_count(int op) const {
  return static_cast<int>(dag_.specs[dag_.operations[op].spec].options().size());
}

void PairExchange::set(std::vector<int>& options, int op, int index) {
  effective_j_ += option(op, index).effective_energy_j - option(op, options[op]).effective_energy_j;
  options[op] = index;
  duration_s_[op] = option(op, index).time_s;
}

double PairExchange::retime(const std::vector<double>& before_s, std::vector<double>& start_s, int changed,
                            std::int64_t& budget) {
  // Starts before the changed operation in topological order are those of `before_s`.
  const int first = topology_.position[changed];
  std::copy(before_s.begin(), before_s.end(), start_s.begin());
  budget -= topology_.size() - first;
  for (int position = first; position < topology_.size(); ++position) {
    const int op = topology_.order[position];
    double earliest = 0;
    for (int index = topology_.pred_first[op]; index < topology_.pred_first[op + 1]; ++index) {
      const int pred = topology_.preds[index];
      earliest = std::max(earliest, start_s[pred] + duration_s_[pred]);
    }
    start_s[op] = earliest;
  }
  double makespan_s = 0;
  for (const int sink : topology_.sinks) makespan_s = std::max(makespan_s, start_s[sink] + duration_s_[sink]);
  return makespan_s;
}

bool PairExchange::improve(std::vector<int>& options, double deadline_s, std::int64_t& budget) {
  const double limit_s = deadline_s * (1 + 1e-12);
  effective_j_ = 0;
  for (int op = 0; op < count_; ++op) {
    effective_j_ += option(op, options[op]).effective_energy_j;
    duration_s_[op] = option(op, options[op]).time_s;
  }
  auto energy_j = [this](double makespan_s) { return effective_j_ + static_w_ * makespan_s; };
  budget -= count_;
  double now_j = energy_j(forward_pass<double>(topology_, start_s_, [this](int op) { return duration_s_[op]; }));
  bool changed = false;
  for (bool improved = true; improved && budget > 0;) {
    improved = false;
    for (int slower = 0; slower < count_ && budget > 0; ++slower) {
      const int from_slower = options[slower];
      if (from_slower + 1 >= option_count(slower)) continue;
      const double saved_j =
          option(slower, from_slower).effective_energy_j - option(slower, from_slower + 1).effective_energy_j;
      if (saved_j <= 0) continue;
      set(options, slower, from_slower + 1);
      const double alone_s = retime(start_s_, alone_start_s_, slower, budget);
      if (alone_s <= limit_s && energy_j(alone_s) < now_j * (1 - 1e-12)) {
        now_j = energy_j(alone_s);
        std::swap(start_s_, alone_start_s_);
        improved = true;
        continue;
      }
      // Partners: operations on a path longer than the deadline (float below the excess).
      const double excess_s = alone_s - deadline_s;
      latest_finish_pass<double>(topology_, latest_finish_s_, alone_s, [this](int op) { return duration_s_[op]; });
      bool accepted = false;
      for (int faster = 0; faster < count_ && !accepted && excess_s > 0; ++faster) {
        if (faster == slower) continue;
        const double float_s = latest_finish_s_[faster] - alone_start_s_[faster] - duration_s_[faster];
        if (float_s >= excess_s) continue;
        const int from = options[faster];
        for (int step = 1; step <= 2 && from - step >= 0; ++step) {
          const double cost_j =
              option(faster, from - step).effective_energy_j - option(faster, from).effective_energy_j;
          // The makespan falls by at most the partner's speed-up: skip a pair that cannot pay.
          const double static_bound_j = static_w_ * (option(faster, from).time_s - option(faster, from - step).time_s);
          if (saved_j - cost_j + static_bound_j <= 0) continue;
          set(options, faster, from - step);
          const double paired_s = retime(alone_start_s_, pair_start_s_, faster, budget);
          if (paired_s <= limit_s && energy_j(paired_s) < now_j * (1 - 1e-12)) {
            now_j = energy_j(paired_s);
            std::swap(start_s_, pair_start_s_);
            accepted = true;
            break;
          }
          set(options, faster, from);
        }
      }
      if (accepted) {
        improved = true;
      } else {
        set(options, slower, from_slower);
      }
    }
    changed |= improved;
  }
  return changed;
}

}  // namespace kareus::pipeline::detail
