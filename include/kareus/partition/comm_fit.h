// kareus/partition/comm_fit.h - whether comm configs fit a workload, and what each partition runs with.
//
// The one owner of the comm-config rules; every reader of comm configs applies them through
// here: the planner and `kareus simulate` (planner/plan_simulator.h), the artifact's schedule
// files (interop/artifact_schedule.h), the device layer (device/instruction.h), Python
// (kareus._runtime.check_plan_comm_configs / Workload.comm_configs, kareus.plan.ExecutionPlan).
// plan/plan_fit.h applies the instruction check to every instruction of a plan.
//
// The rules, for one nanobatched instruction (forward or backward of `stage`; a backward under
// full recompute runs the forward's partitions first, instruction_passes):
//  1. Keys: every key with a config is a searchable key the instruction runs (trails and the
//     other direction's keys are refused), and every searchable key it runs has one.
//  2. Slots: a config's slot is a slot of the key's steady-state partition, a slot of one of
//     the instruction's instances of the key, or "none" (after all compute).
//  3. CTAs: 1..max_ctas, one CTA limit: the GPU's SM count when the GPU is known, else kMaxCtas.
// And what each partition instance runs with (comm_config_for):
//  - an instance lacking the config's slot (a stage's first or last layer lacks the steady
//    layer's leading memory-bound run) launches at its own first slot;
//  - a trail, or a searchable key without a config (default plans), runs at the GPU's default
//    CTAs (GpuSpec::default_comm_ctas) at its first slot.
// Units: CTAs (one per SM).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/partition/comm_config.h"
#include "kareus/partition/partition.h"
#include "kareus/workload/workload.h"

namespace kareus::partition {

/// The GPU's part of the rules, as numbers (device::GpuSpec's sm_count and default_comm_ctas),
/// so that the rules need no device library. Default: no GPU known.
struct CommLimits {
  int max_ctas = kMaxCtas;  ///< largest CTA count: the GPU's SMs, or kMaxCtas without a GPU
  int default_ctas = 0;     ///< what trails and unplanned keys run with; 0 when unknown
};

/// The passes an instruction runs: a backward with full recompute runs the forward first.
[[nodiscard]] std::vector<Direction> instruction_passes(const workload::Workload& workload, Direction type);

/// The rules for the instructions of one kind (`type` on `stage`), built once from the
/// partition builder and applied to any number of instructions. Requires nanobatches == 2.
class InstructionCommRules {
 public:
  InstructionCommRules(const workload::Workload& workload, int stage, Direction type);

  /// The searchable keys the instruction runs, in execution order, each once: the keys its
  /// comm configs must name.
  [[nodiscard]] const std::vector<std::string>& keys() const { return keys_; }

  /// Rules 1 to 3 for the comm configs of one nanobatched instruction. Throws InputError
  /// "<where>: unknown partition key 'K' (...)", "<where>: nanobatched, but no comm config for
  /// partition K (...)", or what check_config throws.
  void check(const CommConfigs& configs, const CommLimits& limits, std::string_view where) const;

  /// Rules 2 and 3 for one config of `key` (one of keys()), also for a config given outside a
  /// plan (an artifact's scheds entry). Throws InputError
  /// "<where>: partition 'K': ctas 132 is outside 1..108 (one CTA per SM)" or
  /// "<where>: partition 'K': no launch slot 'S' (slots: a, b, none)".
  void check_config(const std::string& key, const CommConfig& config, const CommLimits& limits,
                    std::string_view where) const;

 private:
  std::vector<std::string> keys_;
  std::map<std::string, std::vector<std::string>, std::less<>> slots_;  ///< steady-state's, then the instances'
};

/// The config `partition` (an instance of an instruction whose configs were checked) runs
/// with: nullopt without a collective; else the fallbacks of the header comment, with
/// `default_ctas` (GpuSpec::default_comm_ctas) for trails and keys missing from `configs`.
[[nodiscard]] std::optional<CommConfig> comm_config_for(const Partition& partition, const CommConfigs& configs,
                                                        int default_ctas);

/// Rule 3 alone, for a CTA count a device is asked to run: throws InputError
/// "<what>: ctas N is outside 1..M (one CTA per SM)" (or "(kareus's CTA limit)" for kMaxCtas).
void require_ctas_within(int ctas, int max_ctas, std::string_view what);

}  // namespace kareus::partition
