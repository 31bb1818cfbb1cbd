#include "kareus/planner/overlap_calibration.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/common/nelder_mead.h"
#include "kareus/device/emulator.h"
#include "kareus/planner/plan_simulator.h"
#include "kareus/workload/model.h"

namespace kareus::planner {
namespace {

// A fit of a handful of parameters converges in a few hundred runs of the four iterations.
constexpr int kMaxFitEvaluations = 400;
constexpr double kFitTolerance = 1e-8;     // squared points: far below the targets' 3 decimals
constexpr double kBoundMargin = 0.01;      // of the range: closer than this to an end is "at the bound"
constexpr double kWorstRatioWeight = 6;    // the worst ratio's squared points count 7x in all
constexpr double kIterationWeight = 0.01;  // per percent squared: 10% off weighs as 1 point of ratio
// The iterations' goal is 10%: past 8% a wall 100x steeper, so the fit does not buy ratio with it.
constexpr double kIterationWallPercent = 8;
constexpr double kIterationWallWeight = 1;

}  // namespace

std::string OverlapTarget::name() const {
  return fmt::format("{} CP{} TP{} mbs{} {}k", model, cp, tp, mbs, seq / 1024);
}

const std::vector<OverlapTarget>& a100_targets() {
  // Megatron+Perseus and Nanobatching+Perseus fastest plans of the Kareus artifact, predicted from
  // real per-clock profiles of 2x8 A100-40GB: time (s) and average power per GPU (W)
  // (docs/kareus.md section 9).
  static const std::vector<OverlapTarget> targets = {
      {"llama3.2-3b", 1, 8, 8, 4096, 5.113, 275.2, 4.627, 284.4, 6.891, 6.069},
      {"llama3.2-3b", 2, 4, 8, 4096, 4.205, 303.9, 4.275, 294.3, 6.020, 5.633},
      {"llama3.2-3b", 2, 4, 8, 8192, 9.053, 285.7, 8.680, 313.6, 0, 12.124},  // Perseus slowest anomalous
      {"llama3.2-3b", 2, 4, 16, 4096, 7.981, 290.2, 7.777, 311.3, 10.202, 10.047},
      {"qwen3-1.7b", 1, 8, 8, 4096, 3.314, 257.2, 3.025, 266.0, 4.328, 3.714},
      {"qwen3-1.7b", 2, 4, 8, 4096, 2.836, 273.1, 3.206, 239.0, 3.798, 3.713},
  };
  return targets;
}

std::vector<OverlapTarget> targets_of(const std::vector<OverlapTarget>& targets, const std::string& model) {
  std::vector<OverlapTarget> selected;
  for (const OverlapTarget& target : targets) {
    if (target.model == model) selected.push_back(target);
  }
  return selected;
}

std::vector<BoundedParameter> overlap_fit_parameters() {
  return {
      // GPU-side, per partition: the event wait, the collective's launch and its wait for the
      // other ranks: NCCL's ring latency and a kernel launch (docs/gpu-data.md section 3).
      {"partition_sync_us", 30, 70},
      // Host-side, per partition: 10-40 PyTorch ops at 5-25 us of CPU each (docs/gpu-data.md).
      {"partition_host_us", 50, 1000},
      // Up to twice as long: a send/recv beside a GEMM ran up to 2x longer than alone (n1433,
      // docs/gpu-data.md section 3); the same contention slows the compute beside a collective by
      // 18.9% on average and 40% at most (Lee et al., arXiv 2507.03114, A100/H100).
      {"comm_overlap_slowdown", 0, 1},
      // Per step of ring attention: Transformer Engine's step loop, tens of PyTorch ops at 5-25
      // us each (docs/gpu-data.md section 3).
      {"cp_ring_step_us", 100, 1000},
      // FA2's causal backward at head dim 128 on A100 (docs/gpu-data.md section 4): the one
      // compute parameter here, since the iterations' times are fitted beside the ratios.
      {"attention_backward_efficiency", 0.37, 0.48},
  };
}

workload::Workload target_workload(const OverlapTarget& target) {
  workload::Parallelism parallel;
  parallel.cp = target.cp;
  parallel.tp = target.tp;
  parallel.mbs = target.mbs;
  parallel.seq = target.seq;
  parallel.layers_per_stage = {15, 13};
  return workload::make_workload(workload::load_model(target.model), parallel);
}

OverlapRun run_overlap_target_at(const device::GpuSpec& gpu, const OverlapTarget& target, int freq_mhz) {
  device::EmulatedDevice emulator = device::exact_emulator(gpu);
  const workload::Workload workload = target_workload(target);
  const pipeline::IterationRun none = simulate_locked_clock(emulator, workload, freq_mhz, workload::OverlapMode::kNone);
  const pipeline::IterationRun nanobatch =
      simulate_locked_clock(emulator, workload, freq_mhz, workload::OverlapMode::kNanobatch);
  return {none.time_s, none.avg_power_w, nanobatch.time_s, nanobatch.avg_power_w};
}

std::array<double, 4> OverlapRun::iteration_errors_percent(const OverlapTarget& target) const {
  auto percent = [](double ours, double real) { return 100 * (ours / real - 1); };
  return {percent(none_time_s, target.perseus_time_s), percent(nanobatch_time_s, target.nanobatch_time_s),
          percent(none_power_w, target.perseus_power_w), percent(nanobatch_power_w, target.nanobatch_power_w)};
}

OverlapRun run_overlap_target(const device::GpuSpec& gpu, const OverlapTarget& target) {
  return run_overlap_target_at(gpu, target, gpu.clock_max_mhz);
}

namespace {

/// The emulator's ratio minus the real one, in points, per target (and per slowest end with kBoth).
std::vector<double> ratio_errors_points(const device::GpuSpec& gpu, const std::vector<OverlapTarget>& targets,
                                        FitEnds ends) {
  std::vector<double> errors;
  for (const OverlapTarget& target : targets) {
    errors.push_back(100 * (run_overlap_target(gpu, target).ratio() - target.ratio()));
    if (ends == FitEnds::kBoth && target.has_slowest()) {
      errors.push_back(100 * (run_overlap_target_at(gpu, target, kSlowestClockMhz).ratio() - target.slowest_ratio()));
    }
  }
  return errors;
}

}  // namespace

OverlapFit fit_overlap(const device::GpuSpec& start, const std::vector<OverlapTarget>& targets,
                       const std::vector<BoundedParameter>& parameters, FitEnds ends) {
  if (targets.empty()) throw InputError("overlap fit: no targets");
  if (parameters.empty()) throw InputError("overlap fit: no parameters");
  OverlapFit fit{start, {}, {}, 0};
  std::vector<device::ParameterRef> refs;
  // Each value's place in its range is (1 + sin(u)) / 2: any u is in range, and unlike a clamp
  // there is no flat region beyond a bound for the simplex to collapse in.
  auto place_of = [](double u) { return 0.5 * (1 + std::sin(u)); };
  std::vector<double> position;  // the u of each parameter
  for (const BoundedParameter& parameter : parameters) {
    const std::optional<device::ParameterRef> ref = device::find_parameter(fit.gpu, parameter.name);
    if (!ref) throw InputError(fmt::format("'{}' is not a floating-point parameter of a GPU preset", parameter.name));
    if (!(parameter.min < parameter.max)) {
      throw InputError(
          fmt::format("overlap fit: {} has the empty range {}..{}", parameter.name, parameter.min, parameter.max));
    }
    refs.push_back(*ref);
    const double place = std::clamp((*ref->value - parameter.min) / (parameter.max - parameter.min), 0.0, 1.0);
    position.push_back(std::asin(2 * place - 1));
  }
  auto apply = [&](const std::vector<double>& point) {
    for (std::size_t index = 0; index < refs.size(); ++index) {
      const BoundedParameter& parameter = parameters[index];
      *refs[index].value = parameter.min + place_of(point[index]) * (parameter.max - parameter.min);
    }
  };
  // Points squared of every ratio, the worst counted kWorstRatioWeight times more (a fit that
  // meets five ratios by missing the sixth is not a model of overlap), plus the iterations' time
  // and power at the fastest end in percent squared: the ratios alone let a fit trade absolute
  // time for gain.
  auto objective = [&](const std::vector<double>& point) {
    apply(point);
    double sum = 0;
    double worst = 0;
    int count = 0;
    auto add_ratio = [&](double error) {
      sum += error * error;
      worst = std::max(worst, error * error);
      ++count;
    };
    for (const OverlapTarget& target : targets) {
      const OverlapRun run = run_overlap_target(fit.gpu, target);
      add_ratio(100 * (run.ratio() - target.ratio()));
      for (const double percent : run.iteration_errors_percent(target)) {
        const double beyond = std::max(0.0, std::abs(percent) - kIterationWallPercent);
        sum += kIterationWeight * percent * percent + kIterationWallWeight * beyond * beyond;
      }
      if (ends == FitEnds::kBoth && target.has_slowest()) {
        add_ratio(100 * (run_overlap_target_at(fit.gpu, target, kSlowestClockMhz).ratio() - target.slowest_ratio()));
      }
    }
    return (sum + kWorstRatioWeight * worst) / count;
  };
  int evaluations = 0;
  // Restart once from the best point: a collapsed first simplex can stall short of the minimum.
  for (const double step : {0.5, 0.1}) {
    position = nelder_mead(objective, position, step, evaluations + kMaxFitEvaluations / 2, kFitTolerance, evaluations);
  }
  apply(position);
  double squares = 0;
  const std::vector<double> errors = ratio_errors_points(fit.gpu, targets, ends);
  for (const double error : errors) squares += error * error;
  fit.rms_error_points = std::sqrt(squares / static_cast<double>(errors.size()));
  for (std::size_t index = 0; index < refs.size(); ++index) {
    const double place = place_of(position[index]);
    fit.values.push_back(*refs[index].value);
    fit.at_bound.push_back(place < kBoundMargin || place > 1 - kBoundMargin);
  }
  return fit;
}

std::vector<LeaveOneOutFold> leave_one_out(const device::GpuSpec& start, const std::vector<OverlapTarget>& targets,
                                           const std::vector<BoundedParameter>& parameters, FitEnds ends) {
  std::vector<LeaveOneOutFold> folds;
  for (std::size_t held = 0; held < targets.size(); ++held) {
    std::vector<OverlapTarget> rest;
    for (std::size_t index = 0; index < targets.size(); ++index) {
      if (index != held) rest.push_back(targets[index]);
    }
    std::vector<LeaveOneOutFold> fold = fit_and_predict(start, rest, {targets[held]}, parameters, ends);
    folds.push_back(std::move(fold.front()));
  }
  return folds;
}

std::vector<LeaveOneOutFold> fit_and_predict(const device::GpuSpec& start, const std::vector<OverlapTarget>& fitted,
                                             const std::vector<OverlapTarget>& predicted,
                                             const std::vector<BoundedParameter>& parameters, FitEnds ends) {
  const OverlapFit fit = fit_overlap(start, fitted, parameters, ends);
  std::vector<LeaveOneOutFold> folds;
  for (const OverlapTarget& target : predicted) {
    folds.push_back({target, fit, run_overlap_target(fit.gpu, target).ratio(),
                     run_overlap_target_at(fit.gpu, target, kSlowestClockMhz).ratio()});
  }
  return folds;
}

}  // namespace kareus::planner
