// kareus/planner/comparison.h - a method's frontier against the baselines' (docs/metrics.md).
//
// Max throughput against megatron's fastest plan, iso-time and iso-energy against perseus's
// frontier, each a reduction in percent (positive: the method is better).
#pragma once

#include <optional>

#include "kareus/planner/plan_job_result.h"

namespace kareus::planner {

/// docs/kareus.md section 6: max throughput vs `megatron`, iso metrics vs `perseus`.
[[nodiscard]] Comparison compare(const MethodResult& method, const MethodResult* megatron, const MethodResult* perseus);

}  // namespace kareus::planner
