#include "pipeline/stage_reassignment.h"

#include <algorithm>
#include <cmath>

#include "kareus/common/pareto.h"

namespace kareus::pipeline::detail {
namespace {

// Real times are sums of measured seconds: a finish equal to its bound up to rounding fits.
bool within(double time_s, double bound_s) { return time_s <= bound_s + 1e-12 * std::max(1.0, bound_s); }

}  // namespace

StageReassignment::StageReassignment(const PipelineDag& dag, const Topology& topology, double static_w,
                                     std::size_t max_states)
    : dag_(dag),
      topology_(topology),
      static_w_(static_w),
      max_states_(std::max<std::size_t>(max_states, 2)),
      chains_(dag.stages),
      stage_of_(dag.operations.size(), -1),
      start_s_(dag.operations.size()),
      latest_finish_s_(dag.operations.size()),
      pinned_start_s_(dag.operations.size()),
      trial_start_s_(dag.operations.size()) {
  for (const int op : topology.order) {
    const Operation& operation = dag.operations[op];
    const int stage = operation.instruction.stage;
    if (operation.kind != OperationKind::kInstruction || stage < 0) continue;
    if (stage >= static_cast<int>(chains_.size())) chains_.resize(stage + 1);  // a hand-made DAG's
    stage_of_[op] = stage;
    chains_[stage].push_back(op);
  }
}

bool StageReassignment::improve(std::vector<int>& options, double deadline_s) {
  auto time_s = [&](int op) { return option(op, options[op]).time_s; };
  // One program per (stage, pinning); one that changed nothing is run again only after another
  // changed the plan (a last pass that changes nothing was most of the work).
  const int programs = 2 * static_cast<int>(chains_.size());
  std::vector<char> settled(programs, 0);
  bool changed = false;
  bool timed = false;  // start_s_ and latest_finish_s_ are those of `options`
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    bool changed_in_pass = false;
    for (int program = 0; program < programs; ++program) {
      if (settled[program]) continue;
      const int stage = program / 2;
      const bool earliest = program % 2 == 0;
      if (!timed) {
        if (!within(forward_pass<double>(topology_, start_s_, time_s), deadline_s)) return changed;
        latest_finish_pass<double>(topology_, latest_finish_s_, deadline_s, time_s);
        timed = true;
      }
      for (int op = 0; op < topology_.size(); ++op)
        pinned_start_s_[op] = earliest ? start_s_[op] : latest_finish_s_[op] - time_s(op);
      if (reassign(stage, options, deadline_s)) {
        changed = changed_in_pass = true;
        timed = false;
        std::fill(settled.begin(), settled.end(), 0);
      }
      settled[program] = 1;
    }
    if (!changed_in_pass) break;
  }
  return changed;
}

bool StageReassignment::reassign(int stage, std::vector<int>& options, double deadline_s) {
  const std::vector<int>& chain = chains_[stage];
  if (chain.empty()) return false;
  release_s_.resize(chain.size());
  due_s_.resize(chain.size());
  // A chain that runs back to back from its first release to each due time has no room to
  // trade, and its options stay (at the minimum time, the bottleneck stage's).
  double current_j = 0;
  double finish_s = 0;
  bool room = false;
  for (std::size_t position = 0; position < chain.size(); ++position) {
    const int op = chain[position];
    release_s_[position] = 0;
    for (int index = topology_.pred_first[op]; index < topology_.pred_first[op + 1]; ++index) {
      const int pred = topology_.preds[index];
      if (stage_of_[pred] == stage) continue;
      release_s_[position] = std::max(release_s_[position], pinned_start_s_[pred] + option(pred, options[pred]).time_s);
    }
    due_s_[position] = deadline_s;
    for (int index = topology_.succ_first[op]; index < topology_.succ_first[op + 1]; ++index) {
      const int succ = topology_.succs[index];
      if (stage_of_[succ] != stage) due_s_[position] = std::min(due_s_[position], pinned_start_s_[succ]);
    }
    current_j += option(op, options[op]).effective_energy_j;
    finish_s = std::max(finish_s, release_s_[position]) + option(op, options[op]).time_s;
    room |= !within(due_s_[position], finish_s);
  }
  if (!room) return false;
  double others_end_s = 0;  // the makespan without the chain: its pinned operations' last finish
  for (int op = 0; op < topology_.size(); ++op) {
    if (stage_of_[op] != stage)
      others_end_s = std::max(others_end_s, pinned_start_s_[op] + option(op, options[op]).time_s);
  }
  auto cost_j = [&](double effective_j, double chain_finish_s) {
    return effective_j + static_w_ * std::max(chain_finish_s, others_end_s);
  };
  levels_.resize(chain.size());
  for (std::size_t position = 0; position < chain.size(); ++position) {
    std::vector<State>& states = levels_[position];
    states.clear();
    const std::vector<ExecutionOption>& choices = dag_.specs[dag_.operations[chain[position]].spec].options();
    const std::size_t parents = position == 0 ? 1 : levels_[position - 1].size();
    for (std::size_t parent = 0; parent < parents; ++parent) {
      const State* before = position == 0 ? nullptr : &levels_[position - 1][parent];
      // States are finish ascending, energy descending: of those done by the release, which all
      // start this operation at the release, only the last (the cheapest) can lead anywhere.
      if (parent + 1 < parents && levels_[position - 1][parent + 1].finish_s <= release_s_[position]) continue;
      const double start_s = std::max(before != nullptr ? before->finish_s : 0.0, release_s_[position]);
      const double base_j = before != nullptr ? before->effective_j : 0.0;
      // Options are time ascending: past the first that misses the due time, all do.
      for (std::size_t k = 0; k < choices.size() && within(start_s + choices[k].time_s, due_s_[position]); ++k) {
        states.push_back({start_s + choices[k].time_s, base_j + choices[k].effective_energy_j,
                          position == 0 ? -1 : static_cast<int>(parent), static_cast<int>(k)});
      }
    }
    states_made_ += static_cast<std::int64_t>(states.size());
    keep_pareto(states);
    if (states.empty()) return false;
  }
  const std::vector<State>& last = levels_.back();
  const auto best = std::min_element(last.begin(), last.end(), [&](const State& a, const State& b) {
    return cost_j(a.effective_j, a.finish_s) < cost_j(b.effective_j, b.finish_s);
  });
  const double current_cost_j = cost_j(current_j, finish_s);
  if (cost_j(best->effective_j, best->finish_s) >= current_cost_j - 1e-9 * std::max(1.0, std::abs(current_cost_j)))
    return false;
  std::vector<int> before(chain.size());
  int index = static_cast<int>(best - last.begin());
  for (std::size_t position = chain.size(); position-- > 0;) {
    const int op = chain[position];
    before[position] = options[op];
    options[op] = levels_[position][index].option;
    index = levels_[position][index].parent;
  }
  // The others keep their pinned starts, so this holds unless the chain's operations were not
  // one sequence on their GPU; then the old options stay.
  auto time_s = [&](int op) { return option(op, options[op]).time_s; };
  if (within(forward_pass<double>(topology_, trial_start_s_, time_s), deadline_s)) return true;
  for (std::size_t position = 0; position < chain.size(); ++position) options[chain[position]] = before[position];
  return false;
}

void StageReassignment::keep_pareto(std::vector<State>& states) const {
  states = pareto_filter(
      std::move(states), [](const State& state) { return state.finish_s; },
      [](const State& state) { return state.effective_j; });
  const std::size_t kept = states.size();
  if (kept <= max_states_) return;
  // Evenly spaced by rank: the earliest finish and the cheapest (the last) stay.
  for (std::size_t slot = 0; slot < max_states_; ++slot) states[slot] = states[slot * (kept - 1) / (max_states_ - 1)];
  states.resize(max_states_);
}

}  // namespace kareus::pipeline::detail
