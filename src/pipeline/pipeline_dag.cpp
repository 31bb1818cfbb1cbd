#include "kareus/pipeline/pipeline_dag.h"

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
  const int stages = static_cast<int>(config.stages.size());
  if (stages < 1) throw InputError("1f1b dag: need at least 1 stage, found 0");
  if (config.microbatches < 1)
    throw InputError(fmt::format("1f1b dag: microbatches must be >= 1, found {}", config.microbatches));
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
  dag.static_power_w = config.static_power_w;
  dag.microbatches = config.microbatches;
  dag.unit_time_s = config.unit_time_s;
  for (int stage = 0; stage < stages; ++stage) {
    const StageOptions& options = config.stages[stage];
    if (options.forward.empty() || options.backward.empty()) {
      throw InputError(
          fmt::format("1f1b dag: stage {} has no {} options", stage, options.forward.empty() ? "forward" : "backward"));
    }
    dag.specs.emplace_back(effective(options.forward, "forward"), config.unit_time_s,
                           config.quantum_rule);  // spec 2*stage
    dag.specs.emplace_back(effective(options.backward, "backward"), config.unit_time_s,
                           config.quantum_rule);  // spec 2*stage+1
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

  // index[stage][type][microbatch] -> operation
  const int microbatches = config.microbatches;
  std::vector<int> index(static_cast<std::size_t>(stages) * 2 * microbatches);
  auto slot = [&](int stage, Direction type, int microbatch) -> int& {
    return index[(static_cast<std::size_t>(stage) * 2 + (type == Direction::kBackward)) * microbatches + microbatch];
  };
  for (int stage = 0; stage < stages; ++stage) {
    int previous = -1;
    for (const Instruction& instruction : one_f_one_b(stage, stages, microbatches)) {
      const int id = static_cast<int>(dag.operations.size());
      dag.operations.push_back(
          {OperationKind::kInstruction, instruction, 2 * stage + (instruction.type == Direction::kBackward)});
      slot(stage, instruction.type, instruction.microbatch) = id;
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
  for (int stage = 0; stage + 1 < stages; ++stage) {
    for (int microbatch = 0; microbatch < microbatches; ++microbatch) {
      connect(slot(stage, Direction::kForward, microbatch), slot(stage + 1, Direction::kForward, microbatch),
              {stage, microbatch, Direction::kForward});
      connect(slot(stage + 1, Direction::kBackward, microbatch), slot(stage, Direction::kBackward, microbatch),
              {stage + 1, microbatch, Direction::kBackward});
    }
  }
  return dag;
}

}  // namespace kareus::pipeline
