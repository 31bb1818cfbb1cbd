// kareus/planner/overlap_calibration.h - the emulator's overlap gain against real A100 runs.
//
// What nanobatched overlap saves is the quantity every kareus decision rests on. The Kareus
// artifact predicted, from real per-clock profiles of 2x8 A100-40GB, the fastest Megatron+Perseus
// and Nanobatching+Perseus iterations of Llama 3.2 3B in four configurations and of Qwen3 1.7B
// in two (PP 2, 8 microbatches, stage split 15/13, full recompute); their ratio T(N+P) / T(Perseus) is the
// measured overlap gain (bench/RESULTS.md, "Emulator calibration"). This module runs the same
// iterations on the emulator (every instruction at the maximum clock, which is what both fastest
// plans amount to), fits preset parameters to the ratios (and the iterations' time and power)
// within given bounds, and checks the fit by leave-one-out (fit on all targets but one, predict
// the one left out) and leave-one-model-out (fit_and_predict). Times in s, power in W.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "kareus/device/gpu_spec.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

/// One real configuration: fastest Perseus and N+P iteration time and average power per GPU,
/// and the slowest (minimum-energy) ones, whose instructions run mostly at the artifact's lowest
/// clock, 900 MHz (0 where the source has none).
struct OverlapTarget {
  std::string model = "llama3.2-3b";  ///< a model preset (data/models)
  int cp = 1, tp = 8, mbs = 8, seq = 4096;
  double perseus_time_s = 0, perseus_power_w = 0;
  double nanobatch_time_s = 0, nanobatch_power_w = 0;
  double perseus_slowest_time_s = 0, nanobatch_slowest_time_s = 0;

  [[nodiscard]] double ratio() const { return nanobatch_time_s / perseus_time_s; }
  [[nodiscard]] bool has_slowest() const { return perseus_slowest_time_s > 0 && nanobatch_slowest_time_s > 0; }
  /// T(N+P slowest) / T(Perseus slowest).
  [[nodiscard]] double slowest_ratio() const { return nanobatch_slowest_time_s / perseus_slowest_time_s; }
  /// "llama3.2-3b CP1 TP8 mbs8 4k".
  [[nodiscard]] std::string name() const;
};

/// The six configurations measured on 2x8 A100-40GB: four of Llama 3.2 3B, then two of Qwen3 1.7B.
[[nodiscard]] const std::vector<OverlapTarget>& a100_targets();

/// The targets of one model.
[[nodiscard]] std::vector<OverlapTarget> targets_of(const std::vector<OverlapTarget>& targets,
                                                    const std::string& model);

/// The target's workload: its model, PP 2, 8 microbatches, stages of 15 and 13 layers.
[[nodiscard]] workload::Workload target_workload(const OverlapTarget& target);

/// The emulator's sequential (Megatron/Perseus fastest) and nanobatched (N+P fastest: NCCL's
/// default CTAs, launched at each partition's start) iterations at the GPU's maximum clock.
struct OverlapRun {
  double none_time_s = 0, none_power_w = 0;
  double nanobatch_time_s = 0, nanobatch_power_w = 0;

  [[nodiscard]] double ratio() const { return nanobatch_time_s / none_time_s; }
  /// Percent off `target`'s real runs: Perseus time, N+P time, Perseus power, N+P power.
  [[nodiscard]] std::array<double, 4> iteration_errors_percent(const OverlapTarget& target) const;
};

[[nodiscard]] OverlapRun run_overlap_target(const device::GpuSpec& gpu, const OverlapTarget& target);

/// The clock the slowest ends are run at: the artifact's lowest (docs/kareus.md section 3).
inline constexpr int kSlowestClockMhz = 900;

/// The same two iterations with every instruction at `freq_mhz`.
[[nodiscard]] OverlapRun run_overlap_target_at(const device::GpuSpec& gpu, const OverlapTarget& target, int freq_mhz);

/// A preset parameter (find_parameter's key) and the physical range a fit may move it in.
struct BoundedParameter {
  std::string name;
  double min = 0, max = 0;
};

/// What the A100 preset fits to the ratios and the iterations, each in its cited range: the
/// per-partition GPU-side cost (partition_sync_us), the host's time to issue a partition
/// (partition_host_us), the collective's slowdown beside compute beyond its HBM share
/// (comm_overlap_slowdown), the GPU's wait per step of ring attention (cp_ring_step_us) and the
/// attention backward's efficiency, which trades against it in the iterations' time. Every other
/// parameter is set from spec, measurement or the iteration fit.
[[nodiscard]] std::vector<BoundedParameter> overlap_fit_parameters();

/// What a fit matches: the fastest ends' ratios, or those and the slowest ends' (each target
/// that has them counts twice, once per end).
enum class FitEnds { kFastest, kBoth };

struct OverlapFit {
  device::GpuSpec gpu;          ///< the start with the fitted values
  std::vector<double> values;   ///< in the order of the parameters
  std::vector<bool> at_bound;   ///< a value within 1% of its range's end: the form, not the constant, is wrong
  double rms_error_points = 0;  ///< of the ratios fitted, in points (100 x ratio)
};

/// Fits `parameters` of `start` (Nelder-Mead over each value's position in its range) so the
/// emulator's ratios match `targets`' in the least-squares sense, the worst ratio weighed more
/// and the iterations' time and power (percent off the real runs, a steeper wall past 8%)
/// beside them. Throws InputError for an unknown parameter, an empty range or no targets.
[[nodiscard]] OverlapFit fit_overlap(const device::GpuSpec& start, const std::vector<OverlapTarget>& targets,
                                     const std::vector<BoundedParameter>& parameters, FitEnds ends = FitEnds::kFastest);

/// One fold of leave-one-out: fitted on every target but `held_out`, then run on it.
struct LeaveOneOutFold {
  OverlapTarget held_out;
  OverlapFit fit;
  double predicted_ratio = 0;
  double predicted_slowest_ratio = 0;  ///< at kSlowestClockMhz
  [[nodiscard]] double error_points() const { return 100 * (predicted_ratio - held_out.ratio()); }
  [[nodiscard]] double slowest_error_points() const {
    return held_out.has_slowest() ? 100 * (predicted_slowest_ratio - held_out.slowest_ratio()) : 0;
  }
};

[[nodiscard]] std::vector<LeaveOneOutFold> leave_one_out(const device::GpuSpec& start,
                                                         const std::vector<OverlapTarget>& targets,
                                                         const std::vector<BoundedParameter>& parameters,
                                                         FitEnds ends = FitEnds::kFastest);

/// Fitted on `fitted`, run on each of `predicted`: one fold per predicted target, all with the
/// same fit (leave-one-model-out: fit on one model's configurations, predict another's).
[[nodiscard]] std::vector<LeaveOneOutFold> fit_and_predict(const device::GpuSpec& start,
                                                           const std::vector<OverlapTarget>& fitted,
                                                           const std::vector<OverlapTarget>& predicted,
                                                           const std::vector<BoundedParameter>& parameters,
                                                           FitEnds ends = FitEnds::kFastest);

}  // namespace kareus::planner
