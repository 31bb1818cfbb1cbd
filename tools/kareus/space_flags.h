// Flags that shape the per-partition search space (--clocks, --slots, --tp-ctas, --cp-ctas),
// shared by the subcommands that search or plan.
#pragma once

#include <string>
#include <vector>

#include "kareus/device/gpu_spec.h"
#include "kareus/partition/search_space.h"
#include "workload_flags.h"

namespace CLI {
class App;
}

namespace kareus::cli {

struct SpaceFlags {
  std::string clocks = "artifact";
  std::string slots = "all";
  std::string tp_ctas = "3:30:3";
  std::string cp_ctas = "1:20:1";

  /// The clock list on `gpu`; throws InputError naming --clocks.
  [[nodiscard]] std::vector<int> resolve_clocks(const device::GpuSpec& gpu) const;
  /// Slots and CTA ranges; throws InputError naming the flag.
  [[nodiscard]] partition::SpaceOptions resolve_space() const;
};

/// The flags of a job that searches or plans: the workload and GPU (workload_flags.h) and the
/// knob space.
void add_job_flags(CLI::App* command, WorkloadFlags& workload, GpuFlags& gpu, SpaceFlags& space);

}  // namespace kareus::cli
