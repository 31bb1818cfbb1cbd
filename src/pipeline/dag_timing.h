// src/pipeline/dag_timing.h - start times and times-to-the-end of a DAG's operations, re-timed
// incrementally when a few durations change.
//
// The Phillips-Dessouky solver's walks try thousands of plans that differ from the one before in
// one operation and what slack reclamation then gives back; re-timing the whole DAG for each
// (O(V + E) per pass, five passes per plan) was half the solve at 175B scale. IncrementalTiming
// re-times only the operations a change reaches: starts forward from the changed operation's
// successors, times-to-the-end backward from its predecessors, each stopping where a value does
// not change. Each value is recomputed by the same expression, in the same order over
// predecessors or successors, as a full pass computes it, so incremental and full results are
// equal to the bit. The times-to-the-end (longest path from an operation's end to the end of the
// DAG) do not depend on the makespan, which every plan the walks try changes; latest finishes do.
// Units: whatever the durations are in (seconds for the real-time passes, quanta for PD's own).
#pragma once

#include <algorithm>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "kareus/pipeline/pipeline_dag.h"

namespace kareus::pipeline::detail {

// An unreached or unbounded time, capacity or slack.
inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Predecessors and successors in compressed form, a topological order and each operation's
// position in it, and the sinks (operations without successors). Throws Error on a cycle.
struct Topology {
  std::vector<int> order;
  std::vector<int> position;  // op -> index in order
  std::vector<int> pred_first, preds;
  std::vector<int> succ_first, succs;
  std::vector<int> sinks;

  explicit Topology(const PipelineDag& dag);
  [[nodiscard]] int size() const { return static_cast<int>(order.size()); }
};

// Longest path with durations given by `duration(op)`; fills `start` and returns the makespan.
template <typename T, typename Duration>
T forward_pass(const Topology& topology, std::vector<T>& start, Duration duration) {
  T makespan = 0;
  for (const int op : topology.order) {
    T earliest = 0;
    for (int position = topology.pred_first[op]; position < topology.pred_first[op + 1]; ++position) {
      const int pred = topology.preds[position];
      earliest = std::max(earliest, start[pred] + duration(pred));
    }
    start[op] = earliest;
    makespan = std::max(makespan, earliest + duration(op));
  }
  return makespan;
}

// Latest finish times for durations `duration(op)` and a given makespan, in reverse
// topological order. `visit(op)` runs as soon as latest_finish[op] is set, before any
// predecessor reads duration(op), so it may change op's duration (slack reclamation does).
template <typename T, typename Duration, typename Visit>
void latest_finish_pass(const Topology& topology, std::vector<T>& latest_finish, T makespan, Duration duration,
                        Visit visit) {
  for (auto position = topology.order.rbegin(); position != topology.order.rend(); ++position) {
    const int op = *position;
    T latest = makespan;
    for (int index = topology.succ_first[op]; index < topology.succ_first[op + 1]; ++index) {
      const int succ = topology.succs[index];
      latest = std::min(latest, latest_finish[succ] - duration(succ));
    }
    latest_finish[op] = latest;
    visit(op);
  }
}

template <typename T, typename Duration>
void latest_finish_pass(const Topology& topology, std::vector<T>& latest_finish, T makespan, Duration duration) {
  latest_finish_pass(topology, latest_finish, makespan, duration, [](int) {});
}

// Real start times and times-to-the-end of one assignment of durations (seconds), kept up to
// date as durations grow. Changes are logged so a tried plan can be rolled back to the last
// commit(). Invariant after assign() and after each retime_starts()/retime_tails(): start_s and
// tail_s equal what full passes over the current durations give, bit for bit (see the file
// comment), for the parts retimed.
class IncrementalTiming {
 public:
  explicit IncrementalTiming(const Topology& topology);
  // The change log points into this object's arrays.
  IncrementalTiming(const IncrementalTiming&) = delete;
  IncrementalTiming& operator=(const IncrementalTiming&) = delete;

  /// Sets every duration and computes starts and tails with full passes; commits.
  void assign(std::span<const double> duration_s);
  /// Changes one duration; its successors' starts and predecessors' tails are re-timed by the
  /// next retime_starts() and retime_tails() (or the one running, for the tails).
  void set_duration(int op, double duration_s);
  /// Re-times the starts every set_duration() since the last call reaches, and the makespan.
  void retime_starts();
  /// Re-times the tails every set_duration() since the last call reaches, plus the operations
  /// in `watched`, latest in topological order first. `visit(op)` runs for each operation
  /// re-timed once its tail is final (its successors are done) and may call set_duration(op, ...)
  /// to lengthen it; its predecessors are then re-timed too. The starts are left as they were.
  template <typename Visit>
  void retime_tails(std::span<const int> watched, Visit visit);

  [[nodiscard]] double duration_s(int op) const { return duration_s_[op]; }
  [[nodiscard]] double start_s(int op) const { return start_s_[op]; }
  /// Longest path from op's end to the end of the DAG (0 for a sink).
  [[nodiscard]] double tail_s(int op) const { return tail_s_[op]; }
  [[nodiscard]] double makespan_s() const { return makespan_s_; }

  /// Forgets the log: the current durations and times are the ones rollback() returns to.
  void commit();
  /// Undoes every change since the last assign() or commit().
  void rollback();
  /// The changes since the last commit(), as they stand, for redo() after a rollback(): trying
  /// several plans, the best is put back without re-timing it.
  struct Redo {
    std::vector<std::pair<double*, double>> fields;  // (a duration, start or tail, its value)
    double makespan_s = 0;
  };
  void save(Redo& redo) const;
  /// Reapplies `redo` (saved from this committed state) and commits.
  void redo(const Redo& redo);

 private:
  double start_from_preds(int op) const;
  double tail_from_succs(int op) const;
  double makespan_from_sinks() const;

  // Operations still to re-time in one direction, flagged by topological position and swept
  // from the extreme flagged position (the earliest for starts, the latest for tails): cheaper
  // than a heap when, as in a pipeline, a change reaches a good part of the DAG.
  struct Sweep {
    std::vector<char> marked;  // per topological position
    int pending = 0;
    int extreme = 0;
    bool earliest_first = true;
  };
  void mark(Sweep& sweep, int op);
  void clear(Sweep& sweep);

  // One value changed since the last commit: where it lives (an element of duration_s_,
  // start_s_ or tail_s_, which never reallocate after construction) and what it was.
  struct Change {
    double* value;
    double before;
  };
  void set_logged(double& value, double now) {
    log_.push_back({&value, value});
    value = now;
  }

  const Topology& topology_;
  std::vector<double> duration_s_, start_s_, tail_s_;
  double makespan_s_ = 0;
  Sweep forward_, backward_;
  std::vector<Change> log_;
  double committed_makespan_s_ = 0;
};

// The same expressions, over predecessors and successors in the same order, as forward_pass
// and a full reverse pass: that is what keeps incremental and full results equal to the bit.
// Defined here, beside retime_tails(), so that the walks' hot loops inline them (they run once
// per operation re-timed; a call each was a tenth of a small solve).
inline double IncrementalTiming::start_from_preds(int op) const {
  double earliest = 0;
  for (int index = topology_.pred_first[op]; index < topology_.pred_first[op + 1]; ++index) {
    const int pred = topology_.preds[index];
    earliest = std::max(earliest, start_s_[pred] + duration_s_[pred]);
  }
  return earliest;
}

inline double IncrementalTiming::tail_from_succs(int op) const {
  double tail = 0;
  for (int index = topology_.succ_first[op]; index < topology_.succ_first[op + 1]; ++index) {
    const int succ = topology_.succs[index];
    tail = std::max(tail, duration_s_[succ] + tail_s_[succ]);
  }
  return tail;
}

inline void IncrementalTiming::mark(Sweep& sweep, int op) {
  const int position = topology_.position[op];
  if (sweep.marked[position] != 0) return;
  sweep.marked[position] = 1;
  ++sweep.pending;
  sweep.extreme = sweep.earliest_first ? std::min(sweep.extreme, position) : std::max(sweep.extreme, position);
}

template <typename Visit>
void IncrementalTiming::retime_tails(std::span<const int> watched, Visit visit) {
  for (const int op : watched) mark(backward_, op);
  // Latest position first; marks only ever go to predecessors, at earlier positions.
  for (int position = backward_.extreme; backward_.pending > 0; --position) {
    if (backward_.marked[position] == 0) continue;
    backward_.marked[position] = 0;
    --backward_.pending;
    const int op = topology_.order[position];
    const double tail = tail_from_succs(op);
    if (tail != tail_s_[op]) {
      set_logged(tail_s_[op], tail);
      for (int index = topology_.pred_first[op]; index < topology_.pred_first[op + 1]; ++index)
        mark(backward_, topology_.preds[index]);
    }
    visit(op);  // set_duration() marks the predecessors itself
  }
  backward_.extreme = -1;
}

}  // namespace kareus::pipeline::detail
