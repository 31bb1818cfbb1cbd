#include "kareus/pipeline/pipeline_dag.h"

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::pipeline {

int PipelineDag::find(const Instruction& instruction) const {
  for (int index = 0; index < static_cast<int>(operations.size()); ++index) {
    if (operations[index].kind == OperationKind::kInstruction && operations[index].instruction == instruction)
      return index;
  }
  return -1;
}

PipelineDag build_one_f_one_b_dag(const OneFOneBConfig& config) {
  const int chunks = config.chunks;
  const int chunk_count = static_cast<int>(config.stages.size());
  if (chunk_count < 1) throw InputError("1f1b dag: need at least 1 stage, found 0");
  if (chunks < 1) throw InputError(fmt::format("1f1b dag: chunks must be >= 1, found {}", chunks));
  if (chunk_count % chunks != 0) {
    throw InputError(fmt::format("1f1b dag: {} chunk option lists are not {} chunks per stage", chunk_count, chunks));
  }
  const int stages = chunk_count / chunks;
  if (config.microbatches < 1)
    throw InputError(fmt::format("1f1b dag: microbatches must be >= 1, found {}", config.microbatches));
  if (chunks > 1 && (stages < 2 || config.microbatches % stages != 0)) {
    throw InputError(
        fmt::format("1f1b dag: {} chunks per stage need >= 2 stages and microbatches divisible by the "
                    "stages, found {} stages and {} microbatches",
                    chunks, stages, config.microbatches));
  }
  if (!(config.unit_time_s > 0))
    throw InputError(fmt::format("1f1b dag: unit_time_s must be > 0, found {}", config.unit_time_s));
  if (!(config.static_power_w >= 0)) {
    throw InputError(fmt::format("1f1b dag: static_power_w must be >= 0, found {}", config.static_power_w));
  }
  // Every option gets its effective energy from the one static power the solver also uses.
  auto effective = [&](std::vector<ExecutionOption> options, std::string_view what) {
    for (ExecutionOption& option : options) {
      if (!(option.time_s >= 0) || !(option.energy_j >= 0)) {
        throw InputError(
            fmt::format("1f1b dag: {} option (knob {}) needs time_s >= 0 and energy_j >= 0, found {} s, {} J", what,
                        option.knob, option.time_s, option.energy_j));
      }
      option.effective_energy_j = option.energy_j - config.static_power_w * option.time_s;
    }
    return options;
  };
  PipelineDag dag;
  dag.stages = stages;
  dag.chunks = chunks;
  dag.static_power_w = config.static_power_w;
  dag.microbatches = config.microbatches;
  dag.unit_time_s = config.unit_time_s;
  // Chunk v in pipeline order is chunk v / stages of stage v % stages.
  for (int position = 0; position < chunk_count; ++position) {
    const StageOptions& options = config.stages[position];
    if (options.forward.empty() || options.backward.empty()) {
      const std::string which = chunks == 1 ? fmt::format("stage {}", position)
                                            : fmt::format("stage {} chunk {}", position % stages, position / stages);
      throw InputError(
          fmt::format("1f1b dag: {} has no {} options", which, options.forward.empty() ? "forward" : "backward"));
    }
    dag.specs.emplace_back(effective(options.forward, "forward"), config.unit_time_s,
                           config.quantum_rule);  // spec 2*position
    dag.specs.emplace_back(effective(options.backward, "backward"), config.unit_time_s,
                           config.quantum_rule);  // spec 2*position+1
  }
  int transfer_spec = -1;
  if (config.transfer) {
    transfer_spec = static_cast<int>(dag.specs.size());
    dag.specs.emplace_back(effective({*config.transfer}, "transfer"), config.unit_time_s, config.quantum_rule);
  }
  int reduce_spec = -1;
  if (config.gradient_reduce) {
    if (config.gradient_reduce->empty()) throw InputError("1f1b dag: gradient reduction has no options");
    reduce_spec = static_cast<int>(dag.specs.size());
    dag.specs.emplace_back(effective(*config.gradient_reduce, "gradient reduction"), config.unit_time_s,
                           config.quantum_rule);
  }

  // index[position][type][microbatch] -> operation, position = chunk x stages + stage
  const int microbatches = config.microbatches;
  std::vector<int> index(static_cast<std::size_t>(chunk_count) * 2 * microbatches);
  auto slot = [&](int position, Direction type, int microbatch) -> int& {
    return index[(static_cast<std::size_t>(position) * 2 + (type == Direction::kBackward)) * microbatches + microbatch];
  };
  for (int stage = 0; stage < stages; ++stage) {
    int previous = -1;
    for (const Instruction& instruction : interleaved_one_f_one_b(stage, stages, chunks, microbatches)) {
      const int id = static_cast<int>(dag.operations.size());
      const int position = instruction.chunk * stages + stage;
      dag.operations.push_back(
          {OperationKind::kInstruction, instruction, 2 * position + (instruction.type == Direction::kBackward)});
      slot(position, instruction.type, instruction.microbatch) = id;
      if (previous >= 0) dag.edges.emplace_back(previous, id);
      previous = id;
    }
    if (reduce_spec >= 0) {
      const int id = static_cast<int>(dag.operations.size());
      dag.operations.push_back({OperationKind::kGradientReduce, {stage, 0, Direction::kBackward}, reduce_spec});
      dag.edges.emplace_back(previous, id);
    }
  }
  auto connect = [&](int from, int to, const Instruction& sender) {
    if (transfer_spec < 0) {
      dag.edges.emplace_back(from, to);
      return;
    }
    const int id = static_cast<int>(dag.operations.size());
    dag.operations.push_back({OperationKind::kTransfer, sender, transfer_spec});
    dag.edges.emplace_back(from, id);
    dag.edges.emplace_back(id, to);
  };
  for (int position = 0; position + 1 < chunk_count; ++position) {
    const int next = position + 1;
    for (int microbatch = 0; microbatch < microbatches; ++microbatch) {
      connect(slot(position, Direction::kForward, microbatch), slot(next, Direction::kForward, microbatch),
              {position % stages, microbatch, Direction::kForward, position / stages});
      connect(slot(next, Direction::kBackward, microbatch), slot(position, Direction::kBackward, microbatch),
              {next % stages, microbatch, Direction::kBackward, next / stages});
    }
  }
  return dag;
}

}  // namespace kareus::pipeline
