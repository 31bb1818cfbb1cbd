#include "kareus/pipeline/schedule.h"

#include <algorithm>
#include <cassert>

namespace kareus::pipeline {

std::vector<Instruction> one_f_one_b(int stage, int stages, int microbatches) {
  assert(stage >= 0 && stage < stages && microbatches >= 1 && "one_f_one_b: bad shape");
  std::vector<Instruction> order;
  order.reserve(2 * static_cast<std::size_t>(microbatches));
  const int warmup = std::min(stages - stage - 1, microbatches);
  int next_forward = 0;
  int next_backward = 0;
  for (; next_forward < warmup; ++next_forward) {
    order.push_back({stage, next_forward, Direction::kForward});
  }
  while (next_forward < microbatches) {
    order.push_back({stage, next_forward++, Direction::kForward});
    order.push_back({stage, next_backward++, Direction::kBackward});
  }
  while (next_backward < microbatches) {
    order.push_back({stage, next_backward++, Direction::kBackward});
  }
  return order;
}

}  // namespace kareus::pipeline
