#include "workload_flags.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "kareus/common/error.h"

namespace kareus::cli {

workload::Workload WorkloadFlags::resolve() const {
  workload::Parallelism resolved = parallel;
  if (recompute == "full") {
    resolved.recompute = workload::Recompute::kFull;
  } else if (recompute == "none") {
    resolved.recompute = workload::Recompute::kNone;
  } else {
    throw InputError(fmt::format("--recompute {}: expected \"full\" or \"none\"", recompute));
  }
  if (!layers_per_stage.empty()) resolved.layers_per_stage = workload::parse_layers_per_stage(layers_per_stage);
  return workload::make_workload(workload::load_model(model), std::move(resolved));
}

void add_workload_flags(CLI::App* command, WorkloadFlags& flags) {
  workload::Parallelism& p = flags.parallel;
  command->add_option("--model", flags.model, "model preset or path to a model .json file")->capture_default_str();
  command->add_option("--tp", p.tp, "tensor-parallel size")->capture_default_str();
  command->add_option("--cp", p.cp, "context-parallel size")->capture_default_str();
  command->add_option("--pp", p.pp, "pipeline stages")->capture_default_str();
  command->add_option("--dp", p.dp, "data-parallel replicas")->capture_default_str();
  command->add_option("--mbs", p.mbs, "microbatch size (sequences)")->capture_default_str();
  command->add_option("--seq", p.seq, "sequence length (tokens)")->capture_default_str();
  command->add_option("--microbatches", p.microbatches, "microbatches per iteration")->capture_default_str();
  command->add_option("--nanobatches", p.nanobatches, "nanobatches per microbatch: 1 or 2")->capture_default_str();
  command->add_option("--recompute", flags.recompute, "activation checkpointing: full or none")->capture_default_str();
  command->add_option("--layers-per-stage", flags.layers_per_stage,
                      "layers of each stage, e.g. 15,13 (default: even split)");
}

device::GpuSpec GpuFlags::resolve() const { return device::load_gpu(gpu); }

void add_gpu_flags(CLI::App* command, GpuFlags& flags) {
  command->add_option("--gpu", flags.gpu, "GPU preset or path to a preset .json file")->capture_default_str();
}

}  // namespace kareus::cli
