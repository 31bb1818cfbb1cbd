// kareus/report/report.h - the HTML report of `kareus plan`.
//
// Last stage of the data flow. One self-contained report.html (inline SVG, no scripts, no
// network): the methods' frontiers in one plot with the comparison table, a pipeline timeline
// of kareus's fastest plan coloured by clock, and each partition key's measured configs with
// its Pareto front.
#pragma once

#include <filesystem>
#include <string>

#include "kareus/device/gpu_spec.h"
#include "kareus/planner/plan_job.h"
#include "kareus/workload/workload.h"

namespace kareus::report {

/// The report's HTML.
[[nodiscard]] std::string render_report(const device::GpuSpec& gpu, const workload::Workload& workload,
                                        const planner::PlanJobResult& result);

/// Writes DIR/report.html atomically.
void write_report(const std::filesystem::path& dir, const device::GpuSpec& gpu, const workload::Workload& workload,
                  const planner::PlanJobResult& result);

}  // namespace kareus::report
