#include "kareus/pipeline/iteration_simulator.h"

#include <algorithm>
#include <cassert>

#include <nlohmann/json.hpp>

namespace kareus::pipeline {

IterationRun simulate_one_f_one_b(int stages, int microbatches, const InstructionCostFn& cost, double static_power_w,
                                  int gpus_per_stage, const std::vector<InstructionCost>& tail) {
  return simulate_interleaved_one_f_one_b(stages, 1, microbatches, cost, static_power_w, gpus_per_stage, tail);
}

IterationRun simulate_interleaved_one_f_one_b(int stages, int chunks, int microbatches, const InstructionCostFn& cost,
                                              double static_power_w, int gpus_per_stage,
                                              const std::vector<InstructionCost>& tail) {
  assert(stages >= 1 && chunks >= 1 && microbatches >= 1);
  std::vector<std::vector<Instruction>> orders;
  for (int stage = 0; stage < stages; ++stage) {
    orders.push_back(interleaved_one_f_one_b(stage, stages, chunks, microbatches));
  }
  // End times by (chunk x stages + stage, microbatch) per type, in pipeline order; -1 = not yet run.
  const int positions = stages * chunks;
  std::vector<std::vector<double>> forward_end(positions, std::vector<double>(microbatches, -1));
  std::vector<std::vector<double>> backward_end = forward_end;
  std::vector<std::size_t> next(stages, 0);
  IterationRun run;
  run.stages.resize(stages);
  std::size_t remaining = static_cast<std::size_t>(positions) * 2 * microbatches;
  while (remaining > 0) {
    bool progressed = false;
    for (int stage = 0; stage < stages; ++stage) {
      while (next[stage] < orders[stage].size()) {
        const Instruction& instruction = orders[stage][next[stage]];
        const bool forward = instruction.type == Direction::kForward;
        const int position = instruction.chunk * stages + stage;
        double dependency_end = 0;
        if (forward && position > 0) dependency_end = forward_end[position - 1][instruction.microbatch];
        if (!forward && position + 1 < positions) dependency_end = backward_end[position + 1][instruction.microbatch];
        if (dependency_end < 0) break;  // its producer has not run yet
        StageRun& stage_run = run.stages[stage];
        const double previous_end = stage_run.instructions.empty() ? 0 : stage_run.instructions.back().end_s;
        const InstructionCost instruction_cost = cost(instruction);
        const double start = std::max(previous_end, dependency_end);
        stage_run.instructions.push_back(
            {instruction, start, start + instruction_cost.time_s, instruction_cost.energy_j});
        stage_run.busy_s += instruction_cost.time_s;
        stage_run.energy_j += instruction_cost.energy_j;
        (forward ? forward_end : backward_end)[position][instruction.microbatch] = start + instruction_cost.time_s;
        ++next[stage];
        --remaining;
        progressed = true;
      }
    }
    assert(progressed && "1F1B schedule deadlocked");
    if (!progressed) break;
  }
  for (int stage = 0; stage < stages; ++stage) {
    StageRun& stage_run = run.stages[stage];
    stage_run.stage = stage;
    double end = stage_run.instructions.back().end_s;
    if (stage < static_cast<int>(tail.size())) {
      end += tail[stage].time_s;
      stage_run.busy_s += tail[stage].time_s;
      stage_run.energy_j += tail[stage].energy_j;
    }
    run.time_s = std::max(run.time_s, end);
  }
  for (StageRun& stage_run : run.stages) {
    stage_run.energy_j += static_power_w * (run.time_s - stage_run.busy_s);  // waiting in P2P receives
    run.energy_j += stage_run.energy_j * gpus_per_stage;
  }
  run.avg_power_w = run.energy_j / (run.time_s * gpus_per_stage * stages);
  return run;
}

std::string iteration_to_json(const IterationRun& run) {
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const StageRun& stage : run.stages) {
    stages.push_back({{"stage", stage.stage},
                      {"busy_s", stage.busy_s},
                      {"idle_s", run.time_s - stage.busy_s},
                      {"energy_j_per_gpu", stage.energy_j},
                      {"instructions", stage.instructions.size()}});
  }
  nlohmann::ordered_json document = {{"time_s", run.time_s},
                                     {"energy_j", run.energy_j},
                                     {"avg_power_w", run.avg_power_w},
                                     {"stages", std::move(stages)}};
  return document.dump(2);
}

}  // namespace kareus::pipeline
