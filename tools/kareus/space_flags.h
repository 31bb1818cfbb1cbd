// Flags that shape the per-partition search space (--clocks, --slots, --tp-ctas, --cp-ctas),
// shared by the subcommands that search or plan.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kareus/device/gpu_spec.h"
#include "kareus/partition/search_space.h"
#include "workload_flags.h"

namespace CLI {
class App;
}

namespace kareus::cli {

struct SpaceFlags {
  std::vector<std::string> clocks{"artifact"};  ///< --clocks split at ':' by CLI11
  std::string slots = "all";
  std::vector<int> tp_ctas{3, 30, 3};
  std::vector<int> cp_ctas{1, 20, 1};

  /// The clock list on `gpu`; throws InputError naming --clocks.
  [[nodiscard]] std::vector<int> resolve_clocks(const device::GpuSpec& gpu) const;
  /// Slots and CTA ranges; throws InputError naming the flag.
  [[nodiscard]] partition::SpaceOptions resolve_space() const;
};

/// The clocks a --clocks flag names on `gpu`: "all", "artifact" (device::artifact_clocks) or
/// MIN:MAX:STEP, as CLI11 split them at ':'. Throws InputError naming `flag`.
[[nodiscard]] std::vector<int> resolve_clock_flag(const device::GpuSpec& gpu, const std::vector<std::string>& values,
                                                  std::string_view flag);

/// Binds a --clocks-like flag (split at ':') to `values`.
void add_clocks_option(CLI::App* command, std::vector<std::string>& values);
/// Binds a MIN:MAX[:STEP] CTA flag (split at ':') to `values`.
void add_cta_range_option(CLI::App* command, const std::string& flag, std::vector<int>& values,
                          const std::string& help);

/// The flags of a job that searches or plans: the workload and GPU (workload_flags.h) and the
/// knob space.
void add_job_flags(CLI::App* command, WorkloadFlags& workload, GpuFlags& gpu, SpaceFlags& space);

}  // namespace kareus::cli
