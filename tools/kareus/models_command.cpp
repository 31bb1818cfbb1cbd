// kareus models: the built-in model presets and their shapes.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "kareus/workload/model.h"
#include "listing_command.h"

namespace kareus::cli {
namespace {

void print_models(bool json) {
  nlohmann::ordered_json models = nlohmann::ordered_json::array();
  if (!json) {
    fmt::print("{:<14} {:>6} {:>6} {:>10} {:>9} {:>6} {:>7} {:>7} {:>8}  {}\n", "name", "hidden", "heads", "kv_groups",
               "head_dim", "ffn", "layers", "vocab", "params", "notes");
  }
  for (const std::string& name : workload::model_preset_names()) {
    const workload::ModelSpec model = workload::load_model(name);
    const char* mlp = model.mlp == workload::MlpKind::kSwiGlu ? "swiglu" : "gelu";
    if (json) {
      nlohmann::ordered_json entry = {{"name", model.name}};
      entry.update(nlohmann::ordered_json::parse(workload::model_shape_json(model)));
      entry["parameters"] = static_cast<long long>(model.parameters());
      models.push_back(std::move(entry));
      continue;
    }
    std::string notes = mlp;
    if (model.qk_norm) notes += ", qk-norm";
    if (model.tied_embeddings) notes += ", tied embeddings";
    fmt::print("{:<14} {:>6} {:>6} {:>10} {:>9} {:>6} {:>7} {:>7} {:>7.2f}B  {}\n", model.name, model.hidden,
               model.heads, model.kv_groups, model.head_dim, model.ffn, model.layers, model.vocab,
               model.parameters() / 1e9, notes);
  }
  if (json) fmt::print("{}\n", nlohmann::ordered_json{{"models", models}}.dump(2));
}

}  // namespace

void add_models_command(CLI::App& app) {
  add_listing_command(app, "models", "list the model presets and their shapes", print_models);
}

}  // namespace kareus::cli
