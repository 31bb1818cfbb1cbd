// Plans of interleaved 1F1B: the chunk field (kareus.plan/2), the older schema without it,
// and the checks that tie a plan's chunks to its workload.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/plan/plan.h"
#include "kareus/workload/workload.h"

namespace kareus::plan {
namespace {

/// Every stage in interleaved order, clocks that differ per stage and chunk.
Plan interleaved_plan(int stages, int chunks, int microbatches) {
  Plan plan;
  plan.predicted_time_s = 2.5;
  plan.predicted_energy_j = 99;
  for (int stage = 0; stage < stages; ++stage) {
    StagePlan stage_plan{stage, {}};
    for (const auto& instruction : pipeline::interleaved_one_f_one_b(stage, stages, chunks, microbatches)) {
      PlannedInstruction planned{instruction.type,
                                 instruction.microbatch,
                                 1000 + 100 * stage + 10 * instruction.chunk,
                                 workload::OverlapMode::kNone,
                                 {},
                                 instruction.chunk};
      stage_plan.instructions.push_back(planned);
    }
    plan.stages.push_back(stage_plan);
  }
  return plan;
}

std::string parse_error(const std::string& text) {
  try {
    (void)parse_plan(text, "p.json");
  } catch (const InputError& error) {
    return error.what();
  }
  return "<no InputError>";
}

TEST(PlanChunks, RoundTripKeepsEveryChunk) {
  const Plan plan = interleaved_plan(2, 3, 4);
  const std::string text = plan_to_json(plan);
  const nlohmann::json document = nlohmann::json::parse(text);
  EXPECT_EQ(document["schema"], "kareus.plan/2");
  // Stage 1's third instruction is microbatch 0's forward on chunk 1 (warmup 4 = 0 + 2 x 2).
  EXPECT_EQ(document["stages"][1]["instructions"][2]["chunk"], 1);
  EXPECT_EQ(document["stages"][1]["instructions"][2]["microbatch"], 0);
  const Plan parsed = parse_plan(text, "p.json");
  EXPECT_EQ(parsed, plan);
  EXPECT_EQ(chunk_count(parsed), 3);
  EXPECT_EQ(microbatch_count(parsed), 4);
  EXPECT_EQ(parsed.stages[1].instructions[2].chunk, 1);
  EXPECT_EQ(parsed.stages[1].instructions[2].freq_mhz, 1110);
}

TEST(PlanChunks, TheOlderSchemaReadsAsChunkZero) {
  nlohmann::json document = nlohmann::json::parse(plan_to_json(interleaved_plan(2, 1, 3)));
  document["schema"] = "kareus.plan/1";
  for (auto& stage : document["stages"]) {
    for (auto& instruction : stage["instructions"]) instruction.erase("chunk");
  }
  const Plan parsed = parse_plan(document.dump(), "old.json");
  EXPECT_EQ(chunk_count(parsed), 1);
  EXPECT_EQ(microbatch_count(parsed), 3);
  EXPECT_EQ(parsed, interleaved_plan(2, 1, 3));
  // Written back, it is a /2 plan with chunk 0 everywhere.
  EXPECT_EQ(nlohmann::json::parse(plan_to_json(parsed))["stages"][0]["instructions"][0]["chunk"], 0);
  // /1 has no chunk field: a plan that names one under /1 is refused, as /2 without one is.
  nlohmann::json old_with_chunk = document;
  old_with_chunk["stages"][0]["instructions"][0]["chunk"] = 0;
  EXPECT_NE(parse_error(old_with_chunk.dump()).find("stages[0].instructions[0]"), std::string::npos);
  EXPECT_NE(parse_error(old_with_chunk.dump()).find("chunk"), std::string::npos);
  nlohmann::json new_without_chunk = document;
  new_without_chunk["schema"] = "kareus.plan/2";
  EXPECT_EQ(parse_error(new_without_chunk.dump()), "p.json: stages[0].instructions[0]: missing field 'chunk'");
}

TEST(PlanChunks, RefusesChunksOutOfMegatronsOrder) {
  Plan plan = interleaved_plan(2, 2, 4);
  // Stage 0 runs F0c0 F1c0 F0c1 ...: swapping the chunks of its second and third forward.
  std::swap(plan.stages[0].instructions[1], plan.stages[0].instructions[2]);
  EXPECT_EQ(parse_error(plan_to_json(plan)),
            "p.json: stage 0 instruction 1 is forward 0 chunk 1, expected forward 1 chunk 0 (interleaved 1F1B order)");
  // Three microbatches cannot be grouped by two stages.
  Plan uneven;
  for (int stage = 0; stage < 2; ++stage) {
    StagePlan stage_plan{stage, {}};
    for (int index = 0; index < 12; ++index) {
      stage_plan.instructions.push_back({Direction::kForward, 0, 1000, std::nullopt, {}, index % 2});
    }
    uneven.stages.push_back(stage_plan);
  }
  EXPECT_EQ(parse_error(plan_to_json(uneven)),
            "p.json: 2 chunks per stage (interleaved 1F1B) need >= 2 stages and microbatches divisible by the stages, "
            "found 2 stages and 3 microbatches");
  // A chunk so large that a stage has fewer instructions than chunks.
  Plan sparse = interleaved_plan(2, 1, 2);
  sparse.stages[0].instructions[0].chunk = 1000000;
  EXPECT_EQ(parse_error(plan_to_json(sparse)),
            "p.json: stage 0 has 4 instructions, fewer than 2 per chunk for its 1000001 chunk(s)");
}

TEST(PlanChunks, TheWorkloadBlockAndTheRunMustHaveThePlansVpp) {
  const workload::ModelSpec model = workload::load_model("llama3.2-3b");
  workload::Parallelism parallel;
  parallel.pp = 2;
  parallel.microbatches = 4;
  parallel.vpp = 2;
  const workload::Workload interleaved = workload::make_workload(model, parallel);
  parallel.vpp = 1;
  const workload::Workload plain = workload::make_workload(model, parallel);

  Plan plan = interleaved_plan(2, 2, 4);
  plan.workload_json = plan_workload_json(interleaved, "a100-40gb");
  const Plan parsed = parse_plan(plan_to_json(plan), "p.json");
  EXPECT_NO_THROW(check_plan_workload(parsed, plan_workload_json(interleaved, "a100-40gb"), "p.json"));
  try {
    check_plan_workload(parsed, plan_workload_json(plain, "a100-40gb"), "p.json");
    FAIL() << "a vpp 2 plan ran as vpp 1";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "p.json: made for vpp 2, this run has vpp 1");
  }
  // A hand-made plan without a block is checked by its own chunks.
  plan.workload_json = "{}";
  try {
    check_plan_workload(plan, plan_workload_json(plain, "a100-40gb"), "p.json");
    FAIL() << "a 2-chunk plan ran as vpp 1";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "p.json: made for vpp 2, this run has vpp 1");
  }
  // A block that says another vpp than the plan's chunks.
  Plan lying = interleaved_plan(2, 1, 4);
  lying.workload_json = plan_workload_json(interleaved, "a100-40gb");
  EXPECT_EQ(parse_error(plan_to_json(lying)), "p.json: the workload block says vpp 2, the plan's chunks have 1");
}

}  // namespace
}  // namespace kareus::plan
