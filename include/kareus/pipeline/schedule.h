// kareus/pipeline/schedule.h - pipeline schedules: which instruction each stage runs, in order.
//
// An Instruction is the forward or backward of one microbatch on one stage (lowtime's
// vocabulary). Synchronous 1F1B (Megatron's non-interleaved schedule): stage s of S
// warms up with min(S - s - 1, M) forwards, alternates one forward and one backward,
// and drains the remaining backwards. For S = 2, M = 8, stage 0 runs
// F0 F1 B0 F2 B1 ... F7 B6 B7 and stage 1 runs F0 B0 F1 B1 ... F7 B7.
#pragma once

#include <vector>

#include "kareus/common/direction.h"

namespace kareus::pipeline {

struct Instruction {
  int stage = 0;
  int microbatch = 0;
  Direction type = Direction::kForward;
  int chunk = 0;  ///< model chunk (virtual stage) on this stage, 0-based; 0 without interleaving

  friend bool operator==(const Instruction&, const Instruction&) = default;
};

/// The 1F1B instruction order of `stage` (0-based) in a pipeline of `stages` stages and
/// `microbatches` microbatches. Precondition: 0 <= stage < stages, microbatches >= 1.
[[nodiscard]] std::vector<Instruction> one_f_one_b(int stage, int stages, int microbatches);

/// The interleaved 1F1B order of `stage` with `chunks` model chunks per stage, at Megatron's
/// default microbatch group size (`stages`). chunks == 1 is one_f_one_b. Precondition:
/// 0 <= stage < stages, chunks >= 1, microbatches >= 1, and with chunks > 1: stages >= 2 and
/// microbatches a multiple of stages (workload::make_workload's rules).
[[nodiscard]] std::vector<Instruction> interleaved_one_f_one_b(int stage, int stages, int chunks, int microbatches);

}  // namespace kareus::pipeline
