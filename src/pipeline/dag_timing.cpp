#include "pipeline/dag_timing.h"

#include <algorithm>
#include <cassert>

#include "kareus/common/error.h"

namespace kareus::pipeline::detail {

Topology::Topology(const PipelineDag& dag) {
  const int count = static_cast<int>(dag.operations.size());
  pred_first.assign(count + 1, 0);
  succ_first.assign(count + 1, 0);
  for (const auto& [before, after] : dag.edges) {
    ++succ_first[before + 1];
    ++pred_first[after + 1];
  }
  for (int op = 0; op < count; ++op) {
    succ_first[op + 1] += succ_first[op];
    pred_first[op + 1] += pred_first[op];
  }
  preds.resize(dag.edges.size());
  succs.resize(dag.edges.size());
  std::vector<int> succ_fill(succ_first.begin(), succ_first.end() - 1);
  std::vector<int> pred_fill(pred_first.begin(), pred_first.end() - 1);
  for (const auto& [before, after] : dag.edges) {
    succs[succ_fill[before]++] = after;
    preds[pred_fill[after]++] = before;
  }
  // Kahn's algorithm.
  std::vector<int> waiting(count);
  for (int op = 0; op < count; ++op) {
    waiting[op] = pred_first[op + 1] - pred_first[op];
    if (waiting[op] == 0) order.push_back(op);
    if (succ_first[op + 1] == succ_first[op]) sinks.push_back(op);
  }
  for (std::size_t read = 0; read < order.size(); ++read) {
    const int op = order[read];
    for (int index = succ_first[op]; index < succ_first[op + 1]; ++index) {
      if (--waiting[succs[index]] == 0) order.push_back(succs[index]);
    }
  }
  if (order.size() != dag.operations.size()) throw Error("pipeline dag has a cycle");
  position.resize(count);
  for (int index = 0; index < count; ++index) position[order[index]] = index;
}

IncrementalTiming::IncrementalTiming(const Topology& topology)
    : topology_(topology), duration_s_(topology.size()), start_s_(topology.size()), tail_s_(topology.size()) {
  forward_.earliest_first = true;
  backward_.earliest_first = false;
  clear(forward_);
  clear(backward_);
}

void IncrementalTiming::assign(std::span<const double> duration_s) {
  assert(static_cast<int>(duration_s.size()) == topology_.size() && "IncrementalTiming::assign: one per operation");
  std::copy(duration_s.begin(), duration_s.end(), duration_s_.begin());
  forward_pass<double>(topology_, start_s_, [&](int op) { return duration_s_[op]; });
  for (auto op = topology_.order.rbegin(); op != topology_.order.rend(); ++op) tail_s_[*op] = tail_from_succs(*op);
  makespan_s_ = makespan_from_sinks();
  clear(forward_);
  clear(backward_);
  commit();
}

// Every operation's finish is at most some sink's (durations are >= 0 and a successor starts no
// earlier than its predecessor's finish, in floating point too), so this is forward_pass's
// makespan exactly.
double IncrementalTiming::makespan_from_sinks() const {
  double makespan = 0;
  for (const int op : topology_.sinks) makespan = std::max(makespan, start_s_[op] + duration_s_[op]);
  return makespan;
}

void IncrementalTiming::clear(Sweep& sweep) {
  sweep.marked.assign(topology_.size(), 0);
  sweep.pending = 0;
  sweep.extreme = sweep.earliest_first ? topology_.size() : -1;
}

void IncrementalTiming::set_duration(int op, double duration_s) {
  if (duration_s == duration_s_[op]) return;
  set_logged(duration_s_[op], duration_s);
  for (int index = topology_.succ_first[op]; index < topology_.succ_first[op + 1]; ++index)
    mark(forward_, topology_.succs[index]);
  for (int index = topology_.pred_first[op]; index < topology_.pred_first[op + 1]; ++index)
    mark(backward_, topology_.preds[index]);
}

void IncrementalTiming::retime_starts() {
  // Earliest position first; marks only ever go to successors, at later positions.
  for (int position = forward_.extreme; forward_.pending > 0; ++position) {
    if (forward_.marked[position] == 0) continue;
    forward_.marked[position] = 0;
    --forward_.pending;
    const int op = topology_.order[position];
    const double start = start_from_preds(op);
    if (start == start_s_[op]) continue;
    set_logged(start_s_[op], start);
    for (int index = topology_.succ_first[op]; index < topology_.succ_first[op + 1]; ++index)
      mark(forward_, topology_.succs[index]);
  }
  forward_.extreme = topology_.size();
  makespan_s_ = makespan_from_sinks();
}

void IncrementalTiming::save(Redo& redo) const {
  redo.fields.clear();
  for (const Change& change : log_) redo.fields.emplace_back(change.value, *change.value);
  redo.makespan_s = makespan_s_;
}

void IncrementalTiming::redo(const Redo& redo) {
  for (const auto& [where, value] : redo.fields) *where = value;
  makespan_s_ = redo.makespan_s;
  commit();
}

void IncrementalTiming::commit() {
  log_.clear();
  committed_makespan_s_ = makespan_s_;
}

void IncrementalTiming::rollback() {
  for (auto change = log_.rbegin(); change != log_.rend(); ++change) *change->value = change->before;
  log_.clear();
  // Nothing is left marked after a retime; a rollback between set_duration() and the retime
  // drops the marks.
  if (forward_.pending > 0) clear(forward_);
  if (backward_.pending > 0) clear(backward_);
  makespan_s_ = committed_makespan_s_;
}

}  // namespace kareus::pipeline::detail
