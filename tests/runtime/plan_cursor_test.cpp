#include "kareus/runtime/plan_cursor.h"

#include <gtest/gtest.h>

#include "../common/input_error.h"
#include "kareus/common/error.h"
#include "test_plans.h"

namespace kareus::runtime {
namespace {

using test_common::error_of;
constexpr auto kForward = Direction::kForward;
constexpr auto kBackward = Direction::kBackward;

// The cursor of `stage` over a test plan of `stages` stages and `microbatches`, in its first step.
PlanCursor cursor_in_step(int stages, int microbatches, int stage) {
  PlanCursor cursor(std::make_shared<const plan::Plan>(testing::make_plan(stages, microbatches)), stage);
  cursor.on_step_begin();
  return cursor;
}

TEST(PlanCursor, WalksEveryStageOfAWholePlanTwice) {
  auto plan = std::make_shared<const plan::Plan>(testing::make_plan(3, 5));
  for (int stage = 0; stage < 3; ++stage) {
    SCOPED_TRACE(stage);
    PlanCursor cursor(plan, stage);
    for (int step = 0; step < 2; ++step) {
      cursor.on_step_begin();
      for (const auto& instruction : pipeline::one_f_one_b(stage, 3, 5)) {
        const auto& planned = cursor.on_instruction_begin(instruction.type, instruction.microbatch);
        EXPECT_EQ(planned.freq_mhz, testing::planned_clock_mhz(stage, instruction.type, instruction.microbatch));
        const int ctas = testing::planned_ctas(stage, instruction.type, instruction.microbatch);
        if (instruction.type == kForward) {
          EXPECT_EQ(cursor.comm_config("fwd_attn"), (partition::CommConfig{"linear_0", ctas}));
        } else {
          EXPECT_EQ(cursor.comm_config("bwd_attn"), (partition::CommConfig{"linear_1", ctas}));
          // The recompute forward inside a backward uses the backward's own config.
          EXPECT_EQ(cursor.comm_config("fwd_attn"), (partition::CommConfig{"mlp_0", ctas + 100}));
        }
        cursor.on_instruction_end();
      }
      cursor.on_step_end();
    }
    EXPECT_EQ(cursor.steps_completed(), 2);
  }
}

TEST(PlanCursor, AMixedPlansSequentialInstructionIsNotOverlapped) {
  plan::Plan mixed = testing::make_plan(2, 3);
  // Stage 0's second instruction (F1) runs without nanobatching; the others keep their configs.
  mixed.stages[0].instructions[1].overlap = workload::OverlapMode::kNone;
  mixed.stages[0].instructions[1].partitions.clear();
  PlanCursor cursor(std::make_shared<const plan::Plan>(mixed), 0);
  cursor.on_step_begin();
  (void)cursor.on_instruction_begin(kForward, 0);
  EXPECT_EQ(cursor.comm_config("fwd_attn").ctas, testing::planned_ctas(0, kForward, 0));
  cursor.on_instruction_end();
  (void)cursor.on_instruction_begin(kForward, 1);
  EXPECT_EQ(cursor.comm_config("fwd_attn"), plan::not_overlapped());
  EXPECT_EQ(cursor.comm_config("any_key"), (partition::CommConfig{"none", 0}));
  cursor.on_instruction_end();
}

TEST(PlanCursor, OutOfOrderInstructionSaysWhatWasExpected) {
  PlanCursor cursor = cursor_in_step(2, 4, 1);
  (void)cursor.on_instruction_begin(kForward, 0);
  cursor.on_instruction_end();
  EXPECT_EQ(error_of([&] { (void)cursor.on_instruction_begin(kForward, 1); }),
            "stage 1: expected backward microbatch 0, got forward microbatch 1");
  // The failed call changed nothing: the right instruction still goes through.
  EXPECT_EQ(cursor.on_instruction_begin(kBackward, 0).microbatch, 0);
}

TEST(PlanCursor, MisuseIsNamed) {
  auto plan = std::make_shared<const plan::Plan>(testing::make_plan(2, 2));
  PlanCursor cursor(plan, 0);
  EXPECT_EQ(error_of([&] { (void)cursor.on_instruction_begin(kForward, 0); }),
            "stage 0: forward microbatch 0 began outside a step (call on_step_begin first)");
  EXPECT_EQ(error_of([&] { cursor.on_step_end(); }), "stage 0: on_step_end without a running step");
  cursor.on_step_begin();
  EXPECT_EQ(error_of([&] { cursor.on_step_begin(); }), "stage 0: step 0 began before the previous step ended");
  EXPECT_EQ(error_of([&] { (void)cursor.comm_config("fwd_attn"); }),
            "stage 0: comm_config('fwd_attn') asked outside an instruction");
  (void)cursor.on_instruction_begin(kForward, 0);
  EXPECT_EQ(error_of([&] { (void)cursor.on_instruction_begin(kForward, 1); }),
            "stage 0: forward microbatch 1 began while forward microbatch 0 is still running (call on_instruction_end "
            "first)");
  EXPECT_EQ(error_of([&] { (void)cursor.comm_config("bwd_mlp"); }),
            "stage 0: forward microbatch 0 has no comm config for partition 'bwd_mlp' (planned: fwd_attn)");
  cursor.on_instruction_end();
  EXPECT_EQ(error_of([&] { cursor.on_instruction_end(); }),
            "stage 0: on_instruction_end without a running instruction");
  // Stage 0 of 2 stages, 2 microbatches: F0 F1 B0 B1; ending after F0 is early.
  EXPECT_EQ(error_of([&] { cursor.on_step_end(); }),
            "stage 0: step ended after 1 of 4 instructions, expected forward microbatch 1 next");
}

TEST(PlanCursor, InstructionPastTheEndOfTheStep) {
  PlanCursor cursor = cursor_in_step(1, 1, 0);
  (void)cursor.on_instruction_begin(kForward, 0);
  cursor.on_instruction_end();
  (void)cursor.on_instruction_begin(kBackward, 0);
  cursor.on_instruction_end();
  EXPECT_EQ(error_of([&] { (void)cursor.on_instruction_begin(kForward, 1); }),
            "stage 0: expected the step to end after 2 instructions, got forward microbatch 1");
}

TEST(PlanCursor, StageOutOfRange) {
  auto plan = std::make_shared<const plan::Plan>(testing::make_plan(2, 2));
  EXPECT_EQ(error_of([&] { PlanCursor cursor(plan, 2); }), "stage 2 is out of range: the plan has 2 stages (0..1)");
}

TEST(PlanCursor, SwitchPlanOnlyBetweenSteps) {
  auto slow = std::make_shared<const plan::Plan>(testing::make_plan(2, 2));
  plan::Plan fast_plan = testing::make_plan(2, 2);
  fast_plan.stages[0].instructions[0].freq_mhz = 1980;
  fast_plan.stages[0].instructions[0].partitions["fwd_attn"].ctas = 32;
  auto fast = std::make_shared<const plan::Plan>(fast_plan);
  PlanCursor cursor(slow, 0);
  cursor.on_step_begin();
  EXPECT_EQ(error_of([&] { cursor.switch_plan(fast); }),
            "stage 0: switch_plan called mid-step (after 0 instructions); switch between steps");
  for (const auto& instruction : pipeline::one_f_one_b(0, 2, 2)) {
    (void)cursor.on_instruction_begin(instruction.type, instruction.microbatch);
    cursor.on_instruction_end();
  }
  cursor.on_step_end();
  cursor.switch_plan(fast);
  cursor.on_step_begin();
  EXPECT_EQ(cursor.on_instruction_begin(kForward, 0).freq_mhz, 1980);
  EXPECT_EQ(cursor.comm_config("fwd_attn").ctas, 32);
}

TEST(PlanCursor, StartedOfTypeCountsThisStep) {
  auto plan = std::make_shared<const plan::Plan>(testing::make_plan(2, 3));
  PlanCursor cursor(plan, 0);  // F0 F1 B0 F2 B1 B2
  EXPECT_EQ(cursor.started_of_type(kForward), 0);
  cursor.on_step_begin();
  for (int index = 0; index < 3; ++index) {
    const auto next = cursor.expected_next();
    ASSERT_TRUE(next);
    (void)cursor.on_instruction_begin(next->type, next->microbatch);
    cursor.on_instruction_end();
  }
  EXPECT_EQ(cursor.started_of_type(kForward), 2);
  EXPECT_EQ(cursor.started_of_type(kBackward), 1);
}

}  // namespace
}  // namespace kareus::runtime
