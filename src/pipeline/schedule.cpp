#include "kareus/pipeline/schedule.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/common/json_fields.h"

namespace kareus::pipeline {

std::string_view to_string(InstructionType type) { return type == InstructionType::kForward ? "forward" : "backward"; }

InstructionType parse_instruction_type(std::string_view text, std::string_view origin) {
  if (text == "forward") return InstructionType::kForward;
  if (text == "backward") return InstructionType::kBackward;
  throw InputError(fmt::format("{}: instruction type must be \"forward\" or \"backward\", found \"{}\"", origin,
                               json_fields::short_text(text)));
}

std::vector<Instruction> one_f_one_b(int stage, int stages, int microbatches) {
  assert(stage >= 0 && stage < stages && microbatches >= 1 && "one_f_one_b: bad shape");
  std::vector<Instruction> order;
  order.reserve(2 * static_cast<std::size_t>(microbatches));
  const int warmup = std::min(stages - stage - 1, microbatches);
  int next_forward = 0;
  int next_backward = 0;
  for (; next_forward < warmup; ++next_forward) {
    order.push_back({stage, next_forward, InstructionType::kForward});
  }
  while (next_forward < microbatches) {
    order.push_back({stage, next_forward++, InstructionType::kForward});
    order.push_back({stage, next_backward++, InstructionType::kBackward});
  }
  while (next_backward < microbatches) {
    order.push_back({stage, next_backward++, InstructionType::kBackward});
  }
  return order;
}

}  // namespace kareus::pipeline
