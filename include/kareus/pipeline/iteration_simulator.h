// kareus/pipeline/iteration_simulator.h - one whole training iteration from instruction costs.
//
// Runs synchronous 1F1B over every stage: an instruction starts when its stage's previous
// instruction and its pipeline dependency (F(s-1,m) before F(s,m), B(s+1,m) before B(s,m))
// have ended. Interleaved 1F1B likewise, over the chunks in pipeline order (chunk c of stage s
// at c x stages + s: the last stage's chunk c feeds stage 0's chunk c + 1). A GPU waiting in between draws the preset's
// static power (blocked in a P2P receive). Energy is per GPU per stage, then times the stage's GPUs (TP x CP x DP) for
// the job. Units: seconds, joules, watts.
#pragma once

#include <functional>
#include <vector>

#include <string>
#include "kareus/pipeline/schedule.h"

namespace kareus::pipeline {

struct InstructionCost {
  double time_s = 0;
  double energy_j = 0;  ///< one GPU
};

struct ScheduledInstruction {
  Instruction instruction;
  double start_s = 0;
  double end_s = 0;
  double energy_j = 0;
};

struct StageRun {
  int stage = 0;
  double busy_s = 0;    ///< time running instructions (and the final gradient reduction)
  double energy_j = 0;  ///< one GPU of the stage, over the whole iteration
  std::vector<ScheduledInstruction> instructions;
};

struct IterationRun {
  double time_s = 0;       ///< iteration time: the last stage to finish
  double energy_j = 0;     ///< whole job, all GPUs, one iteration
  double avg_power_w = 0;  ///< per GPU
  std::vector<StageRun> stages;
};

/// Costs of every instruction, by stage then position in that stage's (interleaved) 1F1B order.
using InstructionCostFn = std::function<InstructionCost(const Instruction&)>;

/// Times and integrates one 1F1B iteration. `tail` (optional, per stage) runs after the
/// stage's last instruction (the DP gradient reduction). Precondition: stages, microbatches >= 1.
[[nodiscard]] IterationRun simulate_one_f_one_b(int stages, int microbatches, const InstructionCostFn& cost,
                                                double static_power_w, int gpus_per_stage,
                                                const std::vector<InstructionCost>& tail = {});

/// simulate_one_f_one_b of interleaved 1F1B with `chunks` model chunks per stage, in
/// interleaved_one_f_one_b's order (its preconditions). chunks 1 is simulate_one_f_one_b.
[[nodiscard]] IterationRun simulate_interleaved_one_f_one_b(int stages, int chunks, int microbatches,
                                                            const InstructionCostFn& cost, double static_power_w,
                                                            int gpus_per_stage,
                                                            const std::vector<InstructionCost>& tail = {});

/// The iteration as JSON: {"time_s", "energy_j", "avg_power_w", "stages": [...]}.
[[nodiscard]] std::string iteration_to_json(const IterationRun& run);

}  // namespace kareus::pipeline
