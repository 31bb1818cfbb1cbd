// Flags shared by the subcommands that take a workload (model + parallelism) or a GPU.
//
// add_workload_flags binds --model, --tp, --cp, --pp, --dp, --mbs, --seq, --microbatches,
// --nanobatches, --recompute, --layers-per-stage, --sequence-parallel and --vpp to a WorkloadFlags; resolve() loads the
// model and calls workload::make_workload, which checks every rule and names the flag that
// breaks it. Defaults are the artifact's setting (docs/kareus.md section 7: llama3.2-3b, TP 8, CP 1, PP 2,
// DP 1, mbs 8, 8 microbatches, 2 nanobatches, full recompute) and the model's default sequence
// (workload::default_sequence: 4096, or fewer for a learned position table). A command that reads
// a plan calls resolve_for_plan instead: the plan carries its workload and GPU, and a flag the
// user gives is checked against them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kareus/device/gpu_spec.h"
#include "kareus/plan/plan.h"
#include "kareus/workload/workload.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace kareus::cli {

struct WorkloadFlags {
  std::string model = "llama3.2-3b";
  workload::Parallelism parallel;  ///< every size but seq
  std::optional<int> seq;          ///< --seq; none: workload::default_sequence of the model
  std::string recompute = "full";
  std::vector<int> layers_per_stage;  ///< split at ','; empty = even split, earlier stages take the remainder

  std::map<std::string, const CLI::Option*> bound;  ///< by flag name, to tell given flags from defaults

  /// The validated workload. Throws InputError naming the offending flag.
  [[nodiscard]] workload::Workload resolve() const;

  /// The workload of a command that reads a plan: the plan's own (plan::plan_target), each flag
  /// given explicitly checked against it with plan::check_plan_workload ("made for tp 8, this
  /// run has tp 4"). A hand-made plan whose block does not hold a whole workload takes the
  /// flags (defaults included), checked the same way.
  [[nodiscard]] workload::Workload resolve_for_plan(const plan::Plan& plan, const std::string& origin) const;

 private:
  [[nodiscard]] bool given(const std::string& flag) const;
  [[nodiscard]] workload::Workload resolve_with(workload::ModelSpec model_spec) const;
};

void add_workload_flags(CLI::App* command, WorkloadFlags& flags);

struct GpuFlags {
  std::string gpu = "a100-40gb";

  const CLI::Option* bound = nullptr;

  /// The preset (or preset file). Throws InputError naming --gpu and the presets.
  [[nodiscard]] device::GpuSpec resolve() const;

  /// The GPU of a command that reads a plan: --gpu when given (checked against the GPU the plan
  /// names), else the plan's GPU preset, else the default.
  [[nodiscard]] device::GpuSpec resolve_for_plan(const plan::Plan& plan, const std::string& origin) const;
};

/// The flags naming the job: the workload (add_workload_flags) and the GPU it runs on (--gpu).
void add_job_flags(CLI::App* command, WorkloadFlags& workload, GpuFlags& gpu);

}  // namespace kareus::cli
