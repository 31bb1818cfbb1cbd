#include "kareus/partition/search_space.h"

#include <functional>
#include <map>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "common/input_error.h"

#include "kareus/common/error.h"

namespace kareus::partition {
namespace {

/// The artifact's A100 clocks: 900..1410 MHz in 30 MHz steps (docs/kareus.md section 3).
std::vector<int> artifact_a100_clocks() {
  std::vector<int> clocks;
  for (int clock = 900; clock <= 1410; clock += 30) clocks.push_back(clock);
  return clocks;
}

std::map<std::string, Partition> partitions_of(int cp, int tp, const std::string& model = "llama3.2-3b") {
  workload::Parallelism parallel;
  parallel.cp = cp;
  parallel.tp = tp;
  const workload::Workload workload = workload::make_workload(workload::load_model(model), parallel);
  std::map<std::string, Partition> partitions;
  for (Direction direction : {Direction::kForward, Direction::kBackward}) {
    for (const Partition& partition : layer_partitions(workload, direction)) {
      partitions.emplace(partition.key, partition);
    }
  }
  return partitions;
}

using kareus::test_common::error_of;

// clocks (18) x CTAs (TP 3..30 step 3: 10; CP 1..20: 20) x the artifact's slots.
TEST(SearchSpace, ArtifactSpaceSizesOnA100MatchReference) {
  struct Row {
    int cp, tp;
    std::string key;
    std::size_t size;
  };
  const Row rows[] = {
      {1, 8, "fwd_attn", 720},   {1, 8, "fwd_mlp", 540},     {1, 8, "bwd_attn", 720},   {1, 8, "bwd_mlp", 540},
      {2, 4, "fwd_qkv_ar", 360}, {2, 4, "fwd_qkv_ag", 1080}, {2, 4, "fwd_ao_ag", 720},  {2, 4, "fwd_ao_ar", 180},
      {2, 4, "fwd_mlp", 540},    {2, 4, "bwd_mlp", 540},     {2, 4, "bwd_o_ar", 180},   {2, 4, "bwd_o_ag", 720},
      {2, 4, "bwd_a_ag", 360},   {2, 4, "bwd_a_rs", 360},    {2, 4, "bwd_qkv_rs", 720}, {2, 4, "bwd_qkv_ar", 360},
  };
  const SpaceOptions options{SlotPolicy::kArtifact, {3, 30, 3}, {1, 20, 1}};
  for (const Row& row : rows) {
    SCOPED_TRACE(row.key + " cp " + std::to_string(row.cp));
    const Partition partition = partitions_of(row.cp, row.tp).at(row.key);
    const SearchSpace space = make_search_space(partition, artifact_a100_clocks(), options);
    EXPECT_EQ(space.size(), row.size);
    EXPECT_EQ(space.slots(), artifact_slots(row.key));
  }
}

TEST(SearchSpace, AllSlotsPolicySearchesEverySlot) {
  const Partition fwd_attn = partitions_of(1, 8).at("fwd_attn");
  const SearchSpace space = make_search_space(fwd_attn, artifact_a100_clocks(), SpaceOptions{});
  EXPECT_EQ(space.size(), 18u * 10 * 5);
  EXPECT_EQ(space.ctas(), (std::vector<int>{3, 6, 9, 12, 15, 18, 21, 24, 27, 30}));
  const Partition bwd_a_rs = partitions_of(2, 4).at("bwd_a_rs");
  const SearchSpace cp_space =
      make_search_space(bwd_a_rs, {1410}, SpaceOptions{SlotPolicy::kAll, {3, 30, 3}, {2, 8, 2}});
  EXPECT_EQ(cp_space.ctas(), (std::vector<int>{2, 4, 6, 8}));
  EXPECT_EQ(cp_space.size(), 4u);
}

TEST(SearchSpace, IndexOfInvertsAtAndEnumeratesClockMajor) {
  const SpaceOptions options{SlotPolicy::kArtifact, {3, 30, 3}, {1, 20, 1}};
  for (const auto& [key, partition] : partitions_of(2, 4)) {
    SCOPED_TRACE(key);
    const SearchSpace space = make_search_space(partition, artifact_a100_clocks(), options);
    for (std::size_t index = 0; index < space.size(); ++index) {
      ASSERT_EQ(space.index_of(space.at(index)), index);
    }
    EXPECT_EQ(space.at(0), (KnobConfig{900, space.ctas().front(), space.slots().front()}));
    EXPECT_EQ(space.at(space.size() - 1), (KnobConfig{1410, space.ctas().back(), space.slots().back()}));
    EXPECT_EQ(space.at(space.slots().size()).ctas, space.ctas()[1]);  // slots vary fastest
  }
}

TEST(SearchSpace, CoordinatesNameTheConfigAndInvertIndexAt) {
  // 3 clocks x 2 CTA counts x 2 slots, by hand: index 7 = (1 * 2 + 1) * 2 + 1.
  const SearchSpace space({900, 1000, 1100}, {3, 6}, {"norm_0", "linear_0"});
  EXPECT_EQ(space.coordinates(7), (SpaceCoordinates{1, 1, 1}));
  EXPECT_EQ(space.coordinates(4), (SpaceCoordinates{1, 0, 0}));
  EXPECT_EQ(space.coordinates(11), (SpaceCoordinates{2, 1, 1}));
  for (std::size_t index = 0; index < space.size(); ++index) {
    const SpaceCoordinates at = space.coordinates(index);
    ASSERT_EQ(space.index_at(at), index);
    const KnobConfig config = space.at(index);
    EXPECT_EQ(config.freq_mhz, space.clocks_mhz()[at.clock]);
    EXPECT_EQ(config.ctas, space.ctas()[at.cta]);
    EXPECT_EQ(config.slot, space.slots()[at.slot]);
  }
}

TEST(SearchSpace, ConfigOutsideTheSpaceHasIndexSize) {
  const SearchSpace space = make_search_space(partitions_of(1, 8).at("fwd_mlp"), artifact_a100_clocks(),
                                              SpaceOptions{SlotPolicy::kArtifact, {3, 30, 3}, {1, 20, 1}});
  EXPECT_EQ(space.index_of({915, 3, "norm_0"}), space.size());    // clock not in the list
  EXPECT_EQ(space.index_of({900, 4, "norm_0"}), space.size());    // CTA count not in the range
  EXPECT_EQ(space.index_of({900, 3, "linear_1"}), space.size());  // slot the artifact did not search
  EXPECT_EQ(space.index_of({900, 3, "norm_0"}), 0u);
}

TEST(SearchSpace, PartitionWithoutCollectiveHasOneConfigPerClock) {
  Partition lone;
  lone.key = "fwd_trail";
  const SearchSpace space = make_search_space(lone, artifact_a100_clocks(), SpaceOptions{SlotPolicy::kArtifact});
  EXPECT_EQ(space.size(), 18u);
  EXPECT_EQ(space.at(5), (KnobConfig{1050, 0, ""}));
}

TEST(SearchSpace, BadOptionsAreInputErrors) {
  Partition trail = partitions_of(1, 8).at("fwd_mlp");
  trail.key = "fwd_trail";  // has a collective, but the artifact never searched it
  EXPECT_NE(error_of([&] {
              (void)make_search_space(trail, {1410}, SpaceOptions{SlotPolicy::kArtifact});
            }).find("--slots artifact"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)make_search_space(trail, {}, SpaceOptions{}); }).find("clock list is empty"),
            std::string::npos);
}

TEST(KnobConfigJson, RoundTripsAndRefusesWhatItDoesNotWrite) {
  const KnobConfig config{1215, 12, "linear_0"};
  const nlohmann::json written = nlohmann::json::parse(knob_config_to_json(config).dump());
  const KnobConfig read = knob_config_from_json(written, "log:3: config");
  EXPECT_EQ(read.freq_mhz, 1215);
  EXPECT_EQ(read.ctas, 12);
  EXPECT_EQ(read.slot, "linear_0");
  const auto message_of = [](const std::string& text) {
    return error_of([&] { (void)knob_config_from_json(nlohmann::json::parse(text), "log:3: config"); });
  };
  EXPECT_EQ(message_of(R"({"freq_mhz": 1215, "ctass": 12, "slot": "linear_0"})"),
            "log:3: config: unknown field 'ctass' (allowed: freq_mhz, ctas, slot)");
  EXPECT_EQ(message_of(R"({"freq_mhz": 1215, "ctas": 65537, "slot": "linear_0"})"),
            "log:3: config: field 'ctas' must be an integer in [0, 65536], found 65537");
  EXPECT_EQ(message_of("[1215, 12]"), "log:3: config: a config must be a JSON object");
}

TEST(CtaRange, AcceptsMinMaxAndStep) {
  const CtaRange with_step = cta_range(std::vector<int>{3, 30, 3}, "--tp-ctas");
  EXPECT_EQ(with_step.values().size(), 10u);
  EXPECT_EQ(with_step.values().back(), 30);
  EXPECT_EQ(cta_range(std::vector<int>{1, 20}, "--cp-ctas").values().size(), 20u);
  EXPECT_EQ(cta_range(std::vector<int>{4, 10, 4}, "--tp-ctas").values(), (std::vector<int>{4, 8}));
  EXPECT_EQ(cta_range(std::vector<int>{1, kMaxCtas, kMaxCtas}, "--tp-ctas").values(), (std::vector<int>{1}));
}

TEST(CtaRange, MalformedRangeNamesTheFlag) {
  const std::vector<std::vector<int>> ranges = {{},      {3},        {3, 30, 3, 1}, {0, 30},
                                                {30, 3}, {3, 30, 0}, {3, 30, -3},   {1, kMaxCtas + 1}};
  for (const std::vector<int>& values : ranges) {
    const std::string text = fmt::format("{}", fmt::join(values, ":"));
    SCOPED_TRACE(text);
    const std::string message = error_of([&] { (void)cta_range(values, "--tp-ctas"); });
    EXPECT_NE(message.find("--tp-ctas " + text + ": expected MIN:MAX[:STEP]"), std::string::npos) << message;
  }
}

TEST(ParseSlotPolicy, KnownWordsAndErrorNamingFlag) {
  EXPECT_EQ(parse_slot_policy("all"), SlotPolicy::kAll);
  EXPECT_EQ(parse_slot_policy("artifact"), SlotPolicy::kArtifact);
  EXPECT_NE(error_of([] { (void)parse_slot_policy("some"); }).find("--slots some"), std::string::npos);
}

TEST(ArtifactSlots, EveryKeyOfTheReferenceTable) {
  // The sixteen keys: fourteen searched, plus the trails which are never searched.
  for (const std::string key :
       {"fwd_attn", "fwd_mlp", "bwd_attn", "bwd_mlp", "fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar", "bwd_o_ar",
        "bwd_o_ag", "bwd_a_ag", "bwd_a_rs", "bwd_qkv_rs", "bwd_qkv_ar"}) {
    SCOPED_TRACE(key);
    EXPECT_FALSE(artifact_slots(key).empty());
  }
  EXPECT_TRUE(artifact_slots("fwd_trail").empty());
  EXPECT_TRUE(artifact_slots("bwd_trail").empty());
  EXPECT_EQ(artifact_slots("fwd_attn"), (std::vector<std::string>{"norm_0", "linear_0", "rope_0", "attn_0"}));
}

}  // namespace
}  // namespace kareus::partition
