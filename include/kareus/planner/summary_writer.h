// kareus/planner/summary_writer.h - a plan job's output folder: the plans and summary.json.
//
// DIR/plans/<method>/plan_NN.json (kareus.plan/1) per frontier point and DIR/summary.json
// (plan::kSummarySchema, plan/frontier.h; docs/formats.md): every method's frontier, the comparison, kareus's plan
// within each --within time, the partition searches and what the numbers came from.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

#include "kareus/planner/plan_job_result.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

/// Where write_plan_job puts the plan of `method`'s frontier point `index`, relative to DIR.
[[nodiscard]] std::string plan_file(Method method, std::size_t index);

/// The position in `method`'s frontier of its least-energy point that runs within `time_s` (the
/// slowest no slower: the frontier is Pareto-optimal, time ascending), or none.
[[nodiscard]] std::optional<std::size_t> position_within(const MethodResult& method, double time_s);

/// Writes DIR/plans/<method>/plan_NN.json and DIR/summary.json (atomically, summary last).
void write_plan_job(const std::filesystem::path& dir, const workload::Workload& workload, const PlanJobResult& result);

}  // namespace kareus::planner
