#include "kareus/runtime/plan_cursor.h"

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::runtime {
namespace {

/// "forward microbatch 3", and with interleaving "forward microbatch 3 chunk 1".
std::string describe_instruction(Direction type, int microbatch, int chunk, bool interleaved) {
  if (!interleaved) return fmt::format("{} microbatch {}", kareus::to_string(type), microbatch);
  return fmt::format("{} microbatch {} chunk {}", kareus::to_string(type), microbatch, chunk);
}

void check_stage(const std::shared_ptr<const plan::Plan>& plan, int stage) {
  if (!plan) throw InputError("plan cursor: no plan given");
  const int stages = static_cast<int>(plan->stages.size());
  if (stage < 0 || stage >= stages) {
    throw InputError(
        fmt::format("stage {} is out of range: the plan has {} stages (0..{})", stage, stages, stages - 1));
  }
}

}  // namespace

PlanCursor::PlanCursor(std::shared_ptr<const plan::Plan> plan, int stage) : plan_(std::move(plan)), stage_(stage) {
  check_stage(plan_, stage_);
  interleaved_ = plan::chunk_count(*plan_) > 1;
}

std::string PlanCursor::describe(const plan::PlannedInstruction& instruction) const {
  return describe_instruction(instruction.type, instruction.microbatch, instruction.chunk, interleaved_);
}

void PlanCursor::on_step_begin() {
  if (in_step_) {
    throw InputError(fmt::format("stage {}: step {} began before the previous step ended", stage_, steps_completed_));
  }
  in_step_ = true;
  next_index_ = 0;
}

const plan::PlannedInstruction& PlanCursor::on_instruction_begin(Direction type, int microbatch, int chunk) {
  // A caller naming a chunk of a plan without interleaving gets it named back too.
  const std::string got = describe_instruction(type, microbatch, chunk, interleaved_ || chunk != 0);
  if (!in_step_) {
    throw InputError(fmt::format("stage {}: {} began outside a step (call on_step_begin first)", stage_, got));
  }
  const auto& instructions = stage_plan().instructions;
  if (in_instruction_) {
    const auto& running = instructions[next_index_ - 1];
    throw InputError(fmt::format("stage {}: {} began while {} is still running (call on_instruction_end first)", stage_,
                                 got, describe(running)));
  }
  if (next_index_ >= instructions.size()) {
    throw InputError(fmt::format("stage {}: expected the step to end after {} instructions, got {}", stage_,
                                 instructions.size(), got));
  }
  const plan::PlannedInstruction& expected = instructions[next_index_];
  if (expected.type != type || expected.microbatch != microbatch || expected.chunk != chunk) {
    const std::string want =
        describe_instruction(expected.type, expected.microbatch, expected.chunk, interleaved_ || chunk != 0);
    throw InputError(fmt::format("stage {}: expected {}, got {}", stage_, want, got));
  }
  in_instruction_ = true;
  ++next_index_;
  return expected;
}

void PlanCursor::on_instruction_end() {
  if (!in_instruction_)
    throw InputError(fmt::format("stage {}: on_instruction_end without a running instruction", stage_));
  in_instruction_ = false;
}

void PlanCursor::on_step_end() {
  if (!in_step_) throw InputError(fmt::format("stage {}: on_step_end without a running step", stage_));
  const auto& instructions = stage_plan().instructions;
  if (in_instruction_) {
    const auto& running = instructions[next_index_ - 1];
    throw InputError(fmt::format("stage {}: step ended while {} is still running", stage_, describe(running)));
  }
  if (next_index_ < instructions.size()) {
    const auto& expected = instructions[next_index_];
    throw InputError(fmt::format("stage {}: step ended after {} of {} instructions, expected {} next", stage_,
                                 next_index_, instructions.size(), describe(expected)));
  }
  in_step_ = false;
  ++steps_completed_;
}

const partition::CommConfig& PlanCursor::comm_config(std::string_view partition_key) const {
  if (!in_instruction_) {
    throw InputError(fmt::format("stage {}: comm_config('{}') asked outside an instruction", stage_, partition_key));
  }
  const auto& running = stage_plan().instructions[next_index_ - 1];
  if (plan::effective_overlap(running) == workload::OverlapMode::kNone) return plan::not_overlapped();
  const auto found = running.partitions.find(std::string(partition_key));
  if (found == running.partitions.end()) {
    std::string planned;
    for (const auto& [key, config] : running.partitions) planned += (planned.empty() ? "" : ", ") + key;
    throw InputError(fmt::format("stage {}: {} has no comm config for partition '{}' (planned: {})", stage_,
                                 describe(running), partition_key, planned.empty() ? "none" : planned));
  }
  return found->second;
}

void PlanCursor::switch_plan(std::shared_ptr<const plan::Plan> plan) {
  if (in_step_) {
    throw InputError(fmt::format("stage {}: switch_plan called mid-step (after {} instructions); switch between steps",
                                 stage_, next_index_));
  }
  check_stage(plan, stage_);
  plan_ = std::move(plan);
  interleaved_ = plan::chunk_count(*plan_) > 1;
}

std::optional<plan::PlannedInstruction> PlanCursor::expected_next() const {
  const auto& instructions = stage_plan().instructions;
  if (!in_step_ || next_index_ >= instructions.size()) return std::nullopt;
  return instructions[next_index_];
}

int PlanCursor::started_of_type(Direction type) const {
  if (!in_step_) return 0;
  const auto& instructions = stage_plan().instructions;
  int started = 0;
  for (std::size_t index = 0; index < next_index_; ++index) started += instructions[index].type == type ? 1 : 0;
  return started;
}

}  // namespace kareus::runtime
