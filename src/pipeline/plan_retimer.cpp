#include "pipeline/plan_retimer.h"

#include <algorithm>
#include <cassert>

namespace kareus::pipeline::detail {
PlanRetimer::PlanRetimer(const PipelineDag& dag, const Topology& topology, int gpus, bool finer_options)
    : dag_(dag),
      topology_(topology),
      gpus_(gpus),
      finer_options_(finer_options),
      timing_(topology),
      options_(topology.size()),
      energy_j_(topology.size()),
      next_time_s_(topology.size()),
      next_representative_s_(topology.size()),
      gap_s_(topology.size()) {
  for (const CandidateExecutionOptions& spec : dag.specs) {
    const std::vector<ExecutionOption>& options = spec.options();
    const int count = static_cast<int>(options.size());
    SpecTables tables{std::vector<double>(count, kInfinity), std::vector<double>(count, kInfinity)};
    for (int index = 0; index + 1 < count; ++index) tables.next_s[index] = options[index + 1].time_s;
    // Walking down: the next representative above `index` is the last one met above it.
    const std::vector<int>& representatives = spec.representatives();
    auto above = representatives.end();
    for (int index = count - 1; index >= 0; --index) {
      while (above != representatives.begin() && *(above - 1) > index) --above;
      if (above != representatives.end()) tables.next_representative_s[index] = options[*above].time_s;
    }
    spec_tables_.push_back(std::move(tables));
  }
  for (const Operation& operation : dag.operations) {
    op_options_.push_back(dag.specs[operation.spec].options().data());
    op_tables_.push_back(&spec_tables_[operation.spec]);
  }
}

void PlanRetimer::load(std::span<const int> options) {
  assert(static_cast<int>(options.size()) == topology_.size() && "PlanRetimer::load: one option per operation");
  std::vector<double> duration_s(options.size());
  for (int op = 0; op < topology_.size(); ++op) {
    set_option(op, options[op]);
    duration_s[op] = op_options_[op][options[op]].time_s;
  }
  timing_.assign(duration_s);
  option_log_.clear();
  update_gaps();
}

void PlanRetimer::update_gaps() {
  committed_makespan_s_ = timing_.makespan_s();
  for (int op = 0; op < topology_.size(); ++op)
    gap_s_[op] = next_time_s_[op] - ((committed_makespan_s_ - timing_.tail_s(op)) - timing_.start_s(op));
}

void PlanRetimer::choose(int op, int index) {
  if (index != options_[op]) option_log_.emplace_back(op, options_[op]);
  set_option(op, index);
  timing_.set_duration(op, op_options_[op][index].time_s);
}

// The option and what follows from it alone; the timing is the caller's.
void PlanRetimer::set_option(int op, int index) {
  options_[op] = index;
  energy_j_[op] = op_options_[op][index].effective_energy_j;
  next_time_s_[op] = op_tables_[op]->next_s[index];
  next_representative_s_[op] = op_tables_[op]->next_representative_s[index];
}

// One pass of slack reclamation (the rule in the file comment of plan_retimer.h) over the
// watched operations and the others the pass re-times; `fitting_` gets those visited whose next
// option fits their window after the pass's choice.
void PlanRetimer::reclaim_pass(bool representatives_only) {
  const double makespan_s = timing_.makespan_s();
  const std::vector<double>& next_s = representatives_only ? next_representative_s_ : next_time_s_;
  fitting_.clear();
  timing_.retime_tails(watched_, [&](int op) {
    const double window_s = (makespan_s - timing_.tail_s(op)) - timing_.start_s(op);
    if (next_s[op] <= window_s) {
      choose(op, slowest_within(dag_.specs[dag_.operations[op].spec], options_[op], window_s, representatives_only));
    }
    if (next_time_s_[op] <= window_s) fitting_.push_back(op);
  });
  timing_.retime_starts();
}

// Since the committed plan, durations have only grown, so starts and times-to-the-end have only
// grown, and an operation's window is at most its committed window plus the makespan's growth:
// only those whose gap is within that growth (and rounding, far below 1e-9 of the makespan) can
// fit, and each of them is visited (watched).
PlanEvaluation PlanRetimer::slow_down(int op) {
  assert(next_time_s_[op] < kInfinity && "PlanRetimer::slow_down: no slower option");
  choose(op, options_[op] + 1);
  timing_.retime_starts();
  const double reach_s = (timing_.makespan_s() - committed_makespan_s_) + 1e-9 * timing_.makespan_s();
  watched_.clear();
  for (int other = 0; other < topology_.size(); ++other) {
    if (gap_s_[other] <= reach_s) watched_.push_back(other);
  }
  reclaim_pass(true);
  if (finer_options_) {
    // Windows only shrink as reclamation goes on: the finer pass need watch only the
    // operations whose next option fitted when the first pass visited them.
    watched_.swap(fitting_);
    reclaim_pass(false);
  }
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
  for (const auto& [op, index] : saved_options_) set_option(op, index);
  timing_.redo(saved_timing_);
  update_gaps();
}

void PlanRetimer::rollback() {
  timing_.rollback();
  for (auto change = option_log_.rbegin(); change != option_log_.rend(); ++change)
    set_option(change->first, change->second);
  option_log_.clear();
}

// As evaluate_plan() computes it: effective energies summed in operation order (so the sum
// is not kept incrementally: that would round differently).
PlanEvaluation PlanRetimer::evaluation() const {
  double effective = 0;
  for (const double energy_j : energy_j_) effective += energy_j;
  const double makespan_s = timing_.makespan_s();
  return {makespan_s, effective + dag_.static_power_w * makespan_s * gpus_};
}

}  // namespace kareus::pipeline::detail
