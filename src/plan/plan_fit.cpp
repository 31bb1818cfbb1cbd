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
  std::map<std::pair<int, Direction>, partition::InstructionCommRules> rules;  // built once per stage and type
  for (const StagePlan& stage : plan.stages) {
    for (std::size_t index = 0; index < stage.instructions.size(); ++index) {
      const PlannedInstruction& instruction = stage.instructions[index];
      if (effective_overlap(instruction) != workload::OverlapMode::kNanobatch) continue;
      if (stage.stage < 0 || stage.stage >= workload.parallel.pp) {
        throw InputError(fmt::format("{}: stage {} is outside the workload's 0..{} (--pp {})", origin, stage.stage,
                                     workload.parallel.pp - 1, workload.parallel.pp));
      }
      const std::string where = fmt::format("{}: stage {} instruction {} ({} microbatch {})", origin, stage.stage,
                                            index, to_string(instruction.type), instruction.microbatch);
      if (workload.parallel.nanobatches != 2) {
        throw InputError(fmt::format("{}: a nanobatched instruction needs --nanobatches 2, this run has {}", where,
                                     workload.parallel.nanobatches));
      }
      auto found = rules.find({stage.stage, instruction.type});
      if (found == rules.end()) {
        found = rules.try_emplace({stage.stage, instruction.type}, workload, stage.stage, instruction.type).first;
      }
      found->second.check(instruction.partitions, limits, where);
    }
  }
}

}  // namespace kareus::plan
