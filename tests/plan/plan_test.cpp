#include "kareus/plan/plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/bad_edits.h"
#include "kareus/common/error.h"
#include "kareus/workload/workload.h"

namespace kareus::plan {
namespace {

Plan two_stage_plan(int microbatches) {
  Plan plan;
  plan.predicted_time_s = 1.5;
  plan.predicted_energy_j = 1234.5;
  for (int stage = 0; stage < 2; ++stage) {
    StagePlan stage_plan{stage, {}};
    for (const auto& instruction : pipeline::one_f_one_b(stage, 2, microbatches)) {
      PlannedInstruction planned{instruction.type, instruction.microbatch, 1200 + 30 * stage, std::nullopt, {}};
      planned.partitions["fwd_attn"] = {"linear_0", 12};
      stage_plan.instructions.push_back(planned);
    }
    plan.stages.push_back(stage_plan);
  }
  return plan;
}

TEST(Plan, JsonRoundTripIsExact) {
  const Plan plan = two_stage_plan(4);
  const Plan parsed = parse_plan(plan_to_json(plan), "plan.json");
  EXPECT_EQ(parsed, plan);
  EXPECT_EQ(microbatch_count(parsed), 4);
}

TEST(Plan, OutOfOrderInstructionNamesStageAndExpected) {
  Plan plan = two_stage_plan(3);
  std::swap(plan.stages[1].instructions[1], plan.stages[1].instructions[2]);
  try {
    (void)parse_plan(plan_to_json(plan), "p.json");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("stage 1 instruction 1 is forward 1, expected backward 0"),
              std::string::npos)
        << error.what();
  }
}

TEST(Plan, RejectsWrongSchemaAndBadFields) {
  const std::string good = plan_to_json(two_stage_plan(2));
  const std::vector<test_common::BadEdit> edits = {
      {"kareus.plan/2", "kareus.plan/9", "schema must be"},
      {"\"freq_mhz\": 1200", "\"freq_mhz\": -5", "'freq_mhz' must be an integer >= 1"},
      {"\"ctas\": 12", "\"ctas\": \"x\"", "'ctas' must be an integer"},
      {"\"type\": \"forward\"", "\"type\": \"fwd\"", "must be \"forward\" or \"backward\""},
  };
  test_common::expect_each_edit_rejected(good, edits,
                                         [](const std::string& text) { (void)parse_plan(text, "p.json"); });
}

std::string check_error(const Plan& plan, const std::string& job_json) {
  try {
    check_plan_workload(plan, job_json, "p.json");
  } catch (const InputError& error) {
    return error.what();
  }
  return "<no InputError>";
}

TEST(Plan, AWorkloadBlockThatDiffersFromTheRunNamesTheFirstField) {
  const workload::Workload flags = workload::make_workload(workload::load_model("llama3.2-3b"), {});
  Plan plan = two_stage_plan(8);
  plan.workload_json = plan_workload_json(flags, "a100-40gb");
  EXPECT_EQ(check_error(plan, plan_workload_json(flags, "a100-40gb")), "<no InputError>");
  // Every field of the block is checked, in the block's order, with one message.
  auto changed = [&](auto edit) {
    workload::Parallelism other = flags.parallel;
    edit(other);
    return plan_workload_json(workload::make_workload(flags.model, other), "a100-40gb");
  };
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.dp = 2; })), "p.json: made for dp 1, this run has dp 2");
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.mbs = 4; })), "p.json: made for mbs 8, this run has mbs 4");
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.seq = 2048; })),
            "p.json: made for seq 4096, this run has seq 2048");
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.nanobatches = 1; })),
            "p.json: made for nanobatches 2, this run has nanobatches 1");
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.recompute = workload::Recompute::kNone; })),
            "p.json: made for recompute \"full\", this run has recompute \"none\"");
  EXPECT_EQ(check_error(plan, changed([](auto& p) {
                          p.layers_per_stage = {15, 13};
                        })),
            "p.json: made for layers_per_stage [14, 14], this run has layers_per_stage [15, 13]");
  EXPECT_EQ(check_error(plan, plan_workload_json(flags, "h100-sxm")),
            "p.json: made for gpu \"a100-40gb\", this run has gpu \"h100-sxm\"");
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.sequence_parallel = true; })),
            "p.json: made for sequence_parallel false, this run has sequence_parallel true");
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.vpp = 2; })), "p.json: made for vpp 1, this run has vpp 2");
  {
    // A block written before the two fields is for neither.
    Plan old = plan;
    auto block = nlohmann::json::parse(old.workload_json);
    block.erase("sequence_parallel");
    block.erase("vpp");
    old.workload_json = block.dump();
    EXPECT_EQ(check_error(old, plan_workload_json(flags, "a100-40gb")), "<no InputError>");
    EXPECT_EQ(check_error(old, changed([](auto& p) { p.vpp = 2; })), "p.json: made for vpp 1, this run has vpp 2");
  }
  // The stage and microbatch counts are the plan's own, even when the block lacks them.
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.microbatches = 4; })),
            "p.json: made for microbatches 8, this run has microbatches 4");
  plan.workload_json = "{}";
  EXPECT_EQ(check_error(plan, changed([](auto& p) { p.pp = 4; })), "p.json: made for pp 2, this run has pp 4");
  // A nested shape field is named with its path; fields only one side names are not compared.
  plan.workload_json = R"({"tp": 8, "shape": {"hidden": 4096}})";
  EXPECT_EQ(check_error(plan, workload::workload_to_json(flags)),
            "p.json: made for shape.hidden 4096, this run has shape.hidden 3072");
  plan.workload_json = R"({"tp": 8, "source": "perseus_csv"})";
  EXPECT_EQ(check_error(plan, workload::workload_to_json(flags)), "<no InputError>");
  // The norm kind is part of the shape: a plan for RMSNorm refuses a LayerNorm run, while a plan
  // written before the field passes against either.
  workload::ModelSpec layer_norm = flags.model;
  layer_norm.norm = workload::NormKind::kLayerNorm;
  const std::string layer_norm_job = plan_workload_json(workload::make_workload(layer_norm, flags.parallel), "");
  plan.workload_json = plan_workload_json(flags, "a100-40gb");
  EXPECT_EQ(check_error(plan, layer_norm_job),
            "p.json: made for shape.norm \"rmsnorm\", this run has shape.norm \"layernorm\"");
  nlohmann::json before_the_field = nlohmann::json::parse(plan.workload_json);
  before_the_field["shape"].erase("norm");
  plan.workload_json = before_the_field.dump();
  EXPECT_EQ(check_error(plan, layer_norm_job), "<no InputError>");
  EXPECT_EQ(check_error(plan, plan_workload_json(flags, "")), "<no InputError>");
}

TEST(Plan, ItsTargetIsTheWorkloadAndGpuItWasMadeFor) {
  workload::Parallelism parallel;
  parallel.layers_per_stage = {15, 13};
  parallel.seq = 2048;
  const workload::Workload made_for = workload::make_workload(workload::load_model("qwen3-1.7b"), parallel);
  Plan plan = two_stage_plan(8);
  plan.workload_json = plan_workload_json(made_for, "h200");
  const PlanTarget target = plan_target(plan, "p.json");
  EXPECT_EQ(target.gpu, "h200");
  EXPECT_EQ(workload::workload_to_json(target.workload), workload::workload_to_json(made_for));
  EXPECT_EQ(target.workload.model.parameters(), made_for.model.parameters());
  plan.workload_json = R"({"tp": 8})";
  EXPECT_THROW((void)plan_target(plan, "p.json"), InputError);
}

TEST(Plan, AWorkloadBlockMustAgreeWithTheStages) {
  Plan plan = two_stage_plan(8);
  plan.workload_json = R"({"pp": 3})";
  EXPECT_THROW((void)parse_plan(plan_to_json(plan), "p.json"), InputError);
  plan.workload_json = R"({"gpu":"h200","microbatches":8,"pp":2})";  // as parse_plan stores it
  EXPECT_EQ(parse_plan(plan_to_json(plan), "p.json"), plan);
}

}  // namespace
}  // namespace kareus::plan
