#include "kareus/pipeline/schedule.h"

#include <string>

#include <gtest/gtest.h>

namespace kareus::pipeline {
namespace {

std::string spell(const std::vector<Instruction>& order) {
  std::string text;
  for (const Instruction& instruction : order) {
    text += (instruction.type == Direction::kForward ? "F" : "B") + std::to_string(instruction.microbatch) + " ";
  }
  return text;
}

TEST(OneFOneB, TwoStagesEightMicrobatchesMatchArtifact) {
  EXPECT_EQ(spell(one_f_one_b(0, 2, 8)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7 ");
  EXPECT_EQ(spell(one_f_one_b(1, 2, 8)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 ");
}

TEST(OneFOneB, FewerMicrobatchesThanStagesWarmsUpOnlyWhatExists) {
  EXPECT_EQ(spell(one_f_one_b(0, 4, 2)), "F0 F1 B0 B1 ");
  EXPECT_EQ(spell(one_f_one_b(3, 4, 2)), "F0 B0 F1 B1 ");
}

/// "F<microbatch>.<chunk>" / "B<microbatch>.<chunk>".
std::string spell_chunks(const std::vector<Instruction>& order) {
  std::string text;
  for (const Instruction& instruction : order) {
    text += (instruction.type == Direction::kForward ? "F" : "B") + std::to_string(instruction.microbatch) + "." +
            std::to_string(instruction.chunk) + " ";
  }
  return text;
}

// Derived by hand from Megatron's forward_backward_pipelining_with_interleaving: the schedule
// table of groups of pp microbatches, chunk-major ((0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1)
// (3,1) for pp 2, M 4, V 2); warmup 2 (pp - s - 1) + (V - 1) pp; the k-th backward is table
// entry k with the chunk reversed.
TEST(InterleavedOneFOneB, TwoStagesTwoChunksFourMicrobatches) {
  // Stage 0: warmup 2 + 2 = 4.
  EXPECT_EQ(spell_chunks(interleaved_one_f_one_b(0, 2, 2, 4)),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 ");
  // Stage 1: warmup 0 + 2 = 2.
  EXPECT_EQ(spell_chunks(interleaved_one_f_one_b(1, 2, 2, 4)),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 ");
}

TEST(InterleavedOneFOneB, WarmupCoveringEverythingRunsAllForwardsFirst) {
  // pp 4, V 3, M 4: stage 0's warmup 6 + 8 = 14 > 12 forwards.
  const std::vector<Instruction> order = interleaved_one_f_one_b(0, 4, 3, 4);
  ASSERT_EQ(order.size(), 24U);
  for (std::size_t k = 0; k < 12; ++k) EXPECT_EQ(order[k].type, Direction::kForward) << k;
  EXPECT_EQ(spell_chunks({order.begin() + 12, order.begin() + 16}), "B0.2 B1.2 B2.2 B3.2 ");
  EXPECT_EQ(spell_chunks({order.end() - 1, order.end()}), "B3.0 ");
  // The last stage: warmup (V - 1) pp = 8, then F0.2 B0.2.
  const std::vector<Instruction> last = interleaved_one_f_one_b(3, 4, 3, 4);
  EXPECT_EQ(spell_chunks({last.begin() + 7, last.begin() + 10}), "F3.1 F0.2 B0.2 ");
}

TEST(InterleavedOneFOneB, OneChunkIsOneFOneB) { EXPECT_EQ(interleaved_one_f_one_b(1, 4, 1, 6), one_f_one_b(1, 4, 6)); }

}  // namespace
}  // namespace kareus::pipeline
