// kareus/planner/plan_job.h - `kareus plan`: from a workload to the time-energy frontier of plans.
//
// The main job, end to end on one device model: per-partition measurements (search), exact
// per-instruction composition, the Phillips-Dessouky frontier over the 1F1B DAG, and the
// baselines (docs/kareus.md section 6): megatron (default clock, no overlap), perseus
// (per-instruction clocks, no overlap), nanobatch_perseus (overlap with default collective
// resources launched at partition start, plus per-instruction clocks) and kareus (clocks +
// per-partition CTA count and slot). Every method's plans are judged by the same plan simulator.
//
// What it is asked (plan_job_options.h), where it measures (plan_devices.h), what it finds
// (plan_job_result.h); comparison.h and summary_writer.h report it.
// Units: seconds, joules (whole job, one iteration), watts, MHz.
#pragma once

#include "kareus/device/device.h"
#include "kareus/planner/plan_devices.h"
#include "kareus/planner/plan_job_options.h"
#include "kareus/planner/plan_job_result.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

/// Runs the job. Throws InputError for bad options (check_plan_job), UnmeasuredError naming
/// the key, clock or serial work a replay lacks.
[[nodiscard]] PlanJobResult run_plan_job(const PlanDevices& devices, const workload::Workload& workload,
                                         const PlanJobOptions& options);

/// Measures, through `device`, everything run_plan_job needs to plan `workload` from logs
/// alone: every searchable key's search (as the plan job runs it, front repeats included), and
/// at every clock every instruction's serial and nanobatched (default comm) work and the
/// gradient reductions, each distinct piece `fixed_repeats` times. Pass a RecordingDevice to log it.
void measure_plan_inputs(device::Device& device, const workload::Workload& workload, const PlanJobOptions& options,
                         int fixed_repeats);

}  // namespace kareus::planner
