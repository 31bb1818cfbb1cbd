#include "kareus/workload/model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/embedded_data.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::workload {
namespace {

namespace jf = json_fields;

int positive_int(const nlohmann::json& document, std::string_view key, std::string_view origin) {
  const long long value = jf::require_positive_int(document, key, origin);
  if (value > 100'000'000)
    throw InputError(fmt::format("{}: field '{}' = {} is implausibly large", origin, key, value));
  return static_cast<int>(value);
}

/// A number of `object` in [min, max] (or (min, max] when `min_exclusive`), named as `key`.
double bounded_number(const nlohmann::json& object, std::string_view key, double min, bool min_exclusive, double max,
                      std::string_view origin) {
  const double value = jf::require_number(object, key, origin);
  if (value < min || (min_exclusive && value == min) || value > max) {
    throw InputError(fmt::format("{}: field '{}' must be in {}{:g}, {:g}], found {:g}", origin, key,
                                 min_exclusive ? "(" : "[", min, max, value));
  }
  return value;
}

// Bounds that keep hostile input finite and meaningful: an epsilon is small, a RoPE base above 1
// makes frequencies fall with the dimension, and no published scaling comes near these limits.
constexpr double kMaxRotaryBase = 1e12;
constexpr double kMaxScalingFactor = 1e6;

RotaryScaling parse_rotary_scaling(const nlohmann::json& scaling, std::string_view model_origin) {
  const std::string origin = fmt::format("{}: rotary_scaling", model_origin);
  if (!scaling.is_object()) {
    throw InputError(fmt::format("{}: must be an object or null, found {}", origin, jf::excerpt(scaling)));
  }
  jf::reject_unknown(
      scaling, {"type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}, origin);
  const std::string type = jf::require_string(scaling, "type", origin);
  if (type != "llama3") {
    throw InputError(fmt::format("{}: field 'type' must be \"llama3\", found \"{}\"", origin, jf::short_text(type)));
  }
  RotaryScaling result;
  result.factor = bounded_number(scaling, "factor", 1, false, kMaxScalingFactor, origin);
  result.low_freq_factor = bounded_number(scaling, "low_freq_factor", 0, true, kMaxScalingFactor, origin);
  result.high_freq_factor =
      bounded_number(scaling, "high_freq_factor", result.low_freq_factor, true, kMaxScalingFactor, origin);
  result.original_max_position_embeddings = positive_int(scaling, "original_max_position_embeddings", origin);
  return result;
}

/// position_embedding ("rope" by default, or "learned" with its table's max_positions rows);
/// a field that belongs to the other kind is refused, so a model says one thing.
void parse_position_embedding(const nlohmann::json& document, std::string_view origin, ModelSpec& model) {
  const std::string kind =
      document.contains("position_embedding") ? jf::require_string(document, "position_embedding", origin) : "rope";
  const auto max_positions = document.find("max_positions");
  const bool has_max_positions = max_positions != document.end() && !max_positions->is_null();
  if (kind == "rope") {
    // RoPE rotates each head's channels in pairs: an odd head_dim has no rotation to give its last one.
    if (model.head_dim % 2 != 0) {
      throw InputError(fmt::format(
          "{}: head_dim {} is odd, but RoPE rotates channel pairs: give an even head_dim or \"position_embedding\": "
          "\"learned\"",
          origin, model.head_dim));
    }
    if (has_max_positions) {
      throw InputError(
          fmt::format("{}: field 'max_positions' is the learned position table's length: set "
                      "\"position_embedding\": \"learned\" or drop it",
                      origin));
    }
    return;
  }
  if (kind != "learned") {
    throw InputError(fmt::format("{}: field 'position_embedding' must be \"rope\" or \"learned\", found \"{}\"", origin,
                                 jf::short_text(kind)));
  }
  if (!has_max_positions) {
    throw InputError(
        fmt::format("{}: \"position_embedding\": \"learned\" needs field 'max_positions' (the "
                    "table's rows, the model's context length)",
                    origin));
  }
  if (model.rotary_scaling) {
    throw InputError(
        fmt::format("{}: field 'rotary_scaling' scales RoPE, which a \"learned\" position embedding "
                    "model has not (set it to null or drop it)",
                    origin));
  }
  model.position_embedding = PositionEmbedding::kLearned;
  model.max_positions = positive_int(document, "max_positions", origin);
}

/// norm: "rmsnorm" (default) or "layernorm".
NormKind parse_norm(const nlohmann::json& document, std::string_view origin) {
  if (!document.contains("norm")) return NormKind::kRmsNorm;
  const std::string kind = jf::require_string(document, "norm", origin);
  if (kind == "rmsnorm") return NormKind::kRmsNorm;
  if (kind == "layernorm") return NormKind::kLayerNorm;
  throw InputError(
      fmt::format("{}: field 'norm' must be \"rmsnorm\" or \"layernorm\", found \"{}\"", origin, jf::short_text(kind)));
}

}  // namespace

std::string_view to_string(NormKind norm) { return norm == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }

double ModelSpec::norm_parameters(double width) const { return (norm == NormKind::kLayerNorm ? 2 : 1) * width; }

double ModelSpec::layer_parameters() const {
  const double q_width = static_cast<double>(heads) * head_dim;
  const double kv_width = 2.0 * kv_groups * head_dim;
  const double attention = hidden * (q_width + kv_width) + q_width * hidden;
  const double mlp_weights = (mlp == MlpKind::kSwiGlu ? 3.0 : 2.0) * hidden * ffn;
  // The input and MLP norms over hidden; with qk_norm, one norm each for q and k over head_dim.
  const double norms = 2 * norm_parameters(hidden) + (qk_norm ? 2 * norm_parameters(head_dim) : 0.0);
  return attention + mlp_weights + norms;
}

double ModelSpec::position_parameters() const { return static_cast<double>(max_positions) * hidden; }

double ModelSpec::parameters() const {
  const double embeddings = static_cast<double>(vocab) * hidden * (tied_embeddings ? 1 : 2);
  return layers * layer_parameters() + embeddings + position_parameters() + norm_parameters(hidden);
}

std::string model_shape_json(const ModelSpec& model) {
  nlohmann::ordered_json shape = {{"hidden", model.hidden},
                                  {"heads", model.heads},
                                  {"kv_groups", model.kv_groups},
                                  {"head_dim", model.head_dim},
                                  {"ffn", model.ffn},
                                  {"layers", model.layers},
                                  {"vocab", model.vocab},
                                  {"qk_norm", model.qk_norm},
                                  {"mlp", model.mlp == MlpKind::kSwiGlu ? "swiglu" : "gelu"},
                                  {"tied_embeddings", model.tied_embeddings}};
  // Always written (no scaling or table as null): the workload check compares only the fields
  // both sides name, so a field left out at its default would let a plan for the default pass
  // another value.
  const bool learned = model.position_embedding == PositionEmbedding::kLearned;
  shape["position_embedding"] = learned ? "learned" : "rope";
  shape["max_positions"] = learned ? nlohmann::ordered_json(model.max_positions) : nullptr;
  shape["norm"] = to_string(model.norm);
  shape["norm_eps"] = model.norm_eps;
  shape["rotary_base"] = model.rotary_base;
  if (const auto& scaling = model.rotary_scaling) {
    shape["rotary_scaling"] = {{"type", "llama3"},
                               {"factor", scaling->factor},
                               {"low_freq_factor", scaling->low_freq_factor},
                               {"high_freq_factor", scaling->high_freq_factor},
                               {"original_max_position_embeddings", scaling->original_max_position_embeddings}};
  } else {
    shape["rotary_scaling"] = nullptr;
  }
  return shape.dump();
}

std::vector<std::string> model_preset_names() { return embedded_names("models"); }

ModelSpec parse_model(std::string_view json_text, std::string_view origin) {
  const nlohmann::json document = parse_json(json_text, origin);
  jf::reject_unknown(document,
                     {"name", "hidden", "heads", "kv_groups", "head_dim", "ffn", "layers", "vocab", "qk_norm", "mlp",
                      "tied_embeddings", "position_embedding", "max_positions", "norm", "norm_eps", "rotary_base",
                      "rotary_scaling", "source"},
                     origin);
  ModelSpec model;
  model.name = jf::require_string(document, "name", origin);
  model.hidden = positive_int(document, "hidden", origin);
  model.heads = positive_int(document, "heads", origin);
  model.kv_groups = positive_int(document, "kv_groups", origin);
  model.head_dim = positive_int(document, "head_dim", origin);
  model.ffn = positive_int(document, "ffn", origin);
  model.layers = positive_int(document, "layers", origin);
  model.vocab = positive_int(document, "vocab", origin);
  model.qk_norm = jf::optional_bool(document, "qk_norm", false, origin);
  model.tied_embeddings = jf::optional_bool(document, "tied_embeddings", false, origin);
  model.norm = parse_norm(document, origin);
  if (document.contains("norm_eps")) model.norm_eps = bounded_number(document, "norm_eps", 0, true, 1, origin);
  if (document.contains("rotary_base")) {
    model.rotary_base = bounded_number(document, "rotary_base", 1, true, kMaxRotaryBase, origin);
  }
  if (const auto scaling = document.find("rotary_scaling"); scaling != document.end() && !scaling->is_null()) {
    model.rotary_scaling = parse_rotary_scaling(*scaling, origin);
  }
  parse_position_embedding(document, origin, model);
  const std::string mlp = document.contains("mlp") ? jf::require_string(document, "mlp", origin) : "swiglu";
  if (mlp == "swiglu") {
    model.mlp = MlpKind::kSwiGlu;
  } else if (mlp == "gelu") {
    model.mlp = MlpKind::kGelu;
  } else {
    throw InputError(fmt::format("{}: field 'mlp' must be \"swiglu\" or \"gelu\", found \"{}\"", origin,
                                 json_fields::short_text(mlp)));
  }
  if (model.heads % model.kv_groups != 0) {
    throw InputError(fmt::format("{}: kv_groups {} must divide heads {}", origin, model.kv_groups, model.heads));
  }
  return model;
}

ModelSpec load_model(std::string_view name_or_path) {
  if (auto preset = read_preset(name_or_path, "models")) return parse_model(preset->text, preset->origin);
  throw InputError(fmt::format("--model {}: unknown model (presets: {}; or a path to a model .json file)", name_or_path,
                               fmt::join(model_preset_names(), ", ")));
}

}  // namespace kareus::workload
