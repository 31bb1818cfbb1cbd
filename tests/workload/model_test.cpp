#include "kareus/workload/model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "common/bad_edits.h"
#include "common/input_error.h"

#include "kareus/common/error.h"

namespace kareus::workload {
namespace {

using kareus::test_common::error_of;

TEST(ModelPreset, EveryPresetLoadsUnderItsOwnName) {
  const std::vector<std::string> names = model_preset_names();
  EXPECT_EQ(names, (std::vector<std::string>{"gpt3-175b", "llama3.2-3b", "llama3.3-70b", "qwen3-1.7b"}));
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const ModelSpec model = load_model(name);
    EXPECT_EQ(model.name, name);
    EXPECT_EQ(model.heads % model.kv_groups, 0);
  }
}

TEST(ModelPreset, ShapesAndNumericsMatchPublishedConfigs) {
  struct Row {
    std::string name;
    int hidden, heads, kv_groups, head_dim, ffn, layers, vocab;
    bool qk_norm;
    MlpKind mlp;
    bool tied_embeddings;
    double norm_eps, rotary_base;
    std::optional<RotaryScaling> scaling;
    int max_positions = 0;  // learned position table's rows; 0: RoPE
  };
  // The models' config.json on Hugging Face (docs/kareus.md section 7 has the shapes): Llama 3's
  // rope_scaling is (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings).
  // GPT-3 175B from Brown et al. 2020, table 2.1: learned positions over its 2048-token context
  // (no RoPE: the default base unused), GPT-2's LayerNorm epsilon.
  const RotaryScaling llama32{32, 1, 4, 8192};
  const RotaryScaling llama33{8, 1, 4, 8192};
  const Row rows[] = {
      {"llama3.2-3b", 3072, 24, 8, 128, 8192, 28, 128256, false, MlpKind::kSwiGlu, true, 1e-5, 500000, llama32},
      {"qwen3-1.7b", 2048, 16, 8, 128, 6144, 28, 151936, true, MlpKind::kSwiGlu, true, 1e-6, 1000000, std::nullopt},
      {"llama3.3-70b", 8192, 64, 8, 128, 28672, 80, 128256, false, MlpKind::kSwiGlu, false, 1e-5, 500000, llama33},
      {"gpt3-175b", 12288, 96, 96, 128, 49152, 96, 50257, false, MlpKind::kGelu, true, 1e-5, kDefaultRotaryBase,
       std::nullopt, 2048},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const ModelSpec model = load_model(row.name);
    EXPECT_EQ(model.hidden, row.hidden);
    EXPECT_EQ(model.heads, row.heads);
    EXPECT_EQ(model.kv_groups, row.kv_groups);
    EXPECT_EQ(model.head_dim, row.head_dim);
    EXPECT_EQ(model.ffn, row.ffn);
    EXPECT_EQ(model.layers, row.layers);
    EXPECT_EQ(model.vocab, row.vocab);
    EXPECT_EQ(model.qk_norm, row.qk_norm);
    EXPECT_EQ(model.mlp, row.mlp);
    EXPECT_EQ(model.tied_embeddings, row.tied_embeddings);
    EXPECT_EQ(model.norm_eps, row.norm_eps);
    EXPECT_EQ(model.rotary_base, row.rotary_base);
    EXPECT_EQ(model.rotary_scaling, row.scaling);
    EXPECT_EQ(model.position_embedding, row.max_positions ? PositionEmbedding::kLearned : PositionEmbedding::kRope);
    EXPECT_EQ(model.max_positions, row.max_positions);
    // GPT-3 keeps GPT-2's LayerNorm; Llama and Qwen use RMSNorm.
    EXPECT_EQ(model.norm, row.name == "gpt3-175b" ? NormKind::kLayerNorm : NormKind::kRmsNorm);
  }
}

TEST(ModelSpec, LayerParametersMatchHandCount) {
  const ModelSpec llama = load_model("llama3.2-3b");
  // q 3072x3072, k and v 3072x1024 each, o 3072x3072, gate/up/down 3 x 3072x8192, two norms.
  const double hand = 3072.0 * 3072 + 2 * 3072.0 * 1024 + 3072.0 * 3072 + 3 * 3072.0 * 8192 + 2 * 3072;
  EXPECT_DOUBLE_EQ(llama.layer_parameters(), hand);
  EXPECT_DOUBLE_EQ(hand, 100669440);
}

// Published totals: Llama 3.2 3B model card 3.21B (tie_word_embeddings = true in its
// config.json), Qwen3 1.7B card 1.7B (1.4B non-embedding), Llama 3.3 70B 70.6B, GPT-3 175B.
TEST(ModelSpec, ParametersMatchPublishedCounts) {
  struct Row {
    std::string name;
    double billions;
  };
  const Row rows[] = {{"llama3.2-3b", 3.21}, {"qwen3-1.7b", 1.72}, {"llama3.3-70b", 70.6}, {"gpt3-175b", 175.0}};
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_NEAR(load_model(row.name).parameters() / 1e9, row.billions, 0.01 * row.billions);
  }
}

TEST(ModelSpec, TiedEmbeddingsCountTheTableOnce) {
  ModelSpec model = load_model("qwen3-1.7b");
  const double tied = model.parameters();
  model.tied_embeddings = false;
  EXPECT_DOUBLE_EQ(model.parameters() - tied, 151936.0 * 2048);
}

TEST(LoadModel, UnknownNameNamesFlagAndListsPresets) {
  const std::string message = error_of([] { (void)load_model("llama9"); });
  EXPECT_NE(message.find("--model llama9"), std::string::npos) << message;
  EXPECT_NE(message.find("gpt3-175b, llama3.2-3b, llama3.3-70b, qwen3-1.7b"), std::string::npos) << message;
}

TEST(LoadModel, ReadsUserModelFromJsonFile) {
  const std::filesystem::path path = std::filesystem::path(testing::TempDir()) / "tiny_model.json";
  std::ofstream(path) << R"({"name": "tiny", "hidden": 256, "heads": 4, "kv_groups": 2, "head_dim": 64,
                             "ffn": 512, "layers": 2, "vocab": 1000, "mlp": "gelu"})";
  const ModelSpec model = load_model(path.string());
  EXPECT_EQ(model.name, "tiny");
  EXPECT_EQ(model.kv_groups, 2);
  EXPECT_EQ(model.mlp, MlpKind::kGelu);
  EXPECT_FALSE(model.qk_norm);
  EXPECT_NE(error_of([] { (void)load_model("/no/such/model.json"); }).find("/no/such/model.json"), std::string::npos);
}

TEST(ParseModel, BadDocumentNamesOriginAndField) {
  const std::string good = R"({"name": "m", "hidden": 256, "heads": 4, "kv_groups": 2, "head_dim": 64,
 "ffn": 512, "layers": 2, "vocab": 1000})";
  const std::vector<test_common::BadEdit> edits = {
      {"\"hidden\": 256, ", "", "m.json: missing field 'hidden'"},
      {"\"heads\": 4", "\"heads\": -4", "m.json: field 'heads' must be a positive integer, found -4"},
      {"\"ffn\": 512", "\"ffn\": 512.5", "field 'ffn' must be a positive integer"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"vocabulary\": 5", "m.json: unknown field 'vocabulary'"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"mlp\": \"relu\"", "field 'mlp' must be \"swiglu\" or \"gelu\""},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"qk_norm\": 1", "field 'qk_norm' must be true or false"},
      {"\"kv_groups\": 2", "\"kv_groups\": 3", "m.json: kv_groups 3 must divide heads 4"},
      {"\"layers\": 2,", "\"layers\": 2,,", "m.json:2:"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"norm\": \"batchnorm\"",
       "m.json: field 'norm' must be \"rmsnorm\" or \"layernorm\", found \"batchnorm\""},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"norm\": true", "m.json: field 'norm' must be a string"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"norm_eps\": 0", "m.json: field 'norm_eps' must be in (0, 1], found 0"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"norm_eps\": 2", "m.json: field 'norm_eps' must be in (0, 1], found 2"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"rotary_base\": \"big\"", "field 'rotary_base' must be a number"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"rotary_base\": 1", "field 'rotary_base' must be in (1, 1e+12], found 1"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"rotary_base\": 1e300", "field 'rotary_base' must be in (1, 1e+12]"},
  };
  (void)parse_model(good, "m.json");
  test_common::expect_each_edit_rejected(good, edits,
                                         [](const std::string& text) { (void)parse_model(text, "m.json"); });
}

TEST(ParseModel, BadRotaryScalingNamesTheField) {
  const std::string good = R"({"name": "m", "hidden": 256, "heads": 4, "kv_groups": 2, "head_dim": 64,
 "ffn": 512, "layers": 2, "vocab": 1000, "rotary_scaling": {"type": "llama3", "factor": 8,
 "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}})";
  const std::vector<test_common::BadEdit> edits = {
      {"{\"type\"", "[{\"type\"", "m.json:"},  // no longer JSON: the parser's line
      {"\"rotary_scaling\"", "\"rotary_scaling\": 8, \"source\"",
       "m.json: rotary_scaling: must be an object or null, found 8"},
      {"\"type\": \"llama3\"", "\"type\": \"yarn\"",
       "m.json: rotary_scaling: field 'type' must be \"llama3\", found \"yarn\""},
      {"\"type\": \"llama3\", ", "", "m.json: rotary_scaling: missing field 'type'"},
      {"\"factor\": 8", "\"factor\": 0.5", "m.json: rotary_scaling: field 'factor' must be in [1, 1e+06], found 0.5"},
      {"\"factor\": 8", "\"factor\": 1e9", "m.json: rotary_scaling: field 'factor' must be in [1, 1e+06]"},
      {"\"low_freq_factor\": 1", "\"low_freq_factor\": 0", "field 'low_freq_factor' must be in (0, 1e+06], found 0"},
      {"\"high_freq_factor\": 4", "\"high_freq_factor\": 1",
       "m.json: rotary_scaling: field 'high_freq_factor' must be in (1, 1e+06], found 1"},
      {"\"original_max_position_embeddings\": 8192", "\"original_max_position_embeddings\": 81.5",
       "rotary_scaling: field 'original_max_position_embeddings' must be a positive integer"},
      {"\"original_max_position_embeddings\": 8192", "\"original_max_position_embeddings\": 8192, \"beta\": 2",
       "m.json: rotary_scaling: unknown field 'beta'"},
  };
  EXPECT_EQ(parse_model(good, "m.json").rotary_scaling, (RotaryScaling{8, 1, 4, 8192}));
  test_common::expect_each_edit_rejected(good, edits,
                                         [](const std::string& text) { (void)parse_model(text, "m.json"); });
}

// A small model's required fields, its closing brace left for the fields a test adds.
const std::string kSmallModel = R"({"name": "m", "hidden": 256, "heads": 4, "kv_groups": 2, "head_dim": 64,
 "ffn": 512, "layers": 2, "vocab": 1000)";

TEST(ParseModel, AnOddHeadDimIsRefusedForRopeOnly) {
  std::string odd = kSmallModel + "}";
  odd.replace(odd.find("\"head_dim\": 64"), 14, "\"head_dim\": 7");
  EXPECT_EQ(test_common::error_of([&] { (void)parse_model(odd, "m.json"); }),
            "m.json: head_dim 7 is odd, but RoPE rotates channel pairs: give an even head_dim or "
            "\"position_embedding\": \"learned\"");
  odd.pop_back();  // a learned table has no pairs to rotate: 7 is a shape it can have
  EXPECT_EQ(parse_model(odd + R"(, "position_embedding": "learned", "max_positions": 64})", "m.json").head_dim, 7);
}

TEST(ParseModel, LearnedPositionEmbeddingRoundTripsAndBadOnesNameTheField) {
  const std::string good = kSmallModel + R"(, "position_embedding": "learned", "max_positions": 2048})";
  const ModelSpec learned = parse_model(good, "m.json");
  EXPECT_EQ(learned.position_embedding, PositionEmbedding::kLearned);
  EXPECT_EQ(learned.max_positions, 2048);
  // The table's 2048 x 256 parameters, and nothing else, on top of the RoPE model's.
  const ModelSpec rope = parse_model(kSmallModel + "}", "m.json");
  EXPECT_EQ(rope.position_embedding, PositionEmbedding::kRope);
  EXPECT_EQ(learned.parameters() - rope.parameters(), 524288.0);
  // Both kinds are always in the shape, and the shape parses back to the same model.
  const std::string shape = model_shape_json(learned);
  EXPECT_NE(shape.find(R"("position_embedding":"learned","max_positions":2048,)"), std::string::npos) << shape;
  EXPECT_NE(model_shape_json(rope).find(R"("position_embedding":"rope","max_positions":null,)"), std::string::npos);
  for (const ModelSpec* model : {&learned, &rope}) {
    std::string named = model_shape_json(*model);
    named.insert(1, R"("name": "m",)");
    const ModelSpec back = parse_model(named, "shape");
    EXPECT_EQ(back.position_embedding, model->position_embedding);
    EXPECT_EQ(back.max_positions, model->max_positions);
    EXPECT_EQ(model_shape_json(back), model_shape_json(*model));
  }
  const std::vector<test_common::BadEdit> edits = {
      {"\"learned\"", "\"alibi\"",
       "m.json: field 'position_embedding' must be \"rope\" or \"learned\", found \"alibi\""},
      {"\"learned\"", "7", "m.json: field 'position_embedding' must be a string"},
      {", \"max_positions\": 2048", "",
       "m.json: \"position_embedding\": \"learned\" needs field 'max_positions' (the table's rows"},
      {"2048", "null", "m.json: \"position_embedding\": \"learned\" needs field 'max_positions'"},
      {"2048", "0", "m.json: field 'max_positions' must be a positive integer, found 0"},
      {"2048", "204.8", "m.json: field 'max_positions' must be a positive integer"},
      {"2048", "1000000000", "m.json: field 'max_positions' = 1000000000 is implausibly large"},
      {"\"learned\"", "\"rope\"", "m.json: field 'max_positions' is the learned position table's length"},
      {"2048",
       "2048, \"rotary_scaling\": {\"type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
       "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}",
       "m.json: field 'rotary_scaling' scales RoPE, which a \"learned\" position embedding model has not"},
  };
  test_common::expect_each_edit_rejected(good, edits,
                                         [](const std::string& text) { (void)parse_model(text, "m.json"); });
}

TEST(ParseModel, NumericsRoundTripThroughTheShape) {
  const std::string& base = kSmallModel;
  const ModelSpec defaults = parse_model(base + "}", "m.json");
  EXPECT_EQ(defaults.norm_eps, 1e-5);
  EXPECT_EQ(defaults.rotary_base, 10000.0);
  EXPECT_FALSE(defaults.rotary_scaling.has_value());
  EXPECT_EQ(defaults.norm, NormKind::kRmsNorm);
  // The defaults are written too, and no scaling as null, so a plan for them names them.
  const std::string default_shape = model_shape_json(defaults);
  EXPECT_NE(default_shape.find(R"("norm":"rmsnorm","norm_eps":1e-05,"rotary_base":10000.0,"rotary_scaling":null)"),
            std::string::npos)
      << default_shape;
  const ModelSpec set =
      parse_model(base + R"(, "norm": "layernorm", "norm_eps": 1e-6, "rotary_base": 500000, "rotary_scaling":
 {"type": "llama3", "factor": 32, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}})",
                  "m.json");
  const std::string shape = model_shape_json(set);
  EXPECT_NE(
      shape.find(
          R"("norm":"layernorm","norm_eps":1e-06,"rotary_base":500000.0,"rotary_scaling":{"type":"llama3","factor":32.0,)"
          R"("low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192})"),
      std::string::npos)
      << shape;
  // The shape (plus the name a plan's block keeps beside it) parses back to the same numerics.
  std::string named = shape;
  named.insert(1, R"("name": "m",)");
  const ModelSpec back = parse_model(named, "shape");
  EXPECT_EQ(back.norm, NormKind::kLayerNorm);
  EXPECT_EQ(back.norm_eps, 1e-6);
  EXPECT_EQ(back.rotary_base, 500000.0);
  EXPECT_EQ(back.rotary_scaling, set.rotary_scaling);
  EXPECT_EQ(model_shape_json(back), shape);
  named = default_shape;
  named.insert(1, R"("name": "m",)");
  EXPECT_EQ(model_shape_json(parse_model(named, "shape")), default_shape);
}

}  // namespace
}  // namespace kareus::workload
