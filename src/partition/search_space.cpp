#include "kareus/partition/search_space.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kareus/common/error.h"
#include "kareus/common/json_fields.h"

namespace kareus::partition {

nlohmann::ordered_json knob_config_to_json(const KnobConfig& config) {
  return {{"freq_mhz", config.freq_mhz}, {"ctas", config.ctas}, {"slot", config.slot}};
}

KnobConfig knob_config_from_json(const nlohmann::json& config, std::string_view origin) {
  if (!config.is_object()) throw InputError(fmt::format("{}: a config must be a JSON object", origin));
  // Exactly knob_config_to_json's fields: a misspelled one ("ctass") is refused, not ignored.
  json_fields::reject_unknown(config, {"freq_mhz", "ctas", "slot"}, origin);
  // Checked as long long first: get<int> would wrap a value past int's range silently.
  const auto integer = [&](std::string_view key, long long minimum, long long maximum) {
    const nlohmann::json& value = json_fields::require(config, key, origin);
    if (!value.is_number_integer() || value.get<long long>() < minimum || value.get<long long>() > maximum) {
      throw InputError(fmt::format("{}: field '{}' must be an integer in [{}, {}], found {}", origin, key, minimum,
                                   maximum, json_fields::excerpt(value)));
    }
    return static_cast<int>(value.get<long long>());
  };
  return {integer("freq_mhz", 1, 100000), integer("ctas", 0, kMaxCtas),
          json_fields::require_string(config, "slot", origin)};
}

std::vector<int> CtaRange::values() const {
  std::vector<int> values;
  for (int ctas = min; ctas <= max; ctas += step) values.push_back(ctas);
  return values;
}

CtaRange cta_range(std::span<const int> values, std::string_view flag) {
  const bool shape_ok = values.size() == 2 || values.size() == 3;
  const CtaRange range{shape_ok ? values[0] : 0, shape_ok ? values[1] : 0, values.size() == 3 ? values[2] : 1};
  if (!shape_ok || range.min < 1 || range.max < range.min || range.step < 1 || range.max > kMaxCtas) {
    throw InputError(fmt::format("{} {}: expected MIN:MAX[:STEP] with 1 <= MIN <= MAX <= {} and STEP >= 1, e.g. 3:30:3",
                                 flag, fmt::join(values, ":"), kMaxCtas));
  }
  return range;
}

SlotPolicy parse_slot_policy(const std::string& text) {
  if (text == "all") return SlotPolicy::kAll;
  if (text == "artifact") return SlotPolicy::kArtifact;
  throw InputError(fmt::format("--slots {}: expected \"all\" or \"artifact\"", text));
}

std::vector<std::string> artifact_slots(const std::string& key) {
  // What ml-energy/kareus searched per key (docs/kareus.md section 2); a restriction of ours.
  static const std::map<std::string, std::vector<std::string>, std::less<>> kSlots = {
      {"fwd_attn", {"norm_0", "linear_0", "rope_0", "attn_0"}},
      {"fwd_mlp", {"norm_0", "linear_0", "activation_0"}},
      {"bwd_attn", {"norm_0", "linear_0", "attn_0", "rope_0"}},
      {"bwd_mlp", {"norm_0", "linear_0", "activation_0"}},
      {"fwd_qkv_ar", {"norm_0", "linear_0"}},
      {"fwd_qkv_ag", {"norm_0", "linear_0", "rope_0"}},
      {"fwd_ao_ag", {"attn_0", "linear_0"}},
      {"fwd_ao_ar", {"attn_0"}},
      {"bwd_o_ar", {"norm_0"}},
      {"bwd_o_ag", {"norm_0", "linear_0"}},
      {"bwd_a_ag", {"attn_0"}},
      {"bwd_a_rs", {"attn_0"}},
      {"bwd_qkv_rs", {"rope_0", "linear_0"}},
      {"bwd_qkv_ar", {"rope_0", "linear_0"}},
  };
  auto found = kSlots.find(key);
  return found == kSlots.end() ? std::vector<std::string>{} : found->second;
}

SearchSpace::SearchSpace(std::vector<int> clocks_mhz, std::vector<int> ctas, std::vector<std::string> slots)
    : clocks_mhz_(std::move(clocks_mhz)), ctas_(std::move(ctas)), slots_(std::move(slots)) {}

SpaceCoordinates SearchSpace::coordinates(std::size_t index) const {
  const std::size_t slot = index % slots_.size();
  index /= slots_.size();
  const std::size_t cta = index % ctas_.size();
  return {index / ctas_.size(), cta, slot};
}

KnobConfig SearchSpace::at(std::size_t index) const {
  const SpaceCoordinates at = coordinates(index);
  return {clocks_mhz_.at(at.clock), ctas_[at.cta], slots_[at.slot]};
}

std::size_t SearchSpace::index_of(const KnobConfig& config) const {
  auto position = [](const auto& values, const auto& value) {
    return static_cast<std::size_t>(std::find(values.begin(), values.end(), value) - values.begin());
  };
  const std::size_t clock = position(clocks_mhz_, config.freq_mhz);
  const std::size_t cta = position(ctas_, config.ctas);
  const std::size_t slot = position(slots_, config.slot);
  if (clock == clocks_mhz_.size() || cta == ctas_.size() || slot == slots_.size()) return size();
  return index_at({clock, cta, slot});
}

SearchSpace make_search_space(const Partition& partition, const std::vector<int>& clocks_mhz,
                              const SpaceOptions& options) {
  if (clocks_mhz.empty()) throw InputError("the clock list is empty");
  if (!partition.collective) return SearchSpace(clocks_mhz, {0}, {""});
  std::vector<std::string> slots;
  for (const Slot& slot : partition.slots) slots.push_back(slot.name);
  if (options.slots == SlotPolicy::kArtifact) {
    const std::vector<std::string> artifact = artifact_slots(partition.key);
    std::erase_if(slots, [&](const std::string& slot) {
      return std::find(artifact.begin(), artifact.end(), slot) == artifact.end();
    });
  }
  if (slots.empty()) {
    throw InputError(fmt::format("--slots artifact: the artifact searched no slot of partition {}", partition.key));
  }
  const bool tp_collective = partition.collective->collective->group == workload::CommGroup::kTp;
  return SearchSpace(clocks_mhz, (tp_collective ? options.tp_ctas : options.cp_ctas).values(), std::move(slots));
}

}  // namespace kareus::partition
