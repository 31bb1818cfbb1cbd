// kareus/planner/summary_writer.h - a plan job's output folder: the plans and summary.json.
//
// DIR/plans/<method>/plan_NN.json (kareus.plan/1) per frontier point and DIR/summary.json
// (plan::kSummarySchema, plan/frontier.h; docs/formats.md): every method's frontier, the comparison, the partition
// searches and what the numbers came from.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "kareus/planner/plan_job_result.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

/// Where write_plan_job puts the plan of `method`'s frontier point `index`, relative to DIR.
[[nodiscard]] std::string plan_file(Method method, std::size_t index);

/// Writes DIR/plans/<method>/plan_NN.json and DIR/summary.json (atomically, summary last).
void write_plan_job(const std::filesystem::path& dir, const workload::Workload& workload, const PlanJobResult& result);

}  // namespace kareus::planner
