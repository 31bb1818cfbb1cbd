#include "kareus/device/stream_schedule.h"

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::device {

StreamSchedule schedule_partition(const partition::Partition& partition, const partition::KnobConfig& config) {
  StreamSchedule schedule;
  const std::size_t ops = partition.compute_ops.size();
  schedule.launch_after_ops = ops;
  if (partition.collective) {
    const auto slot = partition.find_slot(config.slot);
    if (!slot) {
      std::vector<std::string> names;
      for (const partition::Slot& candidate : partition.slots) names.push_back(candidate.name);
      throw InputError(fmt::format("slot \"{}\" is not a slot of partition {} (slots: {})", config.slot, partition.key,
                                   fmt::join(names, ", ")));
    }
    schedule.has_collective = true;
    // A slot past the last op (a collective-only partition) launches at the start.
    schedule.launch_after_ops = std::min(partition.slots[*slot].first_op, ops);
  }
  for (std::size_t op = 0; op <= ops; ++op) {
    if (schedule.has_collective && op == schedule.launch_after_ops) {
      schedule.steps.push_back({StreamStepKind::kLaunchCollective, 0});
    }
    if (op < ops) schedule.steps.push_back({StreamStepKind::kComputeOp, op});
  }
  if (schedule.has_collective) schedule.steps.push_back({StreamStepKind::kJoin, 0});
  return schedule;
}

std::string describe(const StreamSchedule& schedule) {
  std::vector<std::string> parts;
  for (const StreamStep& step : schedule.steps) {
    switch (step.kind) {
      case StreamStepKind::kComputeOp:
        parts.push_back(fmt::format("op {}", step.op_index));
        break;
      case StreamStepKind::kLaunchCollective:
        parts.emplace_back("launch");
        break;
      case StreamStepKind::kJoin:
        parts.emplace_back("join");
        break;
    }
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace kareus::device
