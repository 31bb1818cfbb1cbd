// kareus/workload/model.h - transformer model shapes: the presets and user models from JSON.
//
// First stage of the data flow (workload -> partition -> device -> ...). A ModelSpec is
// the shape of a decoder-only transformer (Llama-style GQA + SwiGLU, or GPT-style MHA +
// GELU); presets live in data/models/<name>.json, each with its source.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kareus::workload {

enum class MlpKind { kSwiGlu, kGelu };

inline constexpr double kDefaultNormEps = 1e-5;
inline constexpr double kDefaultRotaryBase = 10000.0;

struct ModelSpec {
  std::string name;
  int hidden = 0;     ///< model width
  int heads = 0;      ///< attention (query) heads
  int kv_groups = 0;  ///< key/value heads (GQA groups); = heads for MHA
  int head_dim = 0;
  int ffn = 0;  ///< MLP intermediate width
  int layers = 0;
  int vocab = 0;
  bool qk_norm = false;  ///< RMSNorm on q and k (Qwen3)
  bool tied_embeddings = false;
  MlpKind mlp = MlpKind::kSwiGlu;
  /// Numerics that change no cost but must match between a plan and the job that runs it
  /// (kareus.megatron reads them from Megatron's config): RMSNorm epsilon and RoPE base.
  double norm_eps = kDefaultNormEps;
  double rotary_base = kDefaultRotaryBase;

  /// Parameters of one transformer layer (weights of the linears and norms).
  [[nodiscard]] double layer_parameters() const;
  /// Parameters of the whole model (embedding and output layer counted once if tied).
  [[nodiscard]] double parameters() const;
};

/// Names of the built-in presets, sorted.
[[nodiscard]] std::vector<std::string> model_preset_names();

/// A preset by name, or a user model from a JSON file when `name_or_path` ends in ".json".
/// Throws InputError naming the flag `--model` and the presets, or the file and field.
[[nodiscard]] ModelSpec load_model(std::string_view name_or_path);

/// The model's shape as a JSON object: hidden, heads, kv_groups, head_dim, ffn, layers, vocab,
/// qk_norm, mlp, tied_embeddings (what summaries, plans and `kareus models` print).
[[nodiscard]] std::string model_shape_json(const ModelSpec& model);

/// Parses a model JSON document (fields as in data/models/*.json); `origin` names it in errors.
[[nodiscard]] ModelSpec parse_model(std::string_view json_text, std::string_view origin);

}  // namespace kareus::workload
