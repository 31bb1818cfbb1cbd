// kareus/planner/plan_job_options.h - what a plan job is asked to do, checked before any work.
//
// The methods to run, the clocks and knob space they may use, the search budget and seed, and
// how plans are solved and composed. Units: seconds, MHz.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kareus/compose/instruction_options.h"
#include "kareus/device/device.h"
#include "kareus/partition/search_space.h"
#include "kareus/planner/method.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

struct PlanJobOptions {
  std::vector<Method> methods = {kMethods.begin(), kMethods.end()};
  std::vector<int> clocks_mhz;  ///< instruction clocks every method may use
  partition::SpaceOptions space;
  /// Solver time unit; 0 = automatic: 1 ms, or coarser so a solve takes at most ~20,000 steps
  /// (long iterations, e.g. 70B at PP 8, would otherwise need 100,000s of max-flows).
  double unit_time_s = 0;
  bool exact_unit = false;  ///< solve at exactly the unit, never finer (planner/solver_unit.h)
  int max_plans = 10;       ///< frontier plans per method written and simulated (evenly spread in time)
  compose::ComposeOptions compose;
  /// Per-partition search budget as a fraction of each key's space (the artifact's spaces are
  /// searched with 10%); 0 = measure every config (exhaustive).
  double search_budget_fraction = 0.1;
  std::uint64_t seed = 0;  ///< search seed
  /// Measurements of each config on a key's reported front before composing (1 = none
  /// repeated): real measurements are noisy, and a front picked from single noisy
  /// measurements favours configs that were measured lucky. Compose uses the means.
  int front_repeats = 2;
  /// kareus may run any instruction without nanobatching, or nanobatched with the default comm
  /// configs, where the solver finds that better (false: always its searched compositions).
  bool overlap_per_instruction = true;
  /// Cost each composed option by running its instruction on the execution device (exact on the
  /// emulator and on replayed logs) instead of the composition's representative x count sum.
  /// Off for a live GPU, where it would measure every first/last-layer instance per option.
  bool recost_compositions = true;
  /// Iteration times (seconds, as achieved) kareus also plans within, as it does within each
  /// baseline point's time: a job's current iteration time, say. At most kMaxWithinTimes; each
  /// finite and > 0; needs the kareus method.
  std::vector<double> within_times_s;
  std::function<void(const std::string&)> progress;  ///< one line per step, for stderr
};

inline constexpr std::size_t kMaxWithinTimes = 64;

/// Checks the options against the workload and GPU before any work: methods, clocks, --within,
/// and that nanobatching methods have --nanobatches 2. Throws InputError naming the flag.
void check_plan_job(const device::GpuSpec& gpu, const workload::Workload& workload, const PlanJobOptions& options);

}  // namespace kareus::planner
