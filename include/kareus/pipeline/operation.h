// kareus/pipeline/operation.h - the execution options of one pipeline operation.
//
// An ExecutionOption is one way to run an operation (a GPU clock, say): its real time, its
// energy, and its effective energy (energy minus static power x time, the cost the
// Phillips-Dessouky solver minimizes; lowtime's `cost`). CandidateExecutionOptions quantizes
// times to integer multiples of `unit_time_s` (floor, as lowtime), drops options dominated in
// (real time, effective energy), picks one representative per quantized time (the fastest,
// lowtime's rule: its real time is the closest to the quantized one), and exposes the exact
// lower convex hull of the representatives: the piecewise-linear cost(duration) the solver
// plans on (lowtime instead fits a*exp(b*d)+c). Every Pareto option stays available to the
// passes that work on real times (slack reclamation, the walks near the fast end), so a unit
// coarser than the gaps between options does not hide the slower, cheaper ones from plans.
// Units: seconds, joules, watts; `quant_time` counts `unit_time_s`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

namespace kareus::pipeline {

struct ExecutionOption {
  double time_s = 0;              ///< real (measured) time of the operation
  double energy_j = 0;            ///< real energy of the operation (one GPU)
  double effective_energy_j = 0;  ///< energy_j - static_power_w * time_s
  int knob = 0;                   ///< what to apply to run this option, e.g. freq_mhz
  std::int64_t quant_time = 0;    ///< floor(time_s / unit_time_s), set by CandidateExecutionOptions
};

/// An option with `effective_energy_j = energy_j - static_power_w * time_s`.
[[nodiscard]] ExecutionOption make_execution_option(double time_s, double energy_j, int knob, double static_power_w);

/// floor(time_s / unit_time_s), robust to the representation error of e.g. 0.003 / 0.001.
[[nodiscard]] std::int64_t quantize_time(double time_s, double unit_time_s);

/// Which option represents a quantized time. kFastest (default, lowtime's rule) plans with
/// options whose real times the quantization underestimates least. kCheapest makes the hull
/// a lower bound of every option's effective energy at its quantized time, which
/// relaxation_lower_bound (phillips_dessouky.h) needs.
enum class QuantumRule { kFastest, kCheapest };

class CandidateExecutionOptions {
 public:
  /// Quantizes, Pareto-filters (on time_s and effective_energy_j) and picks one representative
  /// per quant_time (by `rule`). Preconditions: `options` non-empty, `unit_time_s` > 0, times >= 0.
  CandidateExecutionOptions(std::vector<ExecutionOption> options, double unit_time_s,
                            QuantumRule rule = QuantumRule::kFastest);

  /// The Pareto-optimal options: time_s strictly increasing (quant_time non-decreasing),
  /// effective_energy_j strictly decreasing.
  [[nodiscard]] const std::vector<ExecutionOption>& options() const { return options_; }
  /// Indices (into options()) of the representatives, quant_time strictly increasing.
  [[nodiscard]] const std::vector<int>& representatives() const { return representatives_; }
  /// The next representative faster than options()[index], or the next faster option when no
  /// representative is (index - 1). Precondition: index > 0.
  [[nodiscard]] int faster_representative(int index) const {
    const auto at = std::lower_bound(representatives_.begin(), representatives_.end(), index);
    return at == representatives_.begin() ? index - 1 : *(at - 1);
  }
  [[nodiscard]] std::int64_t min_quant_time() const { return options_.front().quant_time; }
  [[nodiscard]] std::int64_t max_quant_time() const { return options_.back().quant_time; }

  /// Index (into options()) of the representative of the slowest quantized time that fits in
  /// `quant_time`, i.e. the cheapest representative that does; the fastest option when none fits.
  [[nodiscard]] int option_index_for(std::int64_t quant_time) const;
  [[nodiscard]] int knob_for(std::int64_t quant_time) const { return options_[option_index_for(quant_time)].knob; }

  /// The lower convex hull of the representatives' (quant_time, effective_energy_j), evaluated at
  /// `quant_time` (clamped to [min_quant_time, max_quant_time]). Convex and non-increasing.
  /// O(1) from a table when the quantized times span at most kMaxHullTable units.
  [[nodiscard]] double hull_cost(std::int64_t quant_time) const {
    const std::int64_t clamped = std::clamp(quant_time, min_quant_time(), max_quant_time());
    if (!hull_table_.empty()) return hull_table_[clamped - min_quant_time()];
    return hull_cost_on_hull(clamped);
  }
  /// The solver asks for the hull's cost several times per operation per iteration; beyond this
  /// span (a unit far finer than the options) the table would cost more memory than it saves.
  static constexpr std::int64_t kMaxHullTable = 1 << 12;

  /// Indices (into options()) of the hull's vertices, in increasing quant_time.
  [[nodiscard]] const std::vector<int>& hull_vertices() const { return hull_; }
  /// Index (into options()) of the slowest hull vertex whose quant_time is at most `quant_time`
  /// (the fastest vertex when none is).
  [[nodiscard]] int hull_vertex_at_or_below(std::int64_t quant_time) const {
    const auto above = std::upper_bound(hull_.begin(), hull_.end(), quant_time, [this](std::int64_t time, int index) {
      return time < options_[index].quant_time;
    });
    return above == hull_.begin() ? hull_.front() : *std::prev(above);
  }

 private:
  std::vector<ExecutionOption> options_;
  std::vector<int> representatives_;
  std::vector<int> hull_;
  std::vector<double> hull_table_;  // hull_cost at min_quant_time() + i, when the span is small

  [[nodiscard]] double hull_cost_on_hull(std::int64_t quant_time) const;
};

}  // namespace kareus::pipeline
