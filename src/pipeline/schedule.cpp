#include "kareus/pipeline/schedule.h"

#include <algorithm>
#include <cassert>
#include <utility>

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

std::vector<Instruction> interleaved_one_f_one_b(int stage, int stages, int chunks, int microbatches) {
  if (chunks == 1) return one_f_one_b(stage, stages, microbatches);
  assert(stage >= 0 && stage < stages && stages >= 2 && microbatches % stages == 0 &&
         "interleaved_one_f_one_b: bad shape");
  // The k-th entry: (microbatch, chunk) of the k-th forward, groups of `stages` microbatches.
  const int group = stages;
  std::vector<std::pair<int, int>> table;
  for (int first = 0; first < microbatches; first += group) {
    for (int chunk = 0; chunk < chunks; ++chunk) {
      for (int microbatch = first; microbatch < std::min(first + group, microbatches); ++microbatch) {
        table.emplace_back(microbatch, chunk);
      }
    }
  }
  const int total = static_cast<int>(table.size());
  const int warmup = std::min(2 * (stages - stage - 1) + (chunks - 1) * group, total);
  auto forward = [&](int k) { return Instruction{stage, table[k].first, Direction::kForward, table[k].second}; };
  auto backward = [&](int k) {
    return Instruction{stage, table[k].first, Direction::kBackward, chunks - 1 - table[k].second};
  };
  std::vector<Instruction> order;
  order.reserve(2 * static_cast<std::size_t>(total));
  for (int k = 0; k < warmup; ++k) order.push_back(forward(k));
  for (int k = 0; k + warmup < total; ++k) {
    order.push_back(forward(k + warmup));
    order.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(backward(k));
  return order;
}

}  // namespace kareus::pipeline
