#include "kareus/plan/plan_fit.h"

#include <map>
#include <utility>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::plan {

void check_plan_comm_configs(const Plan& plan, const workload::Workload& workload, const partition::CommLimits& limits,
                             std::string_view origin) {
  if (limits.default_ctas != 0) {
    partition::require_ctas_within(limits.default_ctas, limits.max_ctas,
                                   fmt::format("{}: the GPU's default_comm_ctas", origin));
  }
  // Each model chunk's instruction runs what its own stage of chunk_stages does.
  const workload::Workload chunks = workload::chunk_stages(workload);
  // built once per chunk (its pipeline position) and type
  std::map<std::pair<int, Direction>, partition::InstructionCommRules> rules;
  for (const StagePlan& stage : plan.stages) {
    for (std::size_t index = 0; index < stage.instructions.size(); ++index) {
      const PlannedInstruction& instruction = stage.instructions[index];
      if (effective_overlap(instruction) != workload::OverlapMode::kNanobatch) continue;
      if (stage.stage < 0 || stage.stage >= workload.parallel.pp) {
        throw InputError(fmt::format("{}: stage {} is outside the workload's 0..{} (--pp {})", origin, stage.stage,
                                     workload.parallel.pp - 1, workload.parallel.pp));
      }
      if (instruction.chunk >= workload.parallel.vpp) {
        throw InputError(fmt::format("{}: stage {} chunk {} is outside the workload's 0..{} (--vpp {})", origin,
                                     stage.stage, instruction.chunk, workload.parallel.vpp - 1, workload.parallel.vpp));
      }
      const std::string where =
          workload.parallel.vpp == 1
              ? fmt::format("{}: stage {} instruction {} ({} microbatch {})", origin, stage.stage, index,
                            to_string(instruction.type), instruction.microbatch)
              : fmt::format("{}: stage {} instruction {} ({} microbatch {} chunk {})", origin, stage.stage, index,
                            to_string(instruction.type), instruction.microbatch, instruction.chunk);
      const int position = workload.virtual_stage(stage.stage, instruction.chunk);
      if (workload.parallel.nanobatches != 2) {
        throw InputError(fmt::format("{}: a nanobatched instruction needs --nanobatches 2, this run has {}", where,
                                     workload.parallel.nanobatches));
      }
      auto found = rules.find({position, instruction.type});
      if (found == rules.end()) {
        found = rules.try_emplace({position, instruction.type}, chunks, position, instruction.type).first;
      }
      found->second.check(instruction.partitions, limits, where);
    }
  }
}

}  // namespace kareus::plan
