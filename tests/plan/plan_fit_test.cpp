#include "kareus/plan/plan_fit.h"

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "../common/input_error.h"
#include "kareus/common/error.h"

namespace kareus::plan {
namespace {

using test_common::error_of;

// Llama 3.2 3B, TP 8, PP 2, 2 microbatches, full recompute: a backward needs fwd_* and bwd_* configs.
workload::Workload llama(int nanobatches = 2) {
  workload::Parallelism parallel;
  parallel.microbatches = 2;
  parallel.nanobatches = nanobatches;
  return workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
}

Plan nanobatched_plan() {
  Plan plan;
  for (int stage = 0; stage < 2; ++stage) {
    StagePlan stage_plan{stage, {}};
    for (const auto& instruction : pipeline::one_f_one_b(stage, 2, 2)) {
      PlannedInstruction planned{instruction.type, instruction.microbatch, 1410, workload::OverlapMode::kNanobatch, {}};
      planned.partitions = {{"fwd_attn", {"norm_0", 12}}, {"fwd_mlp", {"linear_1", 6}}};
      if (instruction.type == Direction::kBackward) {
        planned.partitions["bwd_attn"] = {"linear_0", 9};
        planned.partitions["bwd_mlp"] = {"norm_0", 3};
      }
      stage_plan.instructions.push_back(planned);
    }
    plan.stages.push_back(stage_plan);
  }
  return plan;
}

TEST(PlanFit, NamesTheStageInstructionAndRule) {
  const workload::Workload workload = llama();
  const partition::CommLimits a100{108, 16};
  EXPECT_EQ(error_of([&] { check_plan_comm_configs(nanobatched_plan(), workload, a100, "p.json"); }),
            "<no InputError>");

  Plan too_many = nanobatched_plan();
  too_many.stages[1].instructions[3].partitions["bwd_mlp"].ctas = 109;  // stage 1: F0 B0 F1 B1
  EXPECT_EQ(error_of([&] { check_plan_comm_configs(too_many, workload, a100, "p.json"); }),
            "p.json: stage 1 instruction 3 (backward microbatch 1): partition 'bwd_mlp': ctas 109 is outside 1..108 "
            "(one CTA per SM)");
  // Without a GPU the one limit is kareus's.
  EXPECT_EQ(error_of([&] { check_plan_comm_configs(too_many, workload, {}, "p.json"); }), "<no InputError>");

  Plan missing = nanobatched_plan();
  missing.stages[0].instructions[2].partitions.erase("fwd_mlp");  // stage 0: F0 F1 B0 B1
  EXPECT_EQ(error_of([&] { check_plan_comm_configs(missing, workload, a100, "p.json"); }),
            "p.json: stage 0 instruction 2 (backward microbatch 0): nanobatched, but no comm config for partition "
            "fwd_mlp (give its slot and ctas, or \"overlap\": \"none\")");
  // The same instruction run without overlap uses no config, so none is checked.
  missing.stages[0].instructions[2].overlap = workload::OverlapMode::kNone;
  missing.stages[0].instructions[2].partitions["fwd_qkv_ag"] = {"nowhere", 0};
  EXPECT_EQ(error_of([&] { check_plan_comm_configs(missing, workload, a100, "p.json"); }), "<no InputError>");

  EXPECT_EQ(error_of([&] { check_plan_comm_configs(nanobatched_plan(), llama(1), a100, "p.json"); }),
            "p.json: stage 0 instruction 0 (forward microbatch 0): a nanobatched instruction needs --nanobatches 2, "
            "this run has 1");
  EXPECT_EQ(error_of([&] {
              check_plan_comm_configs(nanobatched_plan(), workload, {8, 16}, "p.json");
            }),
            "p.json: the GPU's default_comm_ctas: ctas 16 is outside 1..8 (one CTA per SM)");
}

}  // namespace
}  // namespace kareus::plan
