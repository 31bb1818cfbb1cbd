// kareus/device/instruction.h - one pipeline instruction (forward or backward of one microbatch
// on one stage) executed on the emulator.
//
// With overlap (nanobatching), an instruction is its stage's partitions in order (a backward
// with full recompute runs every forward partition first), then the nonpartition work of both
// nanobatches. Without overlap (Megatron), every op of the whole microbatch runs in sequence and
// collectives block compute. Each partition key's collective uses the config given for it, or
// the GPU's default (NCCL's channel count, launched at the partition start).
#pragma once

#include <map>
#include <string>

#include "kareus/device/emulator.h"
#include "kareus/workload/workload.h"

namespace kareus::device {

enum class OverlapMode { kNone, kNanobatch };

/// Parses "none" / "nanobatch"; throws InputError naming --overlap.
[[nodiscard]] OverlapMode parse_overlap_mode(const std::string& text);

/// Collective knobs by partition key (clock comes from the instruction).
struct CommChoice {
  int ctas = 0;
  std::string slot;
};
using CommChoices = std::map<std::string, CommChoice, std::less<>>;

struct InstructionRun {
  double time_s = 0;
  double energy_j = 0;  ///< one GPU
};

/// Runs `direction`'s instruction of `stage` at `freq_mhz`. Keys missing from `choices` get
/// the default collective config. Throws InputError for a choice the GPU cannot run.
[[nodiscard]] InstructionRun run_instruction(const GpuSpec& gpu, const workload::Workload& workload, int stage,
                                             workload::Direction direction, int freq_mhz, OverlapMode overlap,
                                             const CommChoices& choices = {});

/// The DP gradient all-reduce of `stage` at the end of an iteration (zero when dp == 1).
[[nodiscard]] InstructionRun run_gradient_reduction(const GpuSpec& gpu, const workload::Workload& workload, int stage,
                                                    int freq_mhz);

}  // namespace kareus::device
