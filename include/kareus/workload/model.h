// kareus/workload/model.h - transformer model shapes: the presets and user models from JSON.
//
// First stage of the data flow (workload -> partition -> device -> ...). A ModelSpec is
// the shape of a decoder-only transformer (Llama-style GQA + SwiGLU, or GPT-style MHA +
// GELU), its norm (RMSNorm, or LayerNorm with mean subtraction and a bias, as GPT-3), its
// position embedding (RoPE in every layer, or a learned table added to the token embedding, as
// GPT-3) and the numerics a job must share with its plan (norm epsilon, RoPE base and Llama 3
// frequency scaling); presets live in data/models/<name>.json, each with its source.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::workload {

enum class MlpKind { kSwiGlu, kGelu };

/// How positions enter the model: RoPE rotates q and k in every layer (a rope op per layer), or
/// a learned table of max_positions rows is added to the token embedding (first stage only).
enum class PositionEmbedding { kRope, kLearned };

/// The kind of every norm of the model (the layers' two, the q/k norms, the final one): RMSNorm
/// (a weight; Llama, Qwen) or LayerNorm (mean subtracted, a weight and a bias; GPT-3).
enum class NormKind { kRmsNorm, kLayerNorm };

/// "rmsnorm" / "layernorm", as the model JSON spells it.
[[nodiscard]] std::string_view to_string(NormKind norm);

inline constexpr double kDefaultNormEps = 1e-5;
inline constexpr double kDefaultRotaryBase = 10000.0;

/// Llama 3's RoPE frequency scaling (Hugging Face `rope_type` "llama3"): a frequency whose
/// wavelength (2 pi / frequency, in tokens) is above original_max_position_embeddings /
/// low_freq_factor is divided by `factor`, one below original_max_position_embeddings /
/// high_freq_factor is kept, and those between are interpolated smoothly between the two.
struct RotaryScaling {
  double factor = 1;                         ///< context extension: low frequencies are divided by it (>= 1)
  double low_freq_factor = 1;                ///< wavelength threshold divisor of the fully scaled band (> 0)
  double high_freq_factor = 1;               ///< wavelength threshold divisor of the kept band (> low_freq_factor)
  int original_max_position_embeddings = 0;  ///< pretraining context length, tokens
  bool operator==(const RotaryScaling&) const = default;
};

struct ModelSpec {
  std::string name;
  int hidden = 0;     ///< model width
  int heads = 0;      ///< attention (query) heads
  int kv_groups = 0;  ///< key/value heads (GQA groups); = heads for MHA
  int head_dim = 0;
  int ffn = 0;  ///< MLP intermediate width
  int layers = 0;
  int vocab = 0;
  bool qk_norm = false;  ///< a norm (of the `norm` kind) on q and one on k, per head (Qwen3)
  bool tied_embeddings = false;
  MlpKind mlp = MlpKind::kSwiGlu;
  NormKind norm = NormKind::kRmsNorm;
  PositionEmbedding position_embedding = PositionEmbedding::kRope;
  int max_positions = 0;  ///< rows of the learned position table (kLearned only; 0 for RoPE)
  /// Numerics that change no cost but must match between a plan and the job that runs it
  /// (kareus.torch runs them; kareus.megatron passes them to and from Megatron's config): the
  /// epsilon of the norms (of the `norm` kind), the RoPE base and its scaling (none when empty).
  double norm_eps = kDefaultNormEps;
  double rotary_base = kDefaultRotaryBase;
  std::optional<RotaryScaling> rotary_scaling;

  /// Parameters of one transformer layer (weights of the linears; weights, and LayerNorm's
  /// biases, of the norms).
  [[nodiscard]] double layer_parameters() const;
  /// Learned vectors of one norm over `width` elements: its weight, and a bias for LayerNorm.
  [[nodiscard]] double norm_parameters(double width) const;
  /// Parameters of the learned position table (max_positions x hidden), 0 for RoPE.
  [[nodiscard]] double position_parameters() const;
  /// Parameters of the whole model (embedding and output layer counted once if tied, the
  /// learned position table included).
  [[nodiscard]] double parameters() const;
};

/// Names of the built-in presets, sorted.
[[nodiscard]] std::vector<std::string> model_preset_names();

/// A preset by name, or a user model from a JSON file when `name_or_path` ends in ".json".
/// Throws InputError naming the flag `--model` and the presets, or the file and field.
[[nodiscard]] ModelSpec load_model(std::string_view name_or_path);

/// The model's shape as a JSON object: hidden, heads, kv_groups, head_dim, ffn, layers, vocab,
/// qk_norm, mlp, tied_embeddings, position_embedding, max_positions (null for RoPE), norm, norm_eps,
/// rotary_base and rotary_scaling (null when none):
/// what summaries, plans and `kareus models` print, and what a plan's workload check compares.
[[nodiscard]] std::string model_shape_json(const ModelSpec& model);

/// Parses a model JSON document (fields as in data/models/*.json; docs/formats.md); `origin` names
/// it in errors. Throws InputError naming the field that is missing, mistyped or out of range.
[[nodiscard]] ModelSpec parse_model(std::string_view json_text, std::string_view origin);

}  // namespace kareus::workload
