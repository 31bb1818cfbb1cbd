#include "kareus/planner/solved_plan.h"

#include <cassert>

namespace kareus::planner {

plan::Plan plan_from_options(const pipeline::PipelineDag& dag, std::span<const int> option_indices,
                             std::string workload_json, const ApplyKnob& apply) {
  assert(option_indices.size() == dag.operations.size() && "plan_from_options: one option per operation");
  plan::Plan plan;
  plan.workload_json = std::move(workload_json);
  plan.stages.resize(dag.stages);
  for (int stage = 0; stage < dag.stages; ++stage) plan.stages[stage].stage = stage;
  // Instructions were added stage by stage in (interleaved) 1F1B order, so DAG order = execution order.
  for (std::size_t op = 0; op < dag.operations.size(); ++op) {
    const pipeline::Operation& operation = dag.operations[op];
    if (operation.kind != pipeline::OperationKind::kInstruction) continue;
    const pipeline::Instruction& instruction = operation.instruction;
    plan::PlannedInstruction planned;
    planned.type = instruction.type;
    planned.microbatch = instruction.microbatch;
    planned.chunk = instruction.chunk;
    apply({instruction.stage, instruction.chunk, instruction.type,
           dag.specs[operation.spec].options()[option_indices[op]].knob},
          planned);
    plan.stages[instruction.stage].instructions.push_back(std::move(planned));
  }
  return plan;
}

}  // namespace kareus::planner
