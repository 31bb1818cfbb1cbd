#include "kareus/partition/comm_fit.h"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../common/input_error.h"
#include "kareus/common/error.h"

namespace kareus::partition {
namespace {

using test_common::error_of;

// Llama 3.2 3B, TP 8, CP 1, PP 2, full recompute: forward keys fwd_attn, fwd_mlp.
workload::Workload llama(workload::Recompute recompute = workload::Recompute::kFull) {
  workload::Parallelism parallel;
  parallel.recompute = recompute;
  return workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
}

const CommConfigs kForward = {{"fwd_attn", {"norm_0", 12}}, {"fwd_mlp", {"linear_1", 6}}};

TEST(InstructionCommRules, KeysAreTheSearchableKeysTheInstructionRuns) {
  const workload::Workload full = llama();
  EXPECT_EQ(InstructionCommRules(full, 0, Direction::kForward).keys(),
            (std::vector<std::string>{"fwd_attn", "fwd_mlp"}));
  // Full recompute: the backward reruns the forward first, so it needs the fwd_* configs too.
  EXPECT_EQ(InstructionCommRules(full, 1, Direction::kBackward).keys(),
            (std::vector<std::string>{"fwd_attn", "fwd_mlp", "bwd_mlp", "bwd_attn"}));
  EXPECT_EQ(InstructionCommRules(llama(workload::Recompute::kNone), 1, Direction::kBackward).keys(),
            (std::vector<std::string>{"bwd_mlp", "bwd_attn"}));
  EXPECT_EQ(instruction_passes(full, Direction::kBackward),
            (std::vector<Direction>{Direction::kForward, Direction::kBackward}));
  EXPECT_EQ(instruction_passes(full, Direction::kForward), (std::vector<Direction>{Direction::kForward}));
}

TEST(InstructionCommRules, EachBrokenRuleIsNamed) {
  const workload::Workload workload = llama();
  const InstructionCommRules forward(workload, 0, Direction::kForward);
  const CommLimits a100{108, 16};
  struct Case {
    CommConfigs configs;
    CommLimits limits;
    std::string expected;
  };
  const auto with = [](std::string key, CommConfig config) {
    CommConfigs configs = kForward;
    configs[key] = std::move(config);
    return configs;
  };
  const std::vector<Case> cases = {
      {kForward, a100, "<no InputError>"},
      {with("fwd_mlp", {"none", 108}), a100, "<no InputError>"},  // after all compute, every SM
      {with("fwd_mlp", {"none", 109}), a100, "w: partition 'fwd_mlp': ctas 109 is outside 1..108 (one CTA per SM)"},
      {with("fwd_mlp", {"none", 0}), {}, "w: partition 'fwd_mlp': ctas 0 is outside 1..65536 (kareus's CTA limit)"},
      {with("fwd_mlp", {"none", 65536}), {}, "<no InputError>"},
      {with("fwd_mlp", {"attn_0", 6}), a100,
       "w: partition 'fwd_mlp': no launch slot 'attn_0' (slots: norm_0, linear_0, activation_0, linear_1, none)"},
      {with("bwd_mlp", {"norm_0", 6}), a100,
       "w: unknown partition key 'bwd_mlp' (this instruction's comm configs are for fwd_attn, fwd_mlp)"},
      {with("fwd_trail", {"norm_0", 6}), a100,
       "w: unknown partition key 'fwd_trail' (this instruction's comm configs are for fwd_attn, fwd_mlp; a trail "
       "runs at the GPU's default CTAs)"},
      {{{"fwd_attn", {"norm_0", 12}}},
       a100,
       "w: nanobatched, but no comm config for partition fwd_mlp (give its slot and ctas, or \"overlap\": \"none\")"},
  };
  for (const Case& row : cases) {
    SCOPED_TRACE(row.expected);
    EXPECT_EQ(error_of([&] { forward.check(row.configs, row.limits, "w"); }), row.expected);
  }
}

TEST(InstructionCommRules, SlotsOfTheStagesInstancesAreValidToo) {
  // A stage's last layer runs bwd_mlp without the next layer's norm: its instances open with
  // another slot, which a plan may name (the steady layer's instances then use their first slot).
  const workload::Workload workload = llama(workload::Recompute::kNone);
  const std::vector<Partition> backward = build_partitions(workload, 0, Direction::kBackward);
  const Partition& last_layer = backward.at(1);
  ASSERT_EQ(last_layer.key, "bwd_mlp");
  ASSERT_FALSE(last_layer.find_slot("norm_0"));
  const std::string own_first = last_layer.slots.front().name;
  ASSERT_FALSE(representative_partition(workload, "bwd_mlp").find_slot(own_first)) << own_first;
  const InstructionCommRules rules(workload, 0, Direction::kBackward);
  EXPECT_EQ(error_of([&] {
              rules.check({{"bwd_mlp", {own_first, 6}}, {"bwd_attn", {"norm_0", 6}}}, {108, 16}, "w");
            }),
            "<no InputError>");
}

TEST(CommConfigFor, PlannedConfigOrTheFallbacks) {
  const workload::Workload workload = llama(workload::Recompute::kNone);
  const std::vector<Partition> backward = build_partitions(workload, 0, Direction::kBackward);
  const CommConfigs planned = {{"bwd_mlp", {"norm_0", 12}}, {"bwd_attn", {"none", 9}}};
  int trails = 0;
  int fallbacks = 0;
  for (const Partition& partition : backward) {
    SCOPED_TRACE(partition.key + " layer " + std::to_string(partition.layer));
    const std::optional<CommConfig> config = comm_config_for(partition, planned, 16);
    if (!partition.collective) {
      EXPECT_FALSE(config);
    } else if (!partition.searchable()) {  // a trail: the GPU's default at its first slot
      ++trails;
      EXPECT_EQ(config, (CommConfig{partition.slots.front().name, 16}));
    } else if (partition.key == "bwd_attn") {
      EXPECT_EQ(config, (CommConfig{"none", 9}));
    } else if (partition.find_slot("norm_0")) {
      EXPECT_EQ(config, (CommConfig{"norm_0", 12}));
    } else {  // the stage's last layer: its own first slot, the planned CTAs
      ++fallbacks;
      EXPECT_EQ(config, (CommConfig{partition.slots.front().name, 12}));
    }
  }
  EXPECT_EQ(trails, 1);  // NB0's trail runs NB1's last collective; NB1's trail has none
  // The last layer's NB1 bwd_mlp; NB0's, the stage's first partition, has no collective to run.
  EXPECT_EQ(fallbacks, 1);
  EXPECT_FALSE(backward.at(0).collective);
  // A searchable key without a config (a default plan) runs like a trail.
  EXPECT_EQ(comm_config_for(backward.at(1), {}, 16), (CommConfig{backward.at(1).slots.front().name, 16}));
}

}  // namespace
}  // namespace kareus::partition
