// kareus/plan/plan_fit.h - whether a plan's comm configs fit a workload (partition/comm_fit.h's
// rules applied to every instruction of a plan).
//
// Called wherever a plan is read for a job: `kareus simulate` and the planner
// (planner::check_plan_fits adds the workload and clock checks), the artifact's schedule files,
// and Python (kareus._runtime.check_plan_comm_configs, kareus.plan.ExecutionPlan). Units: CTAs.
#pragma once

#include <string_view>

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

}  // namespace kareus::plan
