// kareus/runtime/plan_cursor.h - one rank's position in a plan during training.
//
// The training loop reports each step and each pipeline instruction (forward or backward of
// one microbatch on one model chunk); the cursor checks them against the stage's planned
// (interleaved) 1F1B order and answers
// which clock (MHz) and which comm configs (CTA count, launch slot) apply now. A backward's
// activation-recompute forward is part of the backward instruction: its collectives are looked
// up in the backward's own partition map, so the loop must not report it as a forward.
// Every deviation from the plan is an InputError naming the stage and what was expected.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kareus/pipeline/schedule.h"
#include "kareus/plan/plan.h"

namespace kareus::runtime {

class PlanCursor {
 public:
  /// Follows stage `stage` of `plan`. Throws InputError if the plan has no such stage.
  PlanCursor(std::shared_ptr<const plan::Plan> plan, int stage);

  /// Starts an iteration. Throws InputError if a step is already running.
  void on_step_begin();

  /// Starts the next instruction and returns its plan entry. Throws InputError outside a step,
  /// inside another instruction, past the last instruction, or when (type, microbatch, chunk) is
  /// not the planned next one: "stage 1: expected backward microbatch 0, got forward microbatch
  /// 1", with interleaving "stage 1: expected forward microbatch 0 chunk 1, got forward
  /// microbatch 2 chunk 0". `chunk` is the model chunk (0 without interleaving).
  const plan::PlannedInstruction& on_instruction_begin(Direction type, int microbatch, int chunk = 0);

  /// Ends the running instruction. Throws InputError if none is running.
  void on_instruction_end();

  /// Ends the iteration. Throws InputError if an instruction is running or the step ended before
  /// the stage's last instruction.
  void on_step_end();

  /// The comm config of `partition_key` for the running instruction; plan::not_overlapped()
  /// (slot "none", 0 CTAs) when the instruction runs without nanobatching. Throws InputError
  /// outside an instruction or for a key a nanobatched instruction does not plan (the message
  /// lists the planned keys).
  [[nodiscard]] const partition::CommConfig& comm_config(std::string_view partition_key) const;

  /// Replaces the plan; allowed only between steps (throws InputError mid-step or if the new plan
  /// has no stage `stage()`).
  void switch_plan(std::shared_ptr<const plan::Plan> plan);

  /// The planned next instruction of the current step (nullopt when the step is complete or
  /// no step is running).
  [[nodiscard]] std::optional<plan::PlannedInstruction> expected_next() const;

  /// How many instructions of `type` the current step has started (0 outside a step).
  [[nodiscard]] int started_of_type(Direction type) const;

  [[nodiscard]] int stage() const { return stage_; }
  [[nodiscard]] bool in_step() const { return in_step_; }
  /// Completed steps since construction.
  [[nodiscard]] long long steps_completed() const { return steps_completed_; }
  [[nodiscard]] const plan::Plan& plan() const { return *plan_; }
  [[nodiscard]] const plan::StagePlan& stage_plan() const { return plan_->stages[static_cast<std::size_t>(stage_)]; }

 private:
  std::shared_ptr<const plan::Plan> plan_;
  int stage_ = 0;
  bool in_step_ = false;
  bool in_instruction_ = false;
  std::size_t next_index_ = 0;  ///< next instruction of the step
  bool interleaved_ = false;    ///< the plan has several chunks per stage: messages name them

  [[nodiscard]] std::string describe(const plan::PlannedInstruction& instruction) const;
  long long steps_completed_ = 0;
};

}  // namespace kareus::runtime
