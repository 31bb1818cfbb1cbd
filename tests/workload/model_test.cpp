#include "kareus/workload/model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
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

TEST(ModelPreset, ShapesMatchReferenceTable) {
  struct Row {
    std::string name;
    int hidden, heads, kv_groups, head_dim, ffn, layers, vocab;
    bool qk_norm;
    MlpKind mlp;
  };
  // docs/kareus.md section 7; GPT-3 175B from Brown et al. 2020, table 2.1.
  const Row rows[] = {
      {"llama3.2-3b", 3072, 24, 8, 128, 8192, 28, 128256, false, MlpKind::kSwiGlu},
      {"qwen3-1.7b", 2048, 16, 8, 128, 6144, 28, 151936, true, MlpKind::kSwiGlu},
      {"llama3.3-70b", 8192, 64, 8, 128, 28672, 80, 128256, false, MlpKind::kSwiGlu},
      {"gpt3-175b", 12288, 96, 96, 128, 49152, 96, 50257, false, MlpKind::kGelu},
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
      {"\"vocab\": 1000", "\"vocab\": 1000, \"norm_eps\": 0", "field 'norm_eps' must be"},
      {"\"vocab\": 1000", "\"vocab\": 1000, \"rotary_base\": \"big\"", "field 'rotary_base' must be"},
  };
  (void)parse_model(good, "m.json");
  test_common::expect_each_edit_rejected(good, edits,
                                         [](const std::string& text) { (void)parse_model(text, "m.json"); });
}

TEST(ParseModel, NormEpsilonAndRotaryBaseEnterTheShapeOnlyWhenSet) {
  const std::string base = R"({"name": "m", "hidden": 256, "heads": 4, "kv_groups": 2, "head_dim": 64,
 "ffn": 512, "layers": 2, "vocab": 1000)";
  const ModelSpec defaults = parse_model(base + "}", "m.json");
  EXPECT_EQ(defaults.norm_eps, 1e-5);
  EXPECT_EQ(defaults.rotary_base, 10000.0);
  EXPECT_EQ(model_shape_json(defaults).find("norm_eps"), std::string::npos);
  EXPECT_EQ(model_shape_json(defaults).find("rotary_base"), std::string::npos);
  const ModelSpec set = parse_model(base + R"(, "norm_eps": 1e-6, "rotary_base": 500000})", "m.json");
  EXPECT_EQ(set.norm_eps, 1e-6);
  EXPECT_EQ(set.rotary_base, 500000.0);
  const std::string shape = model_shape_json(set);
  EXPECT_NE(shape.find("\"norm_eps\":1e-06"), std::string::npos) << shape;
  EXPECT_NE(shape.find("\"rotary_base\":500000.0"), std::string::npos) << shape;
}

}  // namespace
}  // namespace kareus::workload
