#include "kareus/plan/plan_fit.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"

namespace kareus::plan {
namespace {

// With interleaving (vpp > 1) the instruction's model chunk too.
std::string instruction_where(std::string_view origin, const StagePlan& stage, std::size_t index, int vpp = 1) {
  const PlannedInstruction& instruction = stage.instructions[index];
  const std::string chunk = vpp == 1 ? "" : fmt::format(" chunk {}", instruction.chunk);
  return fmt::format("{}: stage {} instruction {} ({} microbatch {}{})", origin, stage.stage, index,
                     to_string(instruction.type), instruction.microbatch, chunk);
}

// "210..1410 MHz in 15 MHz steps" for an even grid (every preset's), else the list itself.
std::string describe_clocks(std::vector<int> clocks_mhz) {
  std::sort(clocks_mhz.begin(), clocks_mhz.end());
  if (clocks_mhz.size() >= 3) {
    const int step = clocks_mhz[1] - clocks_mhz[0];
    bool even = step > 0;
    for (std::size_t i = 1; even && i < clocks_mhz.size(); ++i) even = clocks_mhz[i] - clocks_mhz[i - 1] == step;
    if (even) return fmt::format("{}..{} MHz in {} MHz steps", clocks_mhz.front(), clocks_mhz.back(), step);
  }
  return fmt::format("{} MHz", fmt::join(clocks_mhz, ", "));
}

}  // namespace

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
      const std::string where = instruction_where(origin, stage, index, workload.parallel.vpp);
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

void check_plan_clocks(const Plan& plan, const PlanLimits& limits, std::string_view origin) {
  if (limits.clocks_mhz.empty()) return;
  for (const StagePlan& stage : plan.stages) {
    for (std::size_t index = 0; index < stage.instructions.size(); ++index) {
      const int freq_mhz = stage.instructions[index].freq_mhz;
      if (std::find(limits.clocks_mhz.begin(), limits.clocks_mhz.end(), freq_mhz) != limits.clocks_mhz.end()) continue;
      throw InputError(fmt::format("{}: freq_mhz {} is not a clock of {} ({})", instruction_where(origin, stage, index),
                                   freq_mhz, limits.gpu, describe_clocks(limits.clocks_mhz)));
    }
  }
}

void check_plan_fits(const Plan& plan, const workload::Workload& workload, const PlanLimits& limits,
                     std::string_view origin) {
  check_plan_clocks(plan, limits, origin);
  check_plan_comm_configs(plan, workload, limits.comm, origin);
}

void check_plan_fits(const Plan& plan, const PlanLimits& limits, std::string_view origin) {
  const nlohmann::json block = nlohmann::json::parse(plan.workload_json, nullptr, false);
  if (block.is_object() && block.contains("shape")) {  // a recorded workload (the planner writes its shape)
    check_plan_fits(plan, plan_target(plan, origin).workload, limits, origin);
    return;
  }
  check_plan_clocks(plan, limits, origin);
  for (const StagePlan& stage : plan.stages) {
    for (std::size_t index = 0; index < stage.instructions.size(); ++index) {
      for (const auto& [key, config] : stage.instructions[index].partitions) {
        partition::require_ctas_within(config.ctas, limits.comm.max_ctas,
                                       fmt::format("{}: partition '{}'", instruction_where(origin, stage, index), key));
      }
    }
  }
}

}  // namespace kareus::plan
