#include "kareus/plan/plan.h"

#include <gtest/gtest.h>

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
      {"kareus.plan/1", "kareus.plan/9", "schema must be"},
      {"\"freq_mhz\": 1200", "\"freq_mhz\": -5", "'freq_mhz' must be an integer >= 1"},
      {"\"ctas\": 12", "\"ctas\": \"x\"", "'ctas' must be an integer"},
      {"\"type\": \"forward\"", "\"type\": \"fwd\"", "must be \"forward\" or \"backward\""},
  };
  test_common::expect_each_edit_rejected(good, edits,
                                         [](const std::string& text) { (void)parse_plan(text, "p.json"); });
}

TEST(Plan, AWorkloadBlockThatDiffersFromTheFlagsNamesTheField) {
  const workload::Workload flags = workload::make_workload(workload::load_model("llama3.2-3b"), {});
  Plan plan = two_stage_plan(8);
  plan.workload_json = workload::workload_to_json(flags);
  EXPECT_NO_THROW(check_plan_workload(plan, workload::workload_to_json(flags), "p.json"));
  workload::Parallelism other;
  other.dp = 2;
  const std::string message = [&] {
    try {
      check_plan_workload(plan, workload::workload_to_json(workload::make_workload(flags.model, other)), "p.json");
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("<no InputError>");
  }();
  EXPECT_EQ(message, "p.json: the plan's workload has dp 1, the flags give 2 (plan for another workload?)");
  // A nested shape field is named with its path; fields the plan does not carry are not compared.
  plan.workload_json = R"({"tp": 8, "shape": {"hidden": 4096}})";
  EXPECT_THROW(check_plan_workload(plan, workload::workload_to_json(flags), "p.json"), InputError);
  try {
    check_plan_workload(plan, workload::workload_to_json(flags), "p.json");
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "p.json: the plan's workload has shape.hidden 4096, the flags give 3072 (plan for another workload?)");
  }
  plan.workload_json = R"({"tp": 8, "source": "perseus_csv"})";
  EXPECT_NO_THROW(check_plan_workload(plan, workload::workload_to_json(flags), "p.json"));
}

}  // namespace
}  // namespace kareus::plan
