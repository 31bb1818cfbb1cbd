// kareus/plan/plan_simulator.h - executes a whole plan on the emulator and reports what it achieves.
//
// Every instruction runs at its planned clock with its planned comm configs (instruction.h:
// both streams, partitions back to back); a stage whose clock changes between instructions
// spends the GPU's clock-switch latency still at the old clock; 1F1B timing and static power
// while waiting come from the iteration simulator. The same simulator judges every method, so
// predicted and achieved can be compared. Units: seconds, joules (whole job), watts.
#pragma once

#include "kareus/device/instruction.h"
#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/plan/plan.h"
#include "kareus/workload/workload.h"

namespace kareus::plan {

/// Checks that `plan` fits `workload` (stages, microbatches, clocks the GPU supports, partition
/// keys of this workload). Throws InputError naming `origin` and what differs.
void check_plan_fits(const Plan& plan, const workload::Workload& workload, const device::GpuSpec& gpu,
                     std::string_view origin);

/// Runs `plan`; `overlap` kNone ignores partition configs (Megatron / Perseus).
[[nodiscard]] pipeline::IterationRun simulate_plan(const device::GpuSpec& gpu, const workload::Workload& workload,
                                                   const Plan& plan, device::OverlapMode overlap);

}  // namespace kareus::plan
