// Per-instruction options of each method, before the pipeline solve (private to plan_job).
//
// perseus and nanobatch_perseus get one option per clock (the instruction run at that clock
// with or without overlap); kareus gets the composed options of its partition searches. Each
// ExecutionOption's knob indexes the stage's Knob list, which says what to apply.
#pragma once

#include <string>
#include <vector>

#include "kareus/compose/instruction_options.h"
#include "kareus/device/instruction.h"
#include "kareus/pipeline/pipeline_dag.h"
#include "kareus/planner/plan_job.h"

namespace kareus::planner {

/// What one option of a stage's forward or backward applies: a clock and comm configs.
struct Knob {
  int freq_mhz = 0;
  device::OverlapMode overlap = device::OverlapMode::kNone;
  partition::CommConfigs choices;  ///< nanobatched keys' configs (none: empty)
};

struct StageKnobs {
  std::vector<Knob> forward;
  std::vector<Knob> backward;
};

/// Per-instruction options of one method, before solving.
struct MethodOptions {
  std::vector<pipeline::StageOptions> stages;
  std::vector<StageKnobs> knobs;  ///< ExecutionOption::knob indexes these
  int pruned_points = 0;
};

/// One option per clock of every instruction, run on `device` with `overlap` and default comm configs.
[[nodiscard]] MethodOptions clock_options(device::Device& device, const workload::Workload& workload,
                                          const std::vector<int>& clocks, device::OverlapMode overlap);

/// Each searchable key's measurements: searched on devices.search (then clocks the search left
/// unmeasured filled, and the front re-measured options.front_repeats times), or taken from
/// devices.measurements (every logged config; InputError naming a key or clock it lacks).
/// Records what it did in `searches`.
[[nodiscard]] compose::PartitionMeasurements measure_partitions(const PlanDevices& devices,
                                                                const workload::Workload& workload,
                                                                const PlanJobOptions& options,
                                                                std::vector<KeySearch>& searches);

/// The composed options of every instruction from the partition measurements; fixed work is
/// measured on `device`.
[[nodiscard]] MethodOptions composed_options(device::Device& device, const workload::Workload& workload,
                                             const compose::PartitionMeasurements& measurements,
                                             const PlanJobOptions& options);

}  // namespace kareus::planner
