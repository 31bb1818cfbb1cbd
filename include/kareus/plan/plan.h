// kareus/plan/plan.h - execution plans: what every stage runs, at which clock, with which comm configs.
//
// A plan is the product of `kareus plan` / `kareus solve` and the input of the runtime.
// File format (schema "kareus.plan/2", see docs/formats.md):
//   {"schema": "kareus.plan/2", "workload": {...}, "predicted": {"time_s", "energy_j"},
//    "stages": [{"stage": s, "instructions": [{"type": "forward"|"backward", "chunk": c, "microbatch": m,
//      "freq_mhz": f, "overlap": "nanobatch"|"none", "partitions": {KEY: {"slot": "linear_0", "ctas": 12}}}]}]}
// "chunk" is the instruction's model chunk (virtual pipeline stage) on its stage; the older
// "kareus.plan/1", read as well, has no chunk field and is 1F1B (every chunk 0).
// "overlap" says how the instruction runs (nanobatched, or every op in sequence); plans written
// before it existed lack it, and the reader decides (effective_overlap). A nanobatched
// instruction names a config for every searchable key it runs and no other key; readers refuse
// other plans (plan_fit.h, whose rules are partition/comm_fit.h's).
// Units: seconds, joules (whole job, one iteration), MHz.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/partition/comm_config.h"
#include "kareus/pipeline/schedule.h"
#include "kareus/workload/workload.h"

namespace kareus::plan {

inline constexpr std::string_view kPlanSchema = "kareus.plan/2";
inline constexpr std::string_view kPlanSchemaV1 = "kareus.plan/1";  ///< read only: no chunks

/// What the runtime answers for every key of an instruction that is not nanobatched: no
/// overlap, the collective runs after the compute ("none") on the default resources (0 CTAs).
[[nodiscard]] inline const partition::CommConfig& not_overlapped() {
  static const partition::CommConfig config{std::string(partition::kSlotNone), 0};
  return config;
}

struct PlannedInstruction {
  Direction type = Direction::kForward;
  int microbatch = 0;
  int freq_mhz = 0;
  std::optional<workload::OverlapMode> overlap;  ///< nullopt in plans older than the field
  partition::CommConfigs partitions;             ///< by partition key; empty without overlap
  int chunk = 0;  ///< model chunk on its stage (interleaved 1F1B), 0 without; last, for older initializers

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

/// Parses and validates a plan: schema (kareus.plan/2, or /1 without chunks), field types,
/// stages 0..S-1 in order, each stage's instructions in (interleaved, with chunks) 1F1B order
/// over the same microbatch and chunk counts, positive clocks and CTA counts. The chunk count
/// is one more than the largest chunk; a workload block naming "pp", "vpp" or "microbatches"
/// must agree with the plan's. Throws InputError naming `origin` and the offending
/// stage/instruction.
[[nodiscard]] Plan parse_plan(std::string_view text, std::string_view origin);

/// Reads and validates a plan file (see parse_plan).
[[nodiscard]] Plan read_plan(const std::filesystem::path& path);

/// The workload block a plan records: workload::workload_to_json plus "gpu": the GPU's name
/// (empty `gpu_name`: no "gpu" field).
[[nodiscard]] std::string plan_workload_json(const workload::Workload& workload, std::string_view gpu_name);

/// The one workload check, for plans and measurement logs alike: every field that both
/// `recorded_json` (what the file was made for) and `job_json` (plan_workload_json of this run,
/// or the part of it the caller knows) name must be equal: model shape, parallel sizes, mbs, seq,
/// microbatches, nanobatches, recompute, layer split, GPU. A field only one side names is not
/// checked (older files lack newer fields). Throws InputError
/// "<origin>: made for seq 32, this run has seq 31" naming the first differing field.
void check_workload(std::string_view recorded_json, std::string_view job_json, std::string_view origin);

/// check_workload of the plan's workload block, whose "pp", "vpp" and "microbatches" are the
/// plan's own stage, chunk and microbatch counts (also for a hand-made plan with an empty block).
void check_plan_workload(const Plan& plan, std::string_view job_json, std::string_view origin);

/// What a plan was made for: its workload (rebuilt from the block's model shape and parallel
/// fields, and validated by workload::make_workload) and its GPU's name ("" if unrecorded).
struct PlanTarget {
  workload::Workload workload;
  std::string gpu;
};

/// The plan's target. Throws InputError naming `origin` and the missing field when the block
/// does not hold a whole workload (a hand-made plan): then the workload flags must be given.
[[nodiscard]] PlanTarget plan_target(const Plan& plan, std::string_view origin);

/// Serializes a plan (pretty-printed JSON, schema first).
[[nodiscard]] std::string plan_to_json(const Plan& plan);

/// Writes a plan atomically (a temporary beside PATH, common/file_io.h, then rename).
void write_plan(const std::filesystem::path& path, const Plan& plan);

/// How `instruction` runs: its recorded overlap, or for an older plan without the field,
/// `fallback` (e.g. `kareus simulate --overlap`) when given, else nanobatched exactly when it
/// names partition configs.
[[nodiscard]] workload::OverlapMode effective_overlap(const PlannedInstruction& instruction,
                                                      std::optional<workload::OverlapMode> fallback = std::nullopt);

/// Microbatches per iteration of a validated plan (the same on every stage).
[[nodiscard]] int microbatch_count(const Plan& plan);

/// Model chunks per stage of a validated plan (its vpp): one more than its largest chunk.
[[nodiscard]] int chunk_count(const Plan& plan);

}  // namespace kareus::plan
