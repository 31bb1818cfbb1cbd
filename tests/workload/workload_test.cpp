#include "kareus/workload/workload.h"

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "common/input_error.h"

#include "kareus/common/error.h"

namespace kareus::workload {
namespace {

using kareus::test_common::error_of;

TEST(MakeWorkload, DefaultsAreTheArtifactSettingWithEvenSplit) {
  const Workload workload = make_workload(load_model("llama3.2-3b"), Parallelism{});
  EXPECT_EQ(workload.stage_layers, (std::vector<int>{14, 14}));
  EXPECT_EQ(workload.gpus(), 16);
  EXPECT_EQ(workload.nanobatch_sequences(), 4);
  EXPECT_DOUBLE_EQ(workload.nanobatch_tokens_per_gpu(), 4.0 * 4096);
}

TEST(MakeWorkload, OneSequenceMicrobatchesSplitIntoTokenHalves) {
  Parallelism parallel;
  parallel.mbs = 1;
  parallel.cp = 2;
  const Workload halves = make_workload(load_model("llama3.2-3b"), parallel);
  EXPECT_TRUE(halves.token_nanobatches());
  EXPECT_EQ(halves.nanobatch_sequences(), 0.5);
  EXPECT_DOUBLE_EQ(halves.nanobatch_tokens_per_gpu(), 4096.0 / 2 / 2);
  parallel.nanobatches = 1;
  EXPECT_FALSE(make_workload(load_model("llama3.2-3b"), parallel).token_nanobatches());
}

TEST(MakeWorkload, UnevenSplitGivesEarlierStagesTheRemainder) {
  Parallelism parallel;
  parallel.pp = 3;
  EXPECT_EQ(make_workload(load_model("llama3.3-70b"), parallel).stage_layers, (std::vector<int>{27, 27, 26}));
  parallel.pp = 28;
  EXPECT_EQ(make_workload(load_model("qwen3-1.7b"), parallel).stage_layers, std::vector<int>(28, 1));
}

TEST(MakeWorkload, ExplicitSplitIsKept) {
  Parallelism parallel;
  parallel.layers_per_stage = {15, 13};
  EXPECT_EQ(make_workload(load_model("llama3.2-3b"), parallel).stage_layers, (std::vector<int>{15, 13}));
}

TEST(MakeWorkload, ContextParallelShardsTheSequence) {
  Parallelism parallel;
  parallel.cp = 2;
  parallel.tp = 4;
  const Workload workload = make_workload(load_model("llama3.2-3b"), parallel);
  EXPECT_DOUBLE_EQ(workload.nanobatch_tokens_per_gpu(), 4.0 * 2048);
  EXPECT_EQ(workload.gpus(), 16);
}

TEST(MakeWorkload, EveryRuleNamesItsFlag) {
  ModelSpec odd_ffn = load_model("llama3.2-3b");
  odd_ffn.ffn = 8196;  // divisible by 4 but not by 8
  struct Row {
    std::string what;
    std::function<void(Parallelism&)> change;
    std::string message;
    ModelSpec model;
  };
  const ModelSpec llama = load_model("llama3.2-3b");
  const Row rows[] = {
      {"tp heads", [](Parallelism& p) { p.tp = 16; }, "--tp 16 must divide the 24 attention heads of llama3.2-3b",
       llama},
      {"tp kv", [](Parallelism& p) { p.tp = 3; }, "--tp 3 must divide the 8 key/value groups of llama3.2-3b", llama},
      {"tp ffn", [](Parallelism& p) { p.tp = 8; }, "--tp 8 must divide the MLP width 8196 of llama3.2-3b", odd_ffn},
      {"tp zero", [](Parallelism& p) { p.tp = 0; }, "--tp 0 must be >= 1", llama},
      {"cp seq", [](Parallelism& p) { p.cp = 3; }, "--cp 3 needs --seq divisible by 2 x cp = 6", llama},
      {"cp seq odd",
       [](Parallelism& p) {
         p.cp = 2;
         p.seq = 4098;
       },
       "--cp 2 needs --seq divisible by 2 x cp = 4", llama},
      {"mbs", [](Parallelism& p) { p.mbs = 7; }, "--mbs 7 must split evenly into 2 nanobatches", llama},
      {"token halves",
       [](Parallelism& p) {
         p.mbs = 1;
         p.seq = 4097;
       },
       "--mbs 1 with --nanobatches 2 splits each sequence into two token nanobatches: --seq 4097 / --cp 1 must be "
       "divisible by 2 (2 halves)",
       llama},
      {"token halves sp",
       [](Parallelism& p) {
         p.mbs = 1;
         p.tp = 4;
         p.sequence_parallel = true;
         p.seq = 4100;
       },
       "--seq 4100 / --cp 1 must be divisible by 8 (2 halves x --tp, sequence parallel)", llama},
      {"nanobatches", [](Parallelism& p) { p.nanobatches = 4; }, "--nanobatches 4 must be 1 (no overlap) or 2", llama},
      {"pp", [](Parallelism& p) { p.pp = 29; }, "--pp 29 must not exceed the 28 layers of llama3.2-3b", llama},
      {"dp", [](Parallelism& p) { p.dp = -1; }, "--dp -1 must be >= 1", llama},
      {"microbatches", [](Parallelism& p) { p.microbatches = 0; }, "--microbatches 0 must be >= 1", llama},
      // Ranges, and the GPU count taken in 64 bits: 8 x 1 x 2 x 2^31-1 used to wrap to -16 GPUs.
      {"dp max int", [](Parallelism& p) { p.dp = 2147483647; }, "--dp 2147483647 must be <= 65536", llama},
      {"gpu product",
       [](Parallelism& p) {
         p.cp = 2;
         p.dp = 65536;
       },
       "--tp 8 x --cp 2 x --pp 2 x --dp 65536 = 2097152 GPUs exceeds the limit of 1048576", llama},
      {"microbatches max", [](Parallelism& p) { p.microbatches = 4097; }, "--microbatches 4097 must be <= 4096", llama},
      {"seq max", [](Parallelism& p) { p.seq = 1 << 25; }, "--seq 33554432 must be <= 16777216", llama},
      {"mbs max", [](Parallelism& p) { p.mbs = 1 << 17; }, "--mbs 131072 must be <= 65536", llama},
      {"split count",
       [](Parallelism& p) {
         p.layers_per_stage = {10, 10, 8};
       },
       "--layers-per-stage 10,10,8 must list --pp 2 stages summing to the 28 layers", llama},
      {"split sum",
       [](Parallelism& p) {
         p.layers_per_stage = {15, 14};
       },
       "--layers-per-stage 15,14 must list --pp 2 stages summing to the 28 layers", llama},
      {"split empty stage",
       [](Parallelism& p) {
         p.layers_per_stage = {28, 0};
       },
       "--layers-per-stage 28,0: every stage needs >= 1 layer", llama},
      {"split sum past int",
       [](Parallelism& p) {
         p.layers_per_stage = {2147483647, 2147483647};
       },
       "--layers-per-stage 2147483647,2147483647 must list --pp 2 stages summing to the 28 layers", llama},
      // Megatron's rules for sequence parallelism and interleaving (defaults: tp 8, pp 2, 8 microbatches).
      {"sp tp 1",
       [](Parallelism& p) {
         p.sequence_parallel = true;
         p.tp = 1;
       },
       "--sequence-parallel needs --tp >= 2, found --tp 1", llama},
      {"sp seq",
       [](Parallelism& p) {
         p.sequence_parallel = true;
         p.seq = 4100;
       },
       "--sequence-parallel needs --seq 4100 / --cp 1 divisible by --tp 8", llama},
      {"vpp zero", [](Parallelism& p) { p.vpp = 0; }, "--vpp 0 must be >= 1", llama},
      {"vpp pp 1",
       [](Parallelism& p) {
         p.vpp = 2;
         p.pp = 1;
       },
       "--vpp 2 needs --pp >= 2", llama},
      {"vpp microbatches",
       [](Parallelism& p) {
         p.vpp = 2;
         p.microbatches = 7;
       },
       "--vpp 2 needs --microbatches 7 divisible by --pp 2", llama},
      {"vpp layers", [](Parallelism& p) { p.vpp = 3; },
       "--vpp 3 must divide every stage's layers; stage 0 has 14 (stages: 14,14)", llama},
      {"vpp middle stages",
       [](Parallelism& p) {
         p.vpp = 2;
         p.pp = 4;
         p.layers_per_stage = {6, 8, 6, 8};
       },
       "--vpp 2 needs the middle stages' layers equal (only the first and last may differ), found 6,8,6,8", llama},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    Parallelism parallel;
    row.change(parallel);
    const std::string message = error_of([&] { (void)make_workload(row.model, parallel); });
    EXPECT_NE(message.find(row.message), std::string::npos) << message;
  }
}

// Megatron's get_transformer_layer_offset: chunk c of stage s starts at c x (layers / vpp) plus
// the earlier stages' chunk sizes. 80 layers, pp 4, vpp 5: chunks of 4, stage 1 chunk 2 starts
// at 2 x 16 + 4 = 36.
TEST(MakeWorkload, InterleavedChunksFollowMegatronsLayerOffsets) {
  Parallelism parallel;
  parallel.tp = 4;
  parallel.pp = 4;
  parallel.vpp = 5;
  parallel.microbatches = 32;
  const Workload workload = make_workload(load_model("llama3.3-70b"), parallel);
  EXPECT_EQ(workload.chunk_layers(1), 4);
  EXPECT_EQ(workload.chunk_first_layer(0, 0), 0);
  EXPECT_EQ(workload.chunk_first_layer(3, 0), 12);
  EXPECT_EQ(workload.chunk_first_layer(1, 2), 36);
  EXPECT_EQ(workload.chunk_first_layer(3, 4), 76);
  // Uneven first and last stages (Megatron's num_layers_in_first/last_pipeline_stage): 28 layers
  // as 4,8,8,8 with vpp 2: chunks of 2,4,4,4, 14 layers per virtual pass.
  parallel.vpp = 2;
  parallel.microbatches = 8;
  parallel.layers_per_stage = {4, 8, 8, 8};
  const Workload uneven = make_workload(load_model("llama3.2-3b"), parallel);
  EXPECT_EQ(uneven.chunk_layers(0), 2);
  EXPECT_EQ(uneven.chunk_first_layer(1, 0), 2);
  EXPECT_EQ(uneven.chunk_first_layer(3, 0), 10);
  EXPECT_EQ(uneven.chunk_first_layer(0, 1), 14);
  EXPECT_EQ(uneven.chunk_first_layer(2, 1), 20);
}

TEST(WorkloadJson, RoundTripsSequenceParallelAndVppAndReadsOldBlocksAsNeither) {
  const Parallelism parallel{.tp = 4, .pp = 4, .microbatches = 8, .sequence_parallel = true, .vpp = 7};
  const std::string text = workload_to_json(make_workload(load_model("llama3.2-3b"), parallel));
  const auto document = nlohmann::json::parse(text);
  EXPECT_EQ(document["sequence_parallel"], true);
  EXPECT_EQ(document["vpp"], 7);
  const Workload back = workload_from_json(text, "block");
  EXPECT_TRUE(back.parallel.sequence_parallel);
  EXPECT_EQ(back.parallel.vpp, 7);
  auto old = document;
  old.erase("sequence_parallel");
  old.erase("vpp");
  const Workload old_back = workload_from_json(old.dump(), "block");
  EXPECT_FALSE(old_back.parallel.sequence_parallel);
  EXPECT_EQ(old_back.parallel.vpp, 1);
  old["sequence_parallel"] = "yes";
  EXPECT_NE(error_of([&] {
              (void)workload_from_json(old.dump(), "block");
            }).find("block: field 'sequence_parallel' must be true or false"),
            std::string::npos);
}

TEST(WorkloadJson, HoldsModelShapeAndResolvedParallelism) {
  Parallelism parallel;
  parallel.cp = 2;
  parallel.tp = 4;
  parallel.recompute = Recompute::kNone;
  const auto document = nlohmann::json::parse(workload_to_json(make_workload(load_model("qwen3-1.7b"), parallel)));
  EXPECT_EQ(document["model"], "qwen3-1.7b");
  EXPECT_EQ(document["shape"]["hidden"], 2048);
  EXPECT_EQ(document["shape"]["qk_norm"], true);
  EXPECT_EQ(document["tp"], 4);
  EXPECT_EQ(document["cp"], 2);
  EXPECT_EQ(document["recompute"], "none");
  EXPECT_EQ(document["layers_per_stage"], nlohmann::json::parse("[14, 14]"));
}

TEST(DefaultSequence, IsTheArtifactsUnlessALearnedTableIsShorter) {
  EXPECT_EQ(default_sequence(load_model("gpt3-175b")), 2048);
  EXPECT_EQ(default_sequence(load_model("llama3.3-70b")), 4096);
  ModelSpec long_table = load_model("gpt3-175b");
  long_table.max_positions = 8192;
  EXPECT_EQ(default_sequence(long_table), 4096);
}

TEST(MakeWorkload, SequencePastALearnedTableIsRefused) {
  const ModelSpec gpt3 = load_model("gpt3-175b");
  Parallelism parallel;
  parallel.pp = 16;
  parallel.seq = 2048;
  EXPECT_EQ(make_workload(gpt3, parallel).parallel.seq, 2048);
  parallel.seq = 2049;
  EXPECT_EQ(error_of([&] { (void)make_workload(gpt3, parallel); }),
            "--seq 2049 exceeds gpt3-175b's max_positions 2048 (learned position embeddings)");
  // RoPE has no table: any sequence in range.
  parallel.seq = 1 << 20;
  EXPECT_EQ(make_workload(load_model("llama3.2-3b"), parallel).parallel.seq, 1 << 20);
}

TEST(WorkloadJson, RoundTripsTheNormAndRefusesARecordedSequencePastTheTable) {
  Parallelism parallel;
  parallel.pp = 16;
  parallel.seq = 2048;
  const Workload gpt3 = make_workload(load_model("gpt3-175b"), parallel);
  const std::string text = workload_to_json(gpt3);
  nlohmann::json document = nlohmann::json::parse(text);
  EXPECT_EQ(document["shape"]["norm"], "layernorm");
  const Workload back = workload_from_json(text, "p.json: workload");
  EXPECT_EQ(back.model.norm, NormKind::kLayerNorm);
  EXPECT_EQ(workload_to_json(back), text);
  // A block written before the field: RMSNorm, the default.
  document["shape"].erase("norm");
  EXPECT_EQ(workload_from_json(document.dump(), "p.json: workload").model.norm, NormKind::kRmsNorm);
  document["seq"] = 4096;
  EXPECT_EQ(error_of([&] { (void)workload_from_json(document.dump(), "p.json: workload"); }),
            "p.json: workload: --seq 4096 exceeds gpt3-175b's max_positions 2048 (learned position embeddings)");
}

}  // namespace
}  // namespace kareus::workload
