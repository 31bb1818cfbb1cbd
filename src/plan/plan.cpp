#include "kareus/plan/plan.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::plan {
namespace {

using nlohmann::json;
namespace jf = json_fields;

int require_int(const json& object, std::string_view key, std::string_view origin, int minimum) {
  const json& value = jf::require(object, key, origin);
  if (!value.is_number_integer() || value.get<long long>() < minimum || value.get<long long>() > 1'000'000'000) {
    throw InputError(
        fmt::format("{}: field '{}' must be an integer >= {}, found {}", origin, key, minimum, jf::excerpt(value)));
  }
  return value.get<int>();
}

/// One instruction; `with_chunk` (kareus.plan/2) requires its "chunk", /1 has none.
PlannedInstruction parse_instruction(const json& object, const std::string& origin, bool with_chunk) {
  if (with_chunk) {
    jf::reject_unknown(object, {"type", "chunk", "microbatch", "freq_mhz", "overlap", "partitions"}, origin);
  } else {
    jf::reject_unknown(object, {"type", "microbatch", "freq_mhz", "overlap", "partitions"}, origin);
  }
  PlannedInstruction instruction;
  instruction.type = parse_direction(jf::require_string(object, "type", origin), origin + ": field 'type'");
  if (with_chunk) instruction.chunk = require_int(object, "chunk", origin, 0);
  instruction.microbatch = require_int(object, "microbatch", origin, 0);
  instruction.freq_mhz = require_int(object, "freq_mhz", origin, 1);
  if (object.contains("overlap")) {
    instruction.overlap =
        workload::parse_overlap_mode(jf::require_string(object, "overlap", origin), origin + ": overlap");
  }
  if (auto found = object.find("partitions"); found != object.end()) {
    if (!found->is_object()) throw InputError(fmt::format("{}: field 'partitions' must be an object", origin));
    for (const auto& [key, config] : found->items()) {
      const std::string config_origin = fmt::format("{}.partitions.{}", origin, key);
      jf::reject_unknown(config, {"slot", "ctas"}, config_origin);
      instruction.partitions[key] = {jf::require_string(config, "slot", config_origin),
                                     require_int(config, "ctas", config_origin, 1)};
    }
  }
  if (instruction.overlap == workload::OverlapMode::kNone && !instruction.partitions.empty()) {
    throw InputError(
        fmt::format("{}: overlap \"none\" but partition configs are given (they need \"nanobatch\")", origin));
  }
  return instruction;
}

std::string describe(Direction type, int microbatch, int chunk, int chunks) {
  return chunks == 1 ? fmt::format("{} {}", to_string(type), microbatch)
                     : fmt::format("{} {} chunk {}", to_string(type), microbatch, chunk);
}

void check_one_f_one_b(const Plan& plan, std::string_view origin) {
  const int stages = static_cast<int>(plan.stages.size());
  const int chunks = chunk_count(plan);
  const int microbatches = static_cast<int>(plan.stages[0].instructions.size()) / (2 * chunks);
  if (microbatches == 0) {
    throw InputError(fmt::format("{}: stage 0 has {} instructions, fewer than 2 per chunk for its {} chunk(s)", origin,
                                 plan.stages[0].instructions.size(), chunks));
  }
  if (chunks > 1 && (stages < 2 || microbatches % stages != 0)) {
    throw InputError(
        fmt::format("{}: {} chunks per stage (interleaved 1F1B) need >= 2 stages and microbatches "
                    "divisible by the stages, found {} stages and {} microbatches",
                    origin, chunks, stages, microbatches));
  }
  for (const StagePlan& stage : plan.stages) {
    const auto expected = pipeline::interleaved_one_f_one_b(stage.stage, stages, chunks, microbatches);
    if (stage.instructions.size() != expected.size()) {
      throw InputError(
          fmt::format("{}: stage {} has {} instructions, expected {} (2 per microbatch{}, {} microbatches)", origin,
                      stage.stage, stage.instructions.size(), expected.size(),
                      chunks == 1 ? "" : fmt::format(" and chunk, {} chunks", chunks), microbatches));
    }
    for (std::size_t index = 0; index < expected.size(); ++index) {
      const PlannedInstruction& found = stage.instructions[index];
      const pipeline::Instruction& want = expected[index];
      if (found.type != want.type || found.microbatch != want.microbatch || found.chunk != want.chunk) {
        throw InputError(fmt::format("{}: stage {} instruction {} is {}, expected {} ({} order)", origin, stage.stage,
                                     index, describe(found.type, found.microbatch, found.chunk, chunks),
                                     describe(want.type, want.microbatch, want.chunk, chunks),
                                     chunks == 1 ? "synchronous 1F1B" : "interleaved 1F1B"));
      }
    }
  }
}

/// A block written before sequence parallelism and interleaving existed is for neither.
void default_megatron_features(json& block) {
  if (!block.contains("sequence_parallel")) block["sequence_parallel"] = false;
  if (!block.contains("vpp")) block["vpp"] = 1;
}

}  // namespace

Plan parse_plan(std::string_view text, std::string_view origin_view) {
  const std::string origin(origin_view);
  const json document = parse_json(text, origin);
  jf::reject_unknown(document, {"schema", "workload", "predicted", "stages"}, origin);
  const std::string schema = jf::require_string(document, "schema", origin);
  if (schema != kPlanSchema && schema != kPlanSchemaV1) {
    throw InputError(fmt::format("{}: schema must be \"{}\" (or the older \"{}\"), found \"{}\"", origin, kPlanSchema,
                                 kPlanSchemaV1, jf::short_text(schema)));
  }
  const bool with_chunk = schema == kPlanSchema;
  Plan plan;
  const json& workload = jf::require(document, "workload", origin);
  if (!workload.is_object()) throw InputError(fmt::format("{}: field 'workload' must be an object", origin));
  plan.workload_json = workload.dump();
  const json& predicted = jf::require(document, "predicted", origin);
  plan.predicted_time_s = jf::require_non_negative(predicted, "time_s", origin + ".predicted");
  plan.predicted_energy_j = jf::require_non_negative(predicted, "energy_j", origin + ".predicted");
  const json& stages = jf::require(document, "stages", origin);
  if (!stages.is_array() || stages.empty()) {
    throw InputError(fmt::format("{}: field 'stages' must be a non-empty array", origin));
  }
  for (std::size_t index = 0; index < stages.size(); ++index) {
    const std::string stage_origin = fmt::format("{}: stages[{}]", origin, index);
    jf::reject_unknown(stages[index], {"stage", "instructions"}, stage_origin);
    StagePlan stage;
    stage.stage = require_int(stages[index], "stage", stage_origin, 0);
    if (stage.stage != static_cast<int>(index)) {
      throw InputError(
          fmt::format("{}: stage must be {} (stages in order from 0), found {}", stage_origin, index, stage.stage));
    }
    const json& instructions = jf::require(stages[index], "instructions", stage_origin);
    if (!instructions.is_array()) throw InputError(fmt::format("{}: 'instructions' must be an array", stage_origin));
    for (std::size_t position = 0; position < instructions.size(); ++position) {
      stage.instructions.push_back(parse_instruction(
          instructions[position], fmt::format("{}.instructions[{}]", stage_origin, position), with_chunk));
    }
    plan.stages.push_back(std::move(stage));
  }
  check_one_f_one_b(plan, origin);
  // The block's counts, when it names them, must be the plan's own (else the check against a
  // run would compare the block with itself and miss the stages).
  for (const auto& [field, count] :
       {std::pair{"pp", plan.stages.size()}, std::pair{"vpp", static_cast<std::size_t>(chunk_count(plan))},
        std::pair{"microbatches", static_cast<std::size_t>(microbatch_count(plan))}}) {
    if (workload.contains(field) && workload[field] != count) {
      throw InputError(fmt::format("{}: the workload block says {} {}, the plan's {} have {}", origin, field,
                                   jf::excerpt(workload[field]), field == std::string_view("vpp") ? "chunks" : "stages",
                                   count));
    }
  }
  if (workload.contains("gpu") && !workload["gpu"].is_string()) {
    throw InputError(fmt::format("{}: workload field 'gpu' must be a string", origin));
  }
  return plan;
}

Plan read_plan(const std::filesystem::path& path) { return parse_plan(read_text_file(path), path.string()); }

std::string plan_workload_json(const workload::Workload& workload, std::string_view gpu_name) {
  nlohmann::ordered_json block = nlohmann::ordered_json::parse(workload::workload_to_json(workload));
  if (!gpu_name.empty()) block["gpu"] = gpu_name;
  return block.dump();
}

void check_workload(std::string_view recorded_json, std::string_view job_json, std::string_view origin) {
  json recorded = parse_json(recorded_json, origin);
  if (recorded.contains("model")) default_megatron_features(recorded);
  const json job = parse_json(job_json, "the run's workload");
  // Fields in the order the run's block lists them (model, shape, tp, cp, pp, ...), so the
  // first difference named is the most fundamental one.
  const nlohmann::ordered_json job_in_order = nlohmann::ordered_json::parse(job_json);
  for (const auto& [field, ignored] : job_in_order.items()) {
    const auto found = recorded.find(field);
    if (found == recorded.end()) continue;
    if (const auto difference = jf::first_difference(*found, job[field], true)) {
      const std::string path = found->is_object() ? field + "." + difference->path : field;
      throw InputError(fmt::format("{}: made for {} {}, this run has {} {}", origin, path, difference->left, path,
                                   difference->right));
    }
  }
}

void check_plan_workload(const Plan& plan, std::string_view job_json, std::string_view origin) {
  json recorded = parse_json(plan.workload_json, origin);
  default_megatron_features(recorded);
  recorded["pp"] = plan.stages.size();
  recorded["vpp"] = chunk_count(plan);
  recorded["microbatches"] = microbatch_count(plan);
  check_workload(recorded.dump(), job_json, origin);
}

PlanTarget plan_target(const Plan& plan, std::string_view origin) {
  const json block = parse_json(plan.workload_json, origin);
  PlanTarget target{workload::workload_from_json(plan.workload_json, fmt::format("{}: workload", origin)), ""};
  if (const auto gpu = block.find("gpu"); gpu != block.end() && gpu->is_string()) target.gpu = gpu->get<std::string>();
  return target;
}

std::string plan_to_json(const Plan& plan) {
  json stages = json::array();
  for (const StagePlan& stage : plan.stages) {
    json instructions = json::array();
    for (const PlannedInstruction& instruction : stage.instructions) {
      json partitions = json::object();
      for (const auto& [key, config] : instruction.partitions) {
        partitions[key] = {{"slot", config.slot}, {"ctas", config.ctas}};
      }
      json entry = {{"type", to_string(instruction.type)},
                    {"chunk", instruction.chunk},
                    {"microbatch", instruction.microbatch},
                    {"freq_mhz", instruction.freq_mhz}};
      if (instruction.overlap) entry["overlap"] = workload::to_string(*instruction.overlap);
      entry["partitions"] = std::move(partitions);
      instructions.push_back(std::move(entry));
    }
    stages.push_back({{"stage", stage.stage}, {"instructions", std::move(instructions)}});
  }
  // ordered_json keeps "schema" first so a reader sees what the file is at a glance.
  nlohmann::ordered_json document;
  document["schema"] = kPlanSchema;
  document["workload"] = json::parse(plan.workload_json);
  document["predicted"] = {{"time_s", plan.predicted_time_s}, {"energy_j", plan.predicted_energy_j}};
  document["stages"] = std::move(stages);
  return document.dump(1) + "\n";
}

void write_plan(const std::filesystem::path& path, const Plan& plan) { write_file_atomic(path, plan_to_json(plan)); }

int microbatch_count(const Plan& plan) {
  return plan.stages.empty() ? 0 : static_cast<int>(plan.stages[0].instructions.size()) / (2 * chunk_count(plan));
}

int chunk_count(const Plan& plan) {
  int largest = 0;
  for (const StagePlan& stage : plan.stages) {
    for (const PlannedInstruction& instruction : stage.instructions) largest = std::max(largest, instruction.chunk);
  }
  return largest + 1;
}

workload::OverlapMode effective_overlap(const PlannedInstruction& instruction,
                                        std::optional<workload::OverlapMode> fallback) {
  if (instruction.overlap) return *instruction.overlap;
  if (fallback) return *fallback;
  return instruction.partitions.empty() ? workload::OverlapMode::kNone : workload::OverlapMode::kNanobatch;
}

}  // namespace kareus::plan
