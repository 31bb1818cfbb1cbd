#include "kareus/partition/comm_fit.h"

#include <algorithm>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::partition {
namespace {

void add_once(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

}  // namespace

std::vector<Direction> instruction_passes(const workload::Workload& workload, Direction type) {
  if (type == Direction::kBackward && workload.parallel.recompute == workload::Recompute::kFull) {
    return {Direction::kForward, Direction::kBackward};
  }
  return {type};
}

InstructionCommRules::InstructionCommRules(const workload::Workload& workload, int stage, Direction type) {
  std::map<std::string, std::vector<std::string>, std::less<>> instance_slots;
  for (const Direction pass : instruction_passes(workload, type)) {
    for (const Partition& partition : build_partitions(workload, stage, pass)) {
      if (!partition.searchable()) continue;
      add_once(keys_, partition.key);
      for (const Slot& slot : partition.slots) add_once(instance_slots[partition.key], slot.name);
    }
  }
  for (const std::string& key : keys_) {
    std::vector<std::string>& known = slots_[key];
    for (const Slot& slot : representative_partition(workload, key).slots) add_once(known, slot.name);
    for (const std::string& slot : instance_slots[key]) add_once(known, slot);
  }
}

void InstructionCommRules::check_config(const std::string& key, const CommConfig& config, const CommLimits& limits,
                                        std::string_view where) const {
  const std::string what = fmt::format("{}: partition '{}'", where, key);
  require_ctas_within(config.ctas, limits.max_ctas, what);
  const std::vector<std::string>& known = slots_.at(key);
  if (config.slot != kSlotNone && std::find(known.begin(), known.end(), config.slot) == known.end()) {
    throw InputError(
        fmt::format("{}: no launch slot '{}' (slots: {}, {})", what, config.slot, fmt::join(known, ", "), kSlotNone));
  }
}

void InstructionCommRules::check(const CommConfigs& configs, const CommLimits& limits, std::string_view where) const {
  for (const auto& [key, config] : configs) {
    if (!slots_.contains(key)) {
      throw InputError(fmt::format("{}: unknown partition key '{}' (this instruction's comm configs are for {}{})",
                                   where, key, keys_.empty() ? "no key" : fmt::format("{}", fmt::join(keys_, ", ")),
                                   key.ends_with("_trail") ? "; a trail runs at the GPU's default CTAs" : ""));
    }
    check_config(key, config, limits, where);
  }
  for (const std::string& key : keys_) {
    if (!configs.contains(key)) {
      throw InputError(fmt::format(
          "{}: nanobatched, but no comm config for partition {} (give its slot and ctas, or \"overlap\": \"none\")",
          where, key));
    }
  }
}

std::optional<CommConfig> comm_config_for(const Partition& partition, const CommConfigs& configs, int default_ctas) {
  if (!partition.collective) return std::nullopt;
  const std::string first_slot = partition.slots.empty() ? std::string(kSlotNone) : partition.slots.front().name;
  const auto found = partition.searchable() ? configs.find(partition.key) : configs.end();
  if (found == configs.end()) return CommConfig{first_slot, default_ctas};
  if (found->second.slot != kSlotNone && !partition.find_slot(found->second.slot)) {
    return CommConfig{first_slot, found->second.ctas};
  }
  return found->second;
}

void require_ctas_within(int ctas, int max_ctas, std::string_view what) {
  if (ctas < 1 || ctas > max_ctas) {
    throw InputError(fmt::format("{}: ctas {} is outside 1..{} ({})", what, ctas, max_ctas,
                                 max_ctas == kMaxCtas ? "kareus's CTA limit" : "one CTA per SM"));
  }
}

}  // namespace kareus::partition
