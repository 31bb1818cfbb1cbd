// kareus/compose/instruction_options.h - per-instruction (time, energy) options from partition fronts.
//
// Fourth stage of the data flow (search -> compose -> pipeline). An instruction (forward or
// backward of one microbatch on one stage) runs at one clock; each partition key gets one comm
// config, shared by every instance of that key in the instruction (all layers, both
// nanobatches; a backward's recompute forward has its own). The instruction's time and energy
// are the sum over its partitions (they run back to back), so at a clock f its options are the
// exact Pareto sum of the keys' fronts, each the key's representative scaled by its instance
// count, plus the fixed work (partitions without a searchable collective, trails,
// nonpartition ops). No fudge factors; the only approximation is that the first and last
// layers' instances cost what the representative does. Pareto filtering is on (time, effective energy = energy -
// P_static x time), the cost the pipeline solver minimizes. Units: seconds, joules (one GPU), MHz.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kareus/device/instruction.h"
#include "kareus/partition/search_space.h"
#include "kareus/search/pareto.h"
#include "kareus/workload/workload.h"

namespace kareus::compose {

/// Measurements of each key's representative partition, by key (any clocks; compose picks
/// those at each clock): what the search evaluated.
using PartitionMeasurements = std::map<std::string, std::vector<search::Evaluation>, std::less<>>;

struct ComposedOption {
  int freq_mhz = 0;
  double time_s = 0;               ///< predicted instruction time
  double energy_j = 0;             ///< predicted instruction energy, one GPU
  partition::CommConfigs choices;  ///< comm config per searchable key of the instruction
};

struct ComposeOptions {
  /// Bound on options kept per clock after each Pareto sum (evenly spread in time; the
  /// fastest and slowest always kept). 0 = no bound (exact, may grow).
  int max_options_per_clock = 24;
};

struct InstructionComposition {
  std::vector<ComposedOption> options;  ///< every clock's front, clock ascending then time ascending
  int pruned_points = 0;                ///< points dropped by max_options_per_clock (0 = exact)
  std::vector<int> skipped_clocks_mhz;  ///< clocks where some key had no measurement
};

/// How many instances of each searchable key an instruction runs (recompute included).
[[nodiscard]] std::map<std::string, int, std::less<>> key_instance_counts(const workload::Workload& workload, int stage,
                                                                          Direction direction);

/// Composes the options of `direction`'s instruction of `stage` over `clocks_mhz`. The fixed
/// work (device::run_fixed_work) is measured on `device` at each clock; throws what it throws
/// (UnmeasuredError from a replay device without the record).
[[nodiscard]] InstructionComposition compose_instruction(device::Device& device, const workload::Workload& workload,
                                                         int stage, Direction direction,
                                                         const PartitionMeasurements& measurements,
                                                         const std::vector<int>& clocks_mhz,
                                                         const ComposeOptions& options = {});

}  // namespace kareus::compose
