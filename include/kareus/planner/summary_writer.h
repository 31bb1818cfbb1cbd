// kareus/planner/summary_writer.h - a plan job's output folder: the plans and summary.json.
//
// DIR/plans/<method>/plan_NN.json (kareus.plan/1) per frontier point and DIR/summary.json
// (plan::kSummarySchema, plan/frontier.h; docs/formats.md): every method's frontier, the comparison, the partition
// searches and what the numbers came from.
#pragma once

#include <filesystem>

#include "kareus/planner/plan_job_result.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

/// Writes DIR/plans/<method>/plan_NN.json and DIR/summary.json (atomically, summary last).
void write_plan_job(const std::filesystem::path& dir, const workload::Workload& workload, const PlanJobResult& result);

}  // namespace kareus::planner
