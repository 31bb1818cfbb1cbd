#include "kareus/planner/solved_plan.h"

#include <algorithm>
#include <cassert>

#include "kareus/common/evenly_spread.h"

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

int frontier_position_by(const pipeline::PhillipsDessoukyResult& solved, double time_s) {
  // The frontier is time ascending: the last point by time_s.
  const auto after = std::partition_point(solved.frontier.begin(), solved.frontier.end(),
                                          [&](int index) { return solved.iterations[index].time_s <= time_s; });
  return static_cast<int>(after - solved.frontier.begin()) - 1;
}

std::vector<int> sample_frontier(const pipeline::PhillipsDessoukyResult& solved, int max_points,
                                 const std::vector<double>& at_times_s) {
  std::vector<int> chosen;
  for (std::size_t position : evenly_spread_positions(solved.frontier.size(), static_cast<std::size_t>(max_points))) {
    chosen.push_back(static_cast<int>(position));
  }
  for (double time_s : at_times_s) {
    if (const int by = frontier_position_by(solved, time_s); by >= 0) chosen.push_back(by);
  }
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return chosen;
}

}  // namespace kareus::planner
