// Flags shared by the subcommands that take a workload (model + parallelism) or a GPU.
//
// add_workload_flags binds --model, --tp, --cp, --pp, --dp, --mbs, --seq, --microbatches,
// --nanobatches, --recompute and --layers-per-stage to a WorkloadFlags; resolve() loads the
// model and calls workload::make_workload, which checks every rule and names the flag that
// breaks it. Defaults are the artifact's setting (DESIGN.md: llama3.2-3b, TP 8, CP 1, PP 2,
// DP 1, mbs 8, seq 4096, 8 microbatches, 2 nanobatches, full recompute).
#pragma once

#include <string>

#include "kareus/device/gpu_spec.h"
#include "kareus/workload/workload.h"

namespace CLI {
class App;
}

namespace kareus::cli {

struct WorkloadFlags {
  std::string model = "llama3.2-3b";
  workload::Parallelism parallel;
  std::string recompute = "full";
  std::string layers_per_stage;  ///< empty = even split, earlier stages take the remainder

  /// The validated workload. Throws InputError naming the offending flag.
  [[nodiscard]] workload::Workload resolve() const;
};

void add_workload_flags(CLI::App* command, WorkloadFlags& flags);

struct GpuFlags {
  std::string gpu = "a100-40gb";

  /// The preset (or preset file). Throws InputError naming --gpu and the presets.
  [[nodiscard]] device::GpuSpec resolve() const;
};

void add_gpu_flags(CLI::App* command, GpuFlags& flags);

}  // namespace kareus::cli
