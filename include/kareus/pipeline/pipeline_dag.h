// kareus/pipeline/pipeline_dag.h - the operation DAG of one training iteration.
//
// Activity-on-node: every Operation (an instruction, a P2P transfer, a gradient reduction) is
// a node with its own CandidateExecutionOptions; an edge u -> v means v starts after u ends.
// The source and sink are implicit: operations without predecessors start at time 0, and the
// makespan is the latest finish. (PhillipsDessouky turns this into the activity-on-arc form it
// needs internally: each operation becomes an arc between its start and end events.)
// build_one_f_one_b_dag lays out synchronous 1F1B (schedule.h) for any stage and microbatch
// count, and Megatron's interleaved 1F1B when each stage holds several model chunks. Units: seconds, joules,
// `quant_time` in multiples of `unit_time_s`.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "kareus/pipeline/operation.h"
#include "kareus/pipeline/schedule.h"

namespace kareus::pipeline {

enum class OperationKind { kInstruction, kTransfer, kGradientReduce };

/// A node of the DAG. Operations that run the same work (all forwards of one stage) share
/// one entry of PipelineDag::specs (lowtime's OperationSpec).
struct Operation {
  OperationKind kind = OperationKind::kInstruction;
  Instruction instruction;  ///< stage, microbatch, type; for transfers the sending stage
  int spec = 0;             ///< index into PipelineDag::specs
};

struct PipelineDag {
  int stages = 0;  ///< pipeline ranks (GPUs per microbatch path)
  int chunks = 1;  ///< model chunks per stage (virtual pipeline stages); 1 = 1F1B
  int microbatches = 0;
  double unit_time_s = 0;
  double static_power_w = 0;  ///< per GPU; effective_energy_j of every option uses it
  std::vector<CandidateExecutionOptions> specs;
  std::vector<Operation> operations;
  std::vector<std::pair<int, int>> edges;  ///< (before, after) operation indices

  /// The operation index of an instruction, or -1.
  [[nodiscard]] int find(const Instruction& instruction) const;
};

/// Options of every instruction of one stage (all its microbatches run the same work).
struct StageOptions {
  std::vector<ExecutionOption> forward;
  std::vector<ExecutionOption> backward;
};

struct OneFOneBConfig {
  int microbatches = 1;
  double unit_time_s = 0.001;
  double static_power_w = 0;  ///< sets every option's effective_energy_j = energy_j - static_power_w * time_s
  /// One per model chunk, in pipeline order: chunk c of stage s at c x (size / chunks) + s
  /// (workload::Workload::virtual_stage). With chunks 1, one per pipeline stage.
  std::vector<StageOptions> stages;
  int chunks = 1;                           ///< model chunks per stage; > 1 lays out interleaved 1F1B
  std::optional<ExecutionOption> transfer;  ///< P2P activation/gradient send between stages
  std::optional<std::vector<ExecutionOption>> gradient_reduce;  ///< DP>1: reduction after each stage's last backward
  QuantumRule quantum_rule = QuantumRule::kFastest;             ///< see CandidateExecutionOptions
};

/// The 1F1B DAG: consecutive instructions of a stage (in interleaved_one_f_one_b's order), and
/// between chunks in pipeline order v = c x stages + s: F(v,m) -> F(v+1,m), B(v+1,m) -> B(v,m)
/// (through a transfer operation when `transfer` is set). So with chunks the last stage's chunk c
/// feeds stage 0's chunk c + 1 in forward, and stage 0's chunk c + 1 feeds the last stage's chunk
/// c in backward. A gradient reduction follows each stage's last instruction when
/// `gradient_reduce` is set. Every instruction of chunk v takes the options stages[v].
/// Throws InputError on an empty stage list, microbatches < 1, unit_time_s <= 0,
/// static_power_w < 0, a negative time or energy, a stage without forward or backward options,
/// and with chunks > 1 on a stage list not a multiple of chunks, fewer than 2 stages, or
/// microbatches not a multiple of the stages (Megatron's microbatch groups).
[[nodiscard]] PipelineDag build_one_f_one_b_dag(const OneFOneBConfig& config);

}  // namespace kareus::pipeline
