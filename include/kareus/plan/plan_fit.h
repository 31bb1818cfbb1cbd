// kareus/plan/plan_fit.h - whether a plan fits the job and GPU that run it: its comm configs fit the
// workload (partition/comm_fit.h's rules applied to every instruction) and its clocks are clocks
// the GPU has.
//
// The one plan check, called wherever a plan is read for a job: `kareus simulate` and the planner
// (planner::check_plan_fits adds the workload block check), the runtime and so the C API, Python's
// PipelineFrequencyOptimizer and kareusd clients (runtime/runtime.h, against the clocks the clock
// backend reports), kareus.plan.ExecutionPlan and MegatronJob (kareus._runtime.check_plan_fits,
// against the GPU preset), and the artifact's schedule files. Units: CTAs, MHz.
#pragma once

#include <string_view>
#include <vector>

#include "kareus/partition/comm_fit.h"
#include "kareus/plan/plan.h"
#include "kareus/workload/workload.h"

namespace kareus::plan {

/// Checks every instruction that runs nanobatched (effective_overlap) against the rules of
/// partition/comm_fit.h; a nanobatched instruction needs a workload of 2 nanobatches. Configs
/// of instructions that run without overlap are not used and not checked. A nonzero
/// limits.default_ctas must lie within limits.max_ctas too. Does not check the
/// workload block (check_plan_workload) or the clocks. Throws InputError
/// "<origin>: stage S instruction I (forward microbatch M): ..." naming the key and the rule.
void check_plan_comm_configs(const Plan& plan, const workload::Workload& workload, const partition::CommLimits& limits,
                             std::string_view origin);

/// The GPU's part of the plan check, as numbers (device::GpuSpec's, or a clock backend's list),
/// so that the check needs no device library.
struct PlanLimits {
  partition::CommLimits comm;
  std::vector<int> clocks_mhz;  ///< the GPU's supported SM clocks, any order; empty: not checked
  std::string gpu = "the GPU";  ///< names the GPU in messages ("A100-SXM4-40GB", "GPU 0 (NVML)")
};

/// Every instruction's clock is one of `limits.clocks_mhz` (when known). Throws InputError
/// "<origin>: stage S instruction I (forward microbatch M): freq_mhz 1411 is not a clock of A100
/// (210..1410 MHz in 15 MHz steps)".
void check_plan_clocks(const Plan& plan, const PlanLimits& limits, std::string_view origin);

/// The whole check: check_plan_clocks and check_plan_comm_configs.
void check_plan_fits(const Plan& plan, const workload::Workload& workload, const PlanLimits& limits,
                     std::string_view origin);

/// The whole check for a caller that knows the GPU but not the workload (the runtime): against
/// the workload the plan's block records (plan_target) when the block has a model shape. A
/// hand-made plan whose block has none gets its clocks checked and every comm config's CTAs within
/// 1..limits.comm.max_ctas; its keys and slots need a workload and are not checked.
void check_plan_fits(const Plan& plan, const PlanLimits& limits, std::string_view origin);

}  // namespace kareus::plan
