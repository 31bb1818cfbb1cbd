// Plans for the interop tests: 1F1B over the workload's stages and microbatches, with clocks,
// launch slots and CTA counts that differ per stage, instruction and key, so a swapped or lost
// entry shows in a comparison.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kareus/interop/artifact_schedule.h"
#include "kareus/partition/partition.h"
#include "kareus/pipeline/schedule.h"
#include "kareus/plan/plan.h"
#include "kareus/workload/model.h"
#include "kareus/workload/workload.h"

namespace kareus::interop::testing {

inline workload::Workload test_workload(int cp = 1, int microbatches = 4,
                                        workload::Recompute recompute = workload::Recompute::kFull) {
  workload::Parallelism parallel;
  parallel.cp = cp;
  parallel.microbatches = microbatches;
  parallel.recompute = recompute;
  return workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
}

inline int test_clock_mhz(int stage, Direction type, int microbatch, int variant = 0) {
  return 1410 - 15 * (stage * 17 + (type == Direction::kBackward ? 7 : 0) + microbatch + variant * 3);
}

/// `overlap` false: no partitions anywhere (a Perseus-style plan).
inline plan::Plan test_plan(const workload::Workload& workload, bool overlap = true, int variant = 0) {
  const ArtifactKeyLayout layout = artifact_key_layout(workload);
  plan::Plan result;
  result.workload_json = nlohmann::json::parse(workload::workload_to_json(workload)).dump();  // as plan files hold it
  result.predicted_time_s = 4.25 + variant * 0.125;
  result.predicted_energy_j = 21813.5 - variant * 100;
  const int stages = workload.parallel.pp;
  for (int stage = 0; stage < stages; ++stage) {
    plan::StagePlan stage_plan{stage, {}};
    for (const auto& instruction : pipeline::one_f_one_b(stage, stages, workload.parallel.microbatches)) {
      plan::PlannedInstruction planned{instruction.type,
                                       instruction.microbatch,
                                       test_clock_mhz(stage, instruction.type, instruction.microbatch, variant),
                                       overlap ? workload::OverlapMode::kNanobatch : workload::OverlapMode::kNone,
                                       {}};
      if (overlap) {
        std::vector<std::string> keys =
            instruction.type == Direction::kForward ? layout.forward_keys : layout.recompute_keys;
        if (instruction.type == Direction::kBackward) {
          keys.insert(keys.end(), layout.backward_keys.begin(), layout.backward_keys.end());
        }
        for (std::size_t index = 0; index < keys.size(); ++index) {
          const auto slots = partition::representative_partition(workload, keys[index]).slots;
          const std::size_t pick = (stage + instruction.microbatch + index) % slots.size();
          planned.partitions[keys[index]] = {slots[pick].name,
                                             static_cast<int>(2 + index * 3 + instruction.microbatch + stage * 5)};
        }
      }
      stage_plan.instructions.push_back(planned);
    }
    result.stages.push_back(stage_plan);
  }
  return result;
}

}  // namespace kareus::interop::testing
