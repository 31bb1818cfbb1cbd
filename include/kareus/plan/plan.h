// kareus/plan/plan.h - execution plans: what every stage runs, at which clock, with which comm configs.
//
// A plan is the product of `kareus plan` / `kareus solve` and the input of the runtime.
// File format (schema "kareus.plan/1", see DESIGN.md):
//   {"schema": "kareus.plan/1", "workload": {...}, "predicted": {"time_s", "energy_j"},
//    "stages": [{"stage": s, "instructions": [{"type": "forward"|"backward", "microbatch": m,
//      "freq_mhz": f, "partitions": {KEY: {"slot": "linear_0", "ctas": 12}}}]}]}
// Units: seconds, joules (whole job, one iteration), MHz.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/pipeline/schedule.h"

namespace kareus::plan {

inline constexpr std::string_view kPlanSchema = "kareus.plan/1";

/// The collective knobs of one partition key: its launch slot and CTA count.
struct CommConfig {
  std::string slot;
  int ctas = 0;

  friend bool operator==(const CommConfig&, const CommConfig&) = default;
};

struct PlannedInstruction {
  pipeline::InstructionType type = pipeline::InstructionType::kForward;
  int microbatch = 0;
  int freq_mhz = 0;
  std::map<std::string, CommConfig> partitions;  ///< by partition key; empty without overlap

  friend bool operator==(const PlannedInstruction&, const PlannedInstruction&) = default;
};

struct StagePlan {
  int stage = 0;
  std::vector<PlannedInstruction> instructions;  ///< in execution order

  friend bool operator==(const StagePlan&, const StagePlan&) = default;
};

struct Plan {
  std::string workload_json = "{}";  ///< the workload object, serialized (opaque to the plan)
  double predicted_time_s = 0;
  double predicted_energy_j = 0;
  std::vector<StagePlan> stages;  ///< stage s at index s

  friend bool operator==(const Plan&, const Plan&) = default;
};

/// Parses and validates a plan: schema, field types, stages 0..S-1 in order, each stage's
/// instructions in synchronous 1F1B order over the same microbatch count, positive clocks
/// and CTA counts. Throws InputError naming `origin` and the offending stage/instruction.
[[nodiscard]] Plan parse_plan(std::string_view text, std::string_view origin);

/// Reads and validates a plan file (see parse_plan).
[[nodiscard]] Plan read_plan(const std::filesystem::path& path);

/// Checks that the plan's workload block agrees with `workload_json` (workload::workload_to_json
/// of the flags) on every field both name, shape fields included. Throws InputError "<origin>:
/// the plan's workload has dp 1, the flags give 2" naming the first field that differs.
void check_plan_workload(const Plan& plan, std::string_view workload_json, std::string_view origin);

/// Serializes a plan (pretty-printed JSON, schema first).
[[nodiscard]] std::string plan_to_json(const Plan& plan);

/// Writes a plan atomically (PATH.tmp then rename).
void write_plan(const std::filesystem::path& path, const Plan& plan);

/// Microbatches per iteration of a validated plan (the same on every stage).
[[nodiscard]] int microbatch_count(const Plan& plan);

}  // namespace kareus::plan
