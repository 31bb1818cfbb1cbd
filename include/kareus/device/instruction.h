// kareus/device/instruction.h - one pipeline instruction (forward or backward of one microbatch
// on one stage) executed on a Device (device.h): the emulator, a GPU, or replayed measurements.
//
// With overlap (nanobatching), an instruction is its stage's partitions in order (a backward
// with full recompute runs every forward partition first), then the nonpartition work of both
// nanobatches. Without overlap (Megatron), every op of the whole microbatch runs in sequence and
// collectives block compute. Each partition's collective runs with the config the rules of
// partition/comm_fit.h give it (comm_config_for): the planned one, or the GPU's default (NCCL's
// channel count, launched at the partition start).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kareus/device/device.h"
#include "kareus/partition/comm_config.h"
#include "kareus/workload/workload.h"

namespace kareus::device {

using workload::OverlapMode;

struct InstructionRun {
  double time_s = 0;
  double energy_j = 0;  ///< one GPU
};

/// Runs `direction`'s instruction of `stage` at `freq_mhz` on `device`, one measurement per
/// partition instance (nanobatch) or serial work (none; SerialWork keys "serial:layer_forward",
/// "serial:nonpartition_backward:stage1:nanobatch", ...). Keys missing from `choices` get the
/// default collective config. Throws InputError for a choice the GPU cannot run,
/// UnmeasuredError from a replay device without the record.
[[nodiscard]] InstructionRun run_instruction(Device& device, const workload::Workload& workload, int stage,
                                             Direction direction, int freq_mhz, OverlapMode overlap,
                                             const partition::CommConfigs& choices = {});

/// The part of an overlapped instruction that no comm choice changes: partitions without a
/// searchable collective (trails, a stage's first partition) at the default config, and the
/// nonpartition work of every nanobatch. What composition adds the searched keys' fronts to.
[[nodiscard]] InstructionRun run_fixed_work(Device& device, const workload::Workload& workload, int stage,
                                            Direction direction, int freq_mhz);

/// The DP gradient all-reduce of `stage` at the end of an iteration (zero when dp == 1), as
/// serial work "serial:gradient_reduction:stageS".
[[nodiscard]] InstructionRun run_gradient_reduction(Device& device, const workload::Workload& workload, int stage,
                                                    int freq_mhz);

}  // namespace kareus::device
