#include "pipeline/plan_retimer.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace kareus::pipeline::detail {
namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
}  // namespace

PlanRetimer::PlanRetimer(const PipelineDag& dag, const Topology& topology, int gpus, bool finer_options)
    : dag_(dag),
      topology_(topology),
      gpus_(gpus),
      finer_options_(finer_options),
      timing_(topology),
      options_(topology.size()),
      next_time_s_(topology.size()),
      next_representative_s_(topology.size()),
      gap_s_(topology.size()) {}

void PlanRetimer::load(std::span<const int> options) {
  assert(static_cast<int>(options.size()) == topology_.size() && "PlanRetimer::load: one option per operation");
  std::vector<double> duration_s(options.size());
  for (int op = 0; op < topology_.size(); ++op) {
    options_[op] = options[op];
    duration_s[op] = option(op, options[op]).time_s;
  }
  timing_.assign(duration_s);
  option_log_.clear();
  for (int op = 0; op < topology_.size(); ++op) update_next_times(op);
  update_gaps();
}

void PlanRetimer::update_gaps() {
  committed_makespan_s_ = timing_.makespan_s();
  for (int op = 0; op < topology_.size(); ++op)
    gap_s_[op] = next_time_s_[op] - ((committed_makespan_s_ - timing_.tail_s(op)) - timing_.start_s(op));
}

void PlanRetimer::choose(int op, int index) {
  if (index != options_[op]) option_log_.emplace_back(op, options_[op]);
  options_[op] = index;
  update_next_times(op);
  timing_.set_duration(op, option(op, index).time_s);
}

void PlanRetimer::update_next_times(int op) {
  const CandidateExecutionOptions& spec = dag_.specs[dag_.operations[op].spec];
  const std::vector<ExecutionOption>& options = spec.options();
  const int index = options_[op];
  next_time_s_[op] = index + 1 < static_cast<int>(options.size()) ? options[index + 1].time_s : kInfinity;
  const std::vector<int>& representatives = spec.representatives();
  const auto next = std::upper_bound(representatives.begin(), representatives.end(), index);
  next_representative_s_[op] = next != representatives.end() ? options[*next].time_s : kInfinity;
}

// One pass of slack reclamation (the rule in the file comment of plan_retimer.h). Since the
// committed plan, durations have only grown, so starts and times-to-the-end have only grown, and
// an operation's window is at most its committed window plus the makespan's growth: only those
// whose gap is within that growth (and rounding, far below 1e-9 of the makespan) can fit, and
// each of them is visited (watched), with the others the pass re-times.
void PlanRetimer::reclaim_pass(bool representatives_only) {
  const double makespan_s = timing_.makespan_s();
  const std::vector<double>& next_s = representatives_only ? next_representative_s_ : next_time_s_;
  const double reach_s = (makespan_s - committed_makespan_s_) + 1e-9 * makespan_s;
  watched_.clear();
  for (int op = 0; op < topology_.size(); ++op) {
    if (gap_s_[op] <= reach_s) watched_.push_back(op);
  }
  timing_.retime_tails(watched_, [&](int op) {
    const double window_s = (makespan_s - timing_.tail_s(op)) - timing_.start_s(op);
    if (!(next_s[op] <= window_s)) return;
    choose(op, slowest_within(dag_.specs[dag_.operations[op].spec], options_[op], window_s, representatives_only));
  });
  timing_.retime_starts();
}

PlanEvaluation PlanRetimer::slow_down(int op) {
  assert(next_time_s_[op] < kInfinity && "PlanRetimer::slow_down: no slower option");
  choose(op, options_[op] + 1);
  timing_.retime_starts();
  reclaim_pass(true);
  if (finer_options_) reclaim_pass(false);
  return evaluation();
}

void PlanRetimer::commit() {
  timing_.commit();
  option_log_.clear();
  update_gaps();
}

void PlanRetimer::save() {
  timing_.save(saved_timing_);
  saved_options_.clear();
  for (const auto& [op, before] : option_log_) saved_options_.emplace_back(op, options_[op]);
}

void PlanRetimer::restore() {
  assert(option_log_.empty() && "PlanRetimer::restore: roll back first");
  for (const auto& [op, index] : saved_options_) {
    options_[op] = index;
    update_next_times(op);
  }
  timing_.redo(saved_timing_);
  update_gaps();
}

void PlanRetimer::rollback() {
  timing_.rollback();
  for (auto change = option_log_.rbegin(); change != option_log_.rend(); ++change)
    options_[change->first] = change->second;
  for (const auto& [op, before] : option_log_) update_next_times(op);
  option_log_.clear();
}

// As evaluate_plan() computes it: effective energies summed in operation order.
PlanEvaluation PlanRetimer::evaluation() const {
  double effective = 0;
  for (int op = 0; op < topology_.size(); ++op) effective += option(op, options_[op]).effective_energy_j;
  const double makespan_s = timing_.makespan_s();
  return {makespan_s, effective + dag_.static_power_w * makespan_s * gpus_};
}

}  // namespace kareus::pipeline::detail
