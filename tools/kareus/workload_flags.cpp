#include "workload_flags.h"

#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"

namespace kareus::cli {

workload::Workload WorkloadFlags::resolve() const { return resolve_with(workload::load_model(model)); }

workload::Workload WorkloadFlags::resolve_with(workload::ModelSpec model_spec) const {
  workload::Parallelism resolved = parallel;
  resolved.seq = seq ? *seq : workload::default_sequence(model_spec);
  if (recompute == "full") {
    resolved.recompute = workload::Recompute::kFull;
  } else if (recompute == "none") {
    resolved.recompute = workload::Recompute::kNone;
  } else {
    throw InputError(fmt::format("--recompute {}: expected \"full\" or \"none\"", recompute));
  }
  if (!layers_per_stage.empty()) resolved.layers_per_stage = layers_per_stage;
  return workload::make_workload(std::move(model_spec), std::move(resolved));
}

bool WorkloadFlags::given(const std::string& flag) const {
  const auto found = bound.find(flag);
  return found != bound.end() && found->second->count() > 0;
}

workload::Workload WorkloadFlags::resolve_for_plan(const plan::Plan& plan, const std::string& origin) const {
  std::optional<plan::PlanTarget> target;
  try {
    target = plan::plan_target(plan, origin);
  } catch (const InputError&) {
    // A block that records a model and its shape is the plan's workload: what is wrong with it
    // (a sequence past a learned position table, say) is the plan's error, not a cue for the flags.
    const nlohmann::json block = nlohmann::json::parse(plan.workload_json);
    if (block.contains("model") && block.contains("shape")) throw;
    // A hand-made plan: its block does not name a whole workload, so the flags do.
    const workload::Workload flags_workload = resolve();
    plan::check_plan_workload(plan, plan::plan_workload_json(flags_workload, ""), origin);
    return flags_workload;
  }
  // The plan's workload with each flag the user gave in place of its value; the check names the
  // first one that differs.
  WorkloadFlags overlay = *this;
  const workload::Workload& planned = target->workload;
  const workload::Parallelism& from_plan = planned.parallel;
  workload::Parallelism& p = overlay.parallel;
  for (auto [flag, field, value] : {std::tuple{"--tp", &p.tp, from_plan.tp},
                                    {"--cp", &p.cp, from_plan.cp},
                                    {"--pp", &p.pp, from_plan.pp},
                                    {"--dp", &p.dp, from_plan.dp},
                                    {"--mbs", &p.mbs, from_plan.mbs},
                                    {"--microbatches", &p.microbatches, from_plan.microbatches},
                                    {"--nanobatches", &p.nanobatches, from_plan.nanobatches},
                                    {"--vpp", &p.vpp, from_plan.vpp}}) {
    if (!given(flag)) *field = value;
  }
  if (!given("--seq")) overlay.seq = from_plan.seq;
  if (!given("--sequence-parallel")) p.sequence_parallel = from_plan.sequence_parallel;
  if (!given("--recompute")) overlay.recompute = from_plan.recompute == workload::Recompute::kFull ? "full" : "none";
  if (!given("--layers-per-stage")) {
    overlay.layers_per_stage = p.pp == from_plan.pp ? planned.stage_layers : std::vector<int>{};
  }
  workload::ModelSpec job_model = planned.model;
  if (given("--model")) {
    job_model = workload::load_model(model);
    // Another model is named as such, before the plan's other values meet its rules (a plan's
    // sequence past the new model's learned position table, say).
    plan::check_workload(plan.workload_json, nlohmann::json{{"model", job_model.name}}.dump(), origin);
  }
  const workload::Workload job = overlay.resolve_with(std::move(job_model));
  plan::check_plan_workload(plan, plan::plan_workload_json(job, ""), origin);
  return planned;
}

void add_workload_flags(CLI::App* command, WorkloadFlags& flags) {
  workload::Parallelism& p = flags.parallel;
  auto bind = [&](const std::string& flag, auto& value, const std::string& help) {
    flags.bound[flag] = command->add_option(flag, value, help)->capture_default_str();
  };
  bind("--model", flags.model, "model preset or path to a model .json file");
  bind("--tp", p.tp, "tensor-parallel size");
  bind("--cp", p.cp, "context-parallel size");
  bind("--pp", p.pp, "pipeline stages");
  bind("--dp", p.dp, "data-parallel replicas");
  bind("--mbs", p.mbs, "microbatch size (sequences)");
  flags.bound["--seq"] = command->add_option_function<int>(
      "--seq", [&flags](const int& tokens) { flags.seq = tokens; },
      fmt::format("sequence length (tokens); default {}, or the model's max_positions when smaller (learned "
                  "position embeddings, e.g. 2048 for gpt3-175b)",
                  workload::kDefaultSequence));
  bind("--microbatches", p.microbatches, "microbatches per iteration");
  bind("--nanobatches", p.nanobatches,
       "nanobatches per microbatch: 1 or 2 (with --mbs 1, the two halves of the sequence)");
  bind("--recompute", flags.recompute, "activation checkpointing: full or none");
  flags.bound["--sequence-parallel"] = command->add_flag("--sequence-parallel", p.sequence_parallel,
                                                         "Megatron's sequence parallelism: all-gather / reduce-scatter "
                                                         "over TP in place of the all-reduce (needs --tp >= 2)");
  bind("--vpp", p.vpp, "virtual pipeline stages (model chunks) per rank: 1 = 1F1B, more = interleaved 1F1B");
  flags.bound["--layers-per-stage"] = command
                                          ->add_option("--layers-per-stage", flags.layers_per_stage,
                                                       "layers of each stage, e.g. 15,13 (default: even split)")
                                          ->delimiter(',');
}

device::GpuSpec GpuFlags::resolve() const { return device::load_gpu(gpu); }

device::GpuSpec GpuFlags::resolve_for_plan(const plan::Plan& plan, const std::string& origin) const {
  const nlohmann::json block = nlohmann::json::parse(plan.workload_json);
  const auto planned = block.find("gpu");
  if ((bound != nullptr && bound->count() > 0) || planned == block.end()) {
    const device::GpuSpec spec = resolve();
    plan::check_workload(plan.workload_json, nlohmann::json{{"gpu", spec.name}}.dump(), origin);
    return spec;
  }
  return device::load_gpu(planned->get<std::string>());
}

void add_job_flags(CLI::App* command, WorkloadFlags& workload, GpuFlags& gpu) {
  add_workload_flags(command, workload);
  gpu.bound = command->add_option("--gpu", gpu.gpu, "GPU preset or path to a preset .json file")->capture_default_str();
}

}  // namespace kareus::cli
