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

// The A100's grid as device::GpuSpec lists it: 210..1410 in 15 MHz steps.
PlanLimits a100_limits() {
  PlanLimits limits{{108, 16}, {}, "a100-40gb"};
  for (int clock = 210; clock <= 1410; clock += 15) limits.clocks_mhz.push_back(clock);
  return limits;
}

TEST(PlanFit, ClocksMustBeClocksOfTheGpu) {
  const workload::Workload workload = llama();
  EXPECT_EQ(error_of([&] { check_plan_fits(nanobatched_plan(), workload, a100_limits(), "p.json"); }),
            "<no InputError>");
  for (const int freq_mhz : {1411, 1000000000, 1425, 195}) {
    Plan plan = nanobatched_plan();
    plan.stages[1].instructions[2].freq_mhz = freq_mhz;  // stage 1: F0 B0 F1 B1
    EXPECT_EQ(error_of([&] { check_plan_fits(plan, workload, a100_limits(), "p.json"); }),
              "p.json: stage 1 instruction 2 (forward microbatch 1): freq_mhz " + std::to_string(freq_mhz) +
                  " is not a clock of a100-40gb (210..1410 MHz in 15 MHz steps)");
    // No clock list (no GPU known): not checked.
    EXPECT_EQ(error_of([&] { check_plan_fits(plan, workload, PlanLimits{}, "p.json"); }), "<no InputError>");
  }
  // An uneven list (what NVML may report) is named clock by clock.
  PlanLimits listed{{}, {1410, 1005, 210}, "GPU 0"};
  Plan plan = nanobatched_plan();
  plan.stages[0].instructions[0].freq_mhz = 1395;
  EXPECT_EQ(error_of([&] { check_plan_fits(plan, workload, listed, "p.json"); }),
            "p.json: stage 0 instruction 0 (forward microbatch 0): freq_mhz 1395 is not a clock of GPU 0 "
            "(210, 1005, 1410 MHz)");
}

TEST(PlanFit, TheRecordedWorkloadChecksKeysSlotsAndCtas) {
  // A plan the planner wrote records its workload: the check without a given workload uses it.
  Plan recorded = nanobatched_plan();
  recorded.workload_json = plan_workload_json(llama(), "a100-40gb");
  EXPECT_EQ(error_of([&] { check_plan_fits(recorded, a100_limits(), "p.json"); }), "<no InputError>");
  Plan evil_key = recorded;
  evil_key.stages[0].instructions[0].partitions["evil_key"] = {"norm_0", 4};
  EXPECT_NE(error_of([&] {
              check_plan_fits(evil_key, a100_limits(), "p.json");
            }).find("p.json: stage 0 instruction 0 (forward microbatch 0): unknown partition key 'evil_key'"),
            std::string::npos);
  Plan evil_slot = recorded;
  evil_slot.stages[0].instructions[1].partitions["fwd_attn"].slot = "evil_0";
  EXPECT_NE(error_of([&] { check_plan_fits(evil_slot, a100_limits(), "p.json"); })
                .find("p.json: stage 0 instruction 1 (forward microbatch 1): partition 'fwd_attn': no launch slot "
                      "'evil_0'"),
            std::string::npos);
  Plan huge = recorded;
  huge.stages[1].instructions[0].partitions["fwd_mlp"].ctas = 1000000000;
  EXPECT_EQ(error_of([&] { check_plan_fits(huge, PlanLimits{}, "p.json"); }),
            "p.json: stage 1 instruction 0 (forward microbatch 0): partition 'fwd_mlp': ctas 1000000000 is outside "
            "1..65536 (kareus's CTA limit)");

  // A hand-made plan (no shape in its block): clocks and CTAs only, as keys need a workload.
  Plan hand_made = evil_key;
  hand_made.workload_json = R"({"model": "llama3.2-3b", "pp": 2})";
  EXPECT_EQ(error_of([&] { check_plan_fits(hand_made, a100_limits(), "p.json"); }), "<no InputError>");
  hand_made.stages[0].instructions[0].partitions["evil_key"].ctas = 1000000000;
  EXPECT_EQ(error_of([&] { check_plan_fits(hand_made, a100_limits(), "p.json"); }),
            "p.json: stage 0 instruction 0 (forward microbatch 0): partition 'evil_key': ctas 1000000000 is outside "
            "1..108 (one CTA per SM)");
  hand_made.stages[0].instructions[0].partitions["evil_key"].ctas = 4;
  hand_made.stages[0].instructions[1].freq_mhz = 1411;
  EXPECT_EQ(error_of([&] { check_plan_fits(hand_made, a100_limits(), "p.json"); }),
            "p.json: stage 0 instruction 1 (forward microbatch 1): freq_mhz 1411 is not a clock of a100-40gb "
            "(210..1410 MHz in 15 MHz steps)");
}

}  // namespace
}  // namespace kareus::plan
