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

}  // namespace
}  // namespace kareus::pipeline
