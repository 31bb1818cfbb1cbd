#include "kareus/interop/artifact_schedule.h"

#include <filesystem>

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.h"
#include "common/scratch.h"
#include "interop_test_plans.h"
#include "kareus/common/file_io.h"

namespace kareus::interop {
namespace {

using test_common::error_of;
using ::testing::HasSubstr;
using testing::test_plan;
using testing::test_workload;

TEST(ArtifactKeyLayout, FollowsTheArtifactsParser) {
  const ArtifactKeyLayout cp1 = artifact_key_layout(test_workload(1));
  EXPECT_EQ(cp1.forward_keys, (std::vector<std::string>{"fwd_attn", "fwd_mlp"}));
  EXPECT_EQ(cp1.recompute_keys, cp1.forward_keys);
  EXPECT_EQ(cp1.backward_keys, (std::vector<std::string>{"bwd_attn", "bwd_mlp"}));
  EXPECT_TRUE(cp1.per_instruction);
  const ArtifactKeyLayout cp2 = artifact_key_layout(test_workload(2));
  EXPECT_EQ(cp2.forward_keys,
            (std::vector<std::string>{"fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar", "fwd_mlp"}));
  EXPECT_EQ(cp2.backward_keys, (std::vector<std::string>{"bwd_qkv_ar", "bwd_qkv_rs", "bwd_a_rs", "bwd_a_ag", "bwd_o_ag",
                                                         "bwd_o_ar", "bwd_mlp"}));
  const ArtifactKeyLayout no_recompute = artifact_key_layout(test_workload(1, 4, workload::Recompute::kNone));
  EXPECT_TRUE(no_recompute.recompute_keys.empty());
  EXPECT_FALSE(no_recompute.per_instruction);
}

TEST(ArtifactExport, FreqsFileIsTheArtifactsLiteral) {
  // Two microbatches: stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1 (synchronous 1F1B).
  const workload::Workload workload = test_workload(1, 2);
  plan::Plan plan = test_plan(workload, false);
  const int clocks[2][4] = {{1410, 1395, 1200, 1215}, {1305, 1110, 1290, 1095}};
  for (int stage = 0; stage < 2; ++stage) {
    for (int index = 0; index < 4; ++index) plan.stages[stage].instructions[index].freq_mhz = clocks[stage][index];
  }
  plan.predicted_time_s = 4.608;
  plan.predicted_energy_j = 21813.25;
  const ArtifactFiles files = export_artifact(plan, workload, 7, "p.json");
  EXPECT_EQ(files.freqs_py,
            "[\n"
            "[('forward', 1410), ('forward', 1395), ('backward', 1200), ('backward', 1215)],\n"
            "[('forward', 1305), ('backward', 1110), ('forward', 1290), ('backward', 1095)],\n"
            "]\n"
            "# Iteration 7 predicted time_s: 4.608\n"
            "# Iteration 7 predicted energy_j: 21813.25\n");
  EXPECT_EQ(files.scheds_py, "");  // no overlap: no schedule file
}

TEST(ArtifactExport, SchedsEntriesListRecomputeThenBackwardConfigs) {
  const workload::Workload workload = test_workload(1, 2);
  plan::Plan plan = test_plan(workload);
  plan.stages[0].instructions[0].partitions = {{"fwd_attn", {"rope_0", 12}}, {"fwd_mlp", {"norm_0", 18}}};
  plan.stages[0].instructions[2].partitions = {{"fwd_attn", {"attn_0", 21}},
                                               {"fwd_mlp", {"norm_0", 15}},
                                               {"bwd_attn", {"rope_0", 30}},
                                               {"bwd_mlp", {"activation_0", 15}}};
  const ArtifactFiles files = export_artifact(plan, workload, 0, "p.json");
  EXPECT_THAT(files.scheds_py,
              ::testing::StartsWith("[\n[('forward', 'rope_0-none-12-1024', 'norm_0-none-18-1024'), "));
  EXPECT_THAT(files.scheds_py, HasSubstr("('backward', 'attn_0-none-21-1024', 'norm_0-none-15-1024', "
                                         "'rope_0-none-30-1024', 'activation_0-none-15-1024')"));
}

TEST(ArtifactRoundTrip, ExportThenImportGivesThePlanBack) {
  struct Case {
    const char* name;
    int cp;
    workload::Recompute recompute;
    bool overlap;
  };
  for (const Case& row :
       {Case{"cp1", 1, workload::Recompute::kFull, true}, Case{"cp2", 2, workload::Recompute::kFull, true},
        Case{"no recompute (pairs)", 1, workload::Recompute::kNone, true},
        Case{"cp2 no recompute", 2, workload::Recompute::kNone, true},
        Case{"no overlap", 1, workload::Recompute::kFull, false}}) {
    SCOPED_TRACE(row.name);
    const workload::Workload workload = test_workload(row.cp, 4, row.recompute);
    const plan::Plan plan = test_plan(workload, row.overlap, 1);
    const ArtifactFiles files = export_artifact(plan, workload, 3, "p.json");
    std::optional<std::string> scheds;
    if (row.overlap) scheds = files.scheds_py;
    const plan::Plan back = import_artifact(files.freqs_py, "f.py", scheds, "s.py", workload);
    EXPECT_EQ(back, plan);
    // And through the plan file format too.
    EXPECT_EQ(plan::parse_plan(plan::plan_to_json(back), "back"), plan);
  }
}

TEST(ArtifactImport, MissingPredictionsAreZero) {
  const workload::Workload workload = test_workload(1, 2);
  const std::string freqs =
      "[\n[('forward', 930), ('forward', 900), ('backward', 900), ('backward', 915)],\n"
      "[('forward', 930), ('backward', 900), ('forward', 900), ('backward', 900)],\n]\n"
      "# Iteration 324 total cost: 1224.84\n";
  const plan::Plan plan = import_artifact(freqs, "f.py", std::nullopt, "", workload);
  EXPECT_EQ(plan.predicted_time_s, 0);
  EXPECT_EQ(plan.stages[0].instructions[3].freq_mhz, 915);
  EXPECT_EQ(plan.stages[0].instructions[3].microbatch, 1);
  EXPECT_EQ(plan.stages[1].instructions[1].type, Direction::kBackward);
  EXPECT_EQ(plan.stages[1].instructions[1].microbatch, 0);
}

TEST(ArtifactImport, MalformedFilesNameFileLineAndEntry) {
  const workload::Workload workload = test_workload(1, 2);
  const std::string stage1 = "[('forward', 930), ('backward', 900), ('forward', 900), ('backward', 900)],\n";
  const auto freqs_with = [&](const std::string& stage0) { return "[\n" + stage0 + "\n" + stage1 + "]\n"; };
  const std::string good_stage0 = "[('forward', 930), ('forward', 900), ('backward', 900), ('backward', 915)],";
  struct Case {
    std::string freqs;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"[\n" + stage1 + "]\n", "f.py:1: expected 2 stage lists (--pp 2), found 1"},
      {freqs_with("[('forward', 930), ('backward', 900), ('backward', 900), ('backward', 915)],"),
       "f.py:2: stage 0 entry 1: expected 'forward' (1F1B order), found 'backward'"},
      {freqs_with("[('forward', '930'), ('forward', 900), ('backward', 900), ('backward', 915)],"),
       "f.py:2: stage 0 entry 0 clock: expected a integer, found a string"},
      {freqs_with("[('forward', 0), ('forward', 900), ('backward', 900), ('backward', 915)],"),
       "f.py:2: stage 0 entry 0: clock must be in 1..100000 MHz, found 0"},
      {freqs_with("[('forward', 930), ('forward', 900), ('backward', 900)],"),
       "f.py:2: stage 0: expected 4 entries (2 x 2 microbatches, --microbatches), found 3"},
      {freqs_with("[('forward', 930), ('fwd', 900), ('backward', 900), ('backward', 915)],"),
       "f.py:2: stage 0 entry 1: instruction must be 'forward' or 'backward', found 'fwd'"},
      {freqs_with("[('forward', 930, 1), ('forward', 900), ('backward', 900), ('backward', 915)],"),
       "f.py:2: stage 0 entry 0: expected ('forward'|'backward', MHz), found 3 elements"},
      {freqs_with("[('forward', 930), ('forward', 900), ('backward', 900), ('backward', 915)"),
       "f.py:3: expected ',' or ']'"},
      {"[\n[('forward', 'unterminated),\n]", "f.py:2: unterminated string"},
      {"[[[[[[[[[[1]]]]]]]]]]", "f.py:1: nesting deeper than 8"},
      {freqs_with(good_stage0) + "x", "f.py:5: unexpected 'x' after the literal"},
      {freqs_with(good_stage0) + "# Iteration 1 predicted time_s: soon\n",
       "f.py:5: predicted time_s must be a non-negative number, found 'soon'"},
      {freqs_with("[('forward', 99999999999999999999), ('forward', 900), ('backward', 900), ('backward', 915)],"),
       "f.py:2: integer '99999999999999999999' out of range"},
  };
  for (const Case& row : cases) {
    SCOPED_TRACE(row.freqs);
    EXPECT_EQ(error_of([&] { (void)import_artifact(row.freqs, "f.py", std::nullopt, "", workload); }), row.expected);
  }
}

TEST(ArtifactImport, MalformedSchedsNameFileLineEntryAndKey) {
  const workload::Workload workload = test_workload(1, 2);
  const plan::Plan plan = test_plan(workload);
  const ArtifactFiles files = export_artifact(plan, workload, 0, "p.json");
  // Stage 0's first entry is ('forward', A, B); replace it to break one thing at a time.
  const std::size_t first = files.scheds_py.find("('forward'");
  const std::size_t end = files.scheds_py.find(')', first) + 1;
  const auto with_entry = [&](const std::string& entry) {
    return files.scheds_py.substr(0, first) + entry + files.scheds_py.substr(end);
  };
  struct Case {
    std::string entry;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"('forward', 'norm_0-linear_0-12-1024', 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0 (fwd_attn): bad comm config 'norm_0-linear_0-12-1024': the end slot must be 'none' "
       "(the partition's end), found 'linear_0'"},
      {"('forward', 'norm_0-none-12-512', 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0 (fwd_attn): bad comm config 'norm_0-none-12-512': threads per CTA must be 1024, found "
       "512"},
      // The CTA limit and the slots are partition/comm_fit.h's (no GPU known: kMaxCtas).
      {"('forward', 'norm_0-none-0-1024', 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0: partition 'fwd_attn': ctas 0 is outside 1..65536 (kareus's CTA limit)"},
      {"('forward', 'norm_0-none-65537-1024', 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0: partition 'fwd_attn': ctas 65537 is outside 1..65536 (kareus's CTA limit)"},
      {"('forward', 'norm_0-none-12-1024', 'attn_0-none-18-1024')",
       "s.py:2: stage 0 entry 0: partition 'fwd_mlp': no launch slot 'attn_0' (slots: norm_0, linear_0, "
       "activation_0, linear_1, none)"},
      {"('forward', '0-8-16-1024', 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0 (fwd_attn): bad comm config '0-8-16-1024': integer overlap windows (the artifact's "
       "older format) are not supported; use slot names"},
      {"('forward', 'norm_0-none-x-1024', 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0 (fwd_attn): bad comm config 'norm_0-none-x-1024': the CTA count is not an integer"},
      {"('forward', 'norm_0', 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0 (fwd_attn): bad comm config 'norm_0': expected '<start slot>-<end "
       "slot>-<CTAs>-<threads "
       "per CTA>'"},
      {"('forward', 'norm_0-none-12-1024')",
       "s.py:2: stage 0 entry 0: a forward entry holds 2 comm configs (fwd_attn, fwd_mlp), found 1"},
      {"('backward', 'norm_0-none-12-1024', 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0: expected 'forward' (as in f.py), found 'backward'"},
      {"('forward', 12, 'norm_0-none-18-1024')",
       "s.py:2: stage 0 entry 0 (fwd_attn): expected a string, found a integer"},
  };
  for (const Case& row : cases) {
    SCOPED_TRACE(row.entry);
    EXPECT_EQ(error_of([&] { (void)import_artifact(files.freqs_py, "f.py", with_entry(row.entry), "s.py", workload); }),
              row.expected);
  }
}

TEST(ArtifactExport, AMixedPlansSequentialInstructionRoundTrips) {
  // kareus may run an instruction without nanobatching: its configs say 'none' (not overlapped).
  const workload::Workload workload = test_workload(1, 2);
  plan::Plan mixed = test_plan(workload);
  mixed.stages[1].instructions[2].partitions.clear();
  mixed.stages[1].instructions[2].overlap = workload::OverlapMode::kNone;
  const ArtifactFiles files = export_artifact(mixed, workload, 0, "p.json");
  EXPECT_THAT(files.scheds_py, HasSubstr("'none-none-20-1024'"));
  const plan::Plan back = import_artifact(files.freqs_py, "f.py", files.scheds_py, "s.py", workload);
  EXPECT_EQ(back.stages[1].instructions[2].overlap, workload::OverlapMode::kNone);
  EXPECT_TRUE(back.stages[1].instructions[2].partitions.empty());
  EXPECT_EQ(back.stages[1].instructions[3], mixed.stages[1].instructions[3]);
}

TEST(ArtifactExport, RefusesWhatTheFilesCannotSay) {
  const workload::Workload workload = test_workload(1, 2);
  plan::Plan missing_key = test_plan(workload);
  missing_key.stages[0].instructions[2].partitions.erase("fwd_mlp");
  EXPECT_EQ(error_of([&] { (void)export_artifact(missing_key, workload, 0, "p.json"); }),
            "p.json: stage 0 instruction 2 (backward microbatch 0): nanobatched, but no comm config for partition "
            "fwd_mlp (give its slot and ctas, or \"overlap\": \"none\")");
  plan::Plan bad_slot = test_plan(workload);
  bad_slot.stages[0].instructions[0].partitions["fwd_attn"].slot = "a-b";
  EXPECT_THAT(error_of([&] { (void)export_artifact(bad_slot, workload, 0, "p.json"); }),
              HasSubstr("p.json: stage 0 instruction 0 (forward microbatch 0): partition 'fwd_attn': no launch slot "
                        "'a-b'"));
  EXPECT_EQ(error_of([&] { (void)export_artifact(test_plan(test_workload(1, 4)), workload, 0, "p.json"); }),
            "p.json: made for microbatches 4, this run has microbatches 2");
  plan::Plan hand_made = test_plan(test_workload(1, 4));
  hand_made.workload_json = "{}";
  EXPECT_EQ(error_of([&] { (void)export_artifact(hand_made, workload, 0, "p.json"); }),
            "p.json: made for microbatches 4, this run has microbatches 2");
}

TEST(ArtifactFiles, FolderRoundTripWritesPlansAndFrontier) {
  const std::filesystem::path root = test_common::scratch_path("kareus_interop_artifact_files");
  std::filesystem::remove_all(root);
  const workload::Workload workload = test_workload(1, 4);
  std::vector<ExportedPlan> plans;
  for (int variant = 0; variant < 3; ++variant) {
    const std::filesystem::path path = root / "plans" / fmt::format("plan_{:02d}.json", variant * 5);
    std::filesystem::create_directories(path.parent_path());
    plan::write_plan(path, test_plan(workload, true, variant));
  }
  plans = plans_in_directory(root / "plans");
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[2].number, 10);
  const auto written = export_artifact_files(plans, workload, root / "artifact");
  EXPECT_EQ(written.size(), 6u);
  EXPECT_TRUE(std::filesystem::exists(root / "artifact" / "scheds_pipeline_00010.py"));
  const auto imported = import_artifact_files(root / "artifact", workload, "", root / "back");
  ASSERT_EQ(imported.size(), 3u);
  for (int variant = 0; variant < 3; ++variant) {
    EXPECT_EQ(plan::read_plan(imported[variant]), test_plan(workload, true, variant));
  }
  // Variant v: time 4.25 + v/8, energy 21813.5 - 100 v: all three are Pareto points.
  const auto frontier = read_json_file(root / "back" / "frontier.json");
  ASSERT_EQ(frontier["points"].size(), 3u);
  EXPECT_EQ(frontier["points"][2]["plan"], "plan_00010.json");
  EXPECT_EQ(frontier["points"][2]["time_s"], 4.5);
  EXPECT_THAT(error_of([&] { (void)import_artifact_files(root / "plans", workload, "", root / "x"); }),
              HasSubstr("no freqs_pipeline_NNNNN.py files"));
  std::filesystem::remove_all(root);
}

TEST(ArtifactFiles, ImportReadsEachFileByTheNameItFoundAndRefusesTwoForOneNumber) {
  const std::filesystem::path root = test_common::scratch_path("kareus_interop_artifact_names");
  std::filesystem::remove_all(root);
  const workload::Workload workload = test_workload(1, 4);
  const std::filesystem::path plan_path = root / "plans" / "plan_01.json";
  std::filesystem::create_directories(plan_path.parent_path());
  plan::write_plan(plan_path, test_plan(workload, true, 1));
  (void)export_artifact_files({{plan_path, 1}}, workload, root / "artifact");
  // The artifact's own names are unpadded too: freqs_pipeline_1.py used to be found as number 1
  // and then read as freqs_pipeline_00001.py, which does not exist.
  std::filesystem::rename(root / "artifact" / "freqs_pipeline_00001.py", root / "artifact" / "freqs_pipeline_1.py");
  std::filesystem::rename(root / "artifact" / "scheds_pipeline_00001.py", root / "artifact" / "scheds_pipeline_1.py");
  const auto imported = import_artifact_files(root / "artifact", workload, "", root / "back");
  ASSERT_EQ(imported.size(), 1u);
  EXPECT_EQ(plan::read_plan(imported[0]), test_plan(workload, true, 1));
  // Two files for schedule 1: which one is meant cannot be told, so neither is read.
  std::filesystem::copy_file(root / "artifact" / "freqs_pipeline_1.py", root / "artifact" / "freqs_pipeline_00001.py");
  EXPECT_EQ(
      error_of([&] { (void)import_artifact_files(root / "artifact", workload, "", root / "back2"); }),
      fmt::format("{} and {} are both schedule 1: remove one", (root / "artifact" / "freqs_pipeline_00001.py").string(),
                  (root / "artifact" / "freqs_pipeline_1.py").string()));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace kareus::interop
