// kareus/partition/search_space.h - the knobs of one partition and their discrete space.
//
// A KnobConfig is what the search chooses per partition key: the GPU SM clock, the CTA
// count of the overlapped collective, and its launch slot (docs/kareus.md section 3). The
// space is clocks x CTA counts x slots, enumerated clock-major so an index is stable.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kareus/partition/comm_config.h"
#include "kareus/partition/partition.h"

namespace kareus::partition {

struct KnobConfig {
  int freq_mhz = 0;
  int ctas = 0;      ///< CTAs of the collective; 0 when the partition has none
  std::string slot;  ///< launch slot name; empty when the partition has no collective

  friend bool operator==(const KnobConfig&, const KnobConfig&) = default;
};

/// A config as JSON, {"freq_mhz", "ctas", "slot"}: what evaluation logs, measurement logs and
/// search reports record.
[[nodiscard]] nlohmann::ordered_json knob_config_to_json(const KnobConfig& config);
/// Reads knob_config_to_json's object: freq_mhz an integer in [1, 100000], ctas in [0, 65536],
/// slot a string, and no other field. Throws InputError "<origin>: field 'ctas' must be an
/// integer in [0, 65536], found 4294967304" (or naming a missing or unknown field).
[[nodiscard]] KnobConfig knob_config_from_json(const nlohmann::json& config, std::string_view origin);

/// An inclusive range of CTA counts.
struct CtaRange {
  int min = 1;
  int max = 1;
  int step = 1;
  [[nodiscard]] std::vector<int> values() const;
};

/// A range from the values of a MIN:MAX[:STEP] flag (the command line splits it): MIN and MAX,
/// then STEP (default 1), with 1 <= MIN <= MAX <= kMaxCtas and STEP >= 1. Throws InputError
/// naming `flag` and the values.
[[nodiscard]] CtaRange cta_range(std::span<const int> values, std::string_view flag);

enum class SlotPolicy {
  kAll,       ///< every slot of the partition (default)
  kArtifact,  ///< only the slots the Kareus artifact searched for this key
};

/// Parses "all" / "artifact"; throws InputError naming --slots.
[[nodiscard]] SlotPolicy parse_slot_policy(const std::string& text);

struct SpaceOptions {
  SlotPolicy slots = SlotPolicy::kAll;
  CtaRange tp_ctas{3, 30, 3};  ///< TP collectives: all-reduce, SP all-gather / reduce-scatter (artifact: 3..30 step 3)
  CtaRange cp_ctas{1, 20, 1};  ///< CP all-gather / reduce-scatter (artifact: 1..20)
};

/// The slots the artifact searched per key (docs/kareus.md section 2 table); empty if none.
[[nodiscard]] std::vector<std::string> artifact_slots(const std::string& key);

/// A config's position in the space: one index into each of clocks_mhz(), ctas(), slots().
struct SpaceCoordinates {
  std::size_t clock = 0;
  std::size_t cta = 0;
  std::size_t slot = 0;

  friend bool operator==(const SpaceCoordinates&, const SpaceCoordinates&) = default;
};

class SearchSpace {
 public:
  SearchSpace(std::vector<int> clocks_mhz, std::vector<int> ctas, std::vector<std::string> slots);

  [[nodiscard]] std::size_t size() const { return clocks_mhz_.size() * ctas_.size() * slots_.size(); }
  [[nodiscard]] KnobConfig at(std::size_t index) const;
  /// Index of `config`, or size() if it is not in the space.
  [[nodiscard]] std::size_t index_of(const KnobConfig& config) const;

  /// The coordinates of `index` (< size()); clock-major, slots vary fastest.
  [[nodiscard]] SpaceCoordinates coordinates(std::size_t index) const;
  /// The index at `coordinates` (each < its dimension's size); inverse of coordinates().
  [[nodiscard]] std::size_t index_at(const SpaceCoordinates& coordinates) const {
    return (coordinates.clock * ctas_.size() + coordinates.cta) * slots_.size() + coordinates.slot;
  }

  [[nodiscard]] const std::vector<int>& clocks_mhz() const { return clocks_mhz_; }
  [[nodiscard]] const std::vector<int>& ctas() const { return ctas_; }
  [[nodiscard]] const std::vector<std::string>& slots() const { return slots_; }

 private:
  std::vector<int> clocks_mhz_;
  std::vector<int> ctas_;
  std::vector<std::string> slots_;
};

/// The space of `partition` over `clocks_mhz`. Partitions without a collective get one
/// (ctas 0, slot "") per clock. Throws InputError if the options leave no slot or CTA count.
[[nodiscard]] SearchSpace make_search_space(const Partition& partition, const std::vector<int>& clocks_mhz,
                                            const SpaceOptions& options);

}  // namespace kareus::partition
