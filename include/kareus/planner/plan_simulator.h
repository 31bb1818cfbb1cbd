// kareus/planner/plan_simulator.h - executes a whole plan on a device and reports what it achieves.
//
// Every instruction runs at its planned clock, nanobatched with its planned comm configs or in
// sequence as its overlap says (device/instruction.h: partitions back to back); a stage whose
// clock changes between instructions spends the GPU's clock-switch latency still at the old
// clock; 1F1B timing and static power while waiting come from the iteration simulator. The
// same simulator judges every method, on the exact emulator or on replayed measurements, so
// predicted and achieved can be compared. Units: seconds, joules (whole job), watts, MHz.
#pragma once

#include <optional>
#include <string>

#include "kareus/device/instruction.h"
#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/plan/plan.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

/// Checks that `plan` is for `workload` on `gpu` (plan::check_plan_workload), that its comm
/// configs fit (plan::check_plan_comm_configs with the GPU's SM count) and that the GPU runs its
/// clocks. Throws InputError naming `origin` and what differs.
void check_plan_fits(const plan::Plan& plan, const workload::Workload& workload, const device::GpuSpec& gpu,
                     std::string_view origin);

/// Runs `plan` on `device`. Each instruction runs as plan::effective_overlap(instruction,
/// `fallback`) says. Throws what the device throws (UnmeasuredError on replay).
[[nodiscard]] pipeline::IterationRun simulate_plan(device::Device& device, const workload::Workload& workload,
                                                   const plan::Plan& plan,
                                                   std::optional<workload::OverlapMode> fallback = std::nullopt);

/// Every instruction of `workload` at `freq_mhz` with `overlap` and default comm configs.
[[nodiscard]] plan::Plan uniform_plan(const workload::Workload& workload, int freq_mhz, workload::OverlapMode overlap);

/// `kareus simulate --clock`: simulate_plan of uniform_plan.
[[nodiscard]] pipeline::IterationRun simulate_locked_clock(device::Device& device, const workload::Workload& workload,
                                                           int freq_mhz, workload::OverlapMode overlap);

}  // namespace kareus::planner
