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

}  // namespace

double ModelSpec::layer_parameters() const {
  const double q_width = static_cast<double>(heads) * head_dim;
  const double kv_width = 2.0 * kv_groups * head_dim;
  const double attention = hidden * (q_width + kv_width) + q_width * hidden;
  const double mlp_weights = (mlp == MlpKind::kSwiGlu ? 3.0 : 2.0) * hidden * ffn;
  const double norms = 2.0 * hidden + (qk_norm ? 2.0 * head_dim : 0.0);
  return attention + mlp_weights + norms;
}

double ModelSpec::parameters() const {
  const double embeddings = static_cast<double>(vocab) * hidden * (tied_embeddings ? 1 : 2);
  return layers * layer_parameters() + embeddings + hidden;
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
  // Written only when set, so plans of models that leave them at their defaults keep their shape.
  if (model.norm_eps != kDefaultNormEps) shape["norm_eps"] = model.norm_eps;
  if (model.rotary_base != kDefaultRotaryBase) shape["rotary_base"] = model.rotary_base;
  return shape.dump();
}

std::vector<std::string> model_preset_names() { return embedded_names("models"); }

ModelSpec parse_model(std::string_view json_text, std::string_view origin) {
  const nlohmann::json document = parse_json(json_text, origin);
  jf::reject_unknown(document,
                     {"name", "hidden", "heads", "kv_groups", "head_dim", "ffn", "layers", "vocab", "qk_norm", "mlp",
                      "tied_embeddings", "norm_eps", "rotary_base", "source"},
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
  if (document.contains("norm_eps")) model.norm_eps = jf::require_positive(document, "norm_eps", origin);
  if (document.contains("rotary_base")) model.rotary_base = jf::require_positive(document, "rotary_base", origin);
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
