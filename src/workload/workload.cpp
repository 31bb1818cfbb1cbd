#include "kareus/workload/workload.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::workload {
namespace {

void require_in_range(int value, std::string_view flag, long long maximum) {
  if (value < 1) throw InputError(fmt::format("{} {} must be >= 1", flag, value));
  if (value > maximum) throw InputError(fmt::format("{} {} must be <= {}", flag, value, maximum));
}

/// A positive integer field that fits an int (make_workload checks the real range).
int positive_field(const nlohmann::json& document, std::string_view key, std::string_view origin) {
  const long long value = json_fields::require_positive_int(document, key, origin);
  if (value > (1LL << 30)) throw InputError(fmt::format("{}: field '{}' = {} is out of range", origin, key, value));
  return static_cast<int>(value);
}

/// The rules Megatron enforces for sequence parallelism and interleaving (arguments.py,
/// schedules.py, transformer_layer.py's layer offset), on a workload whose stages are resolved.
void check_megatron_features(const Workload& workload) {
  const Parallelism& p = workload.parallel;
  if (p.sequence_parallel) {
    if (p.tp < 2) throw InputError(fmt::format("--sequence-parallel needs --tp >= 2, found --tp {}", p.tp));
    // Each TP rank holds seq / (cp x tp) tokens of every sequence between the collectives.
    if ((p.seq / p.cp) % p.tp != 0) {
      throw InputError(
          fmt::format("--sequence-parallel needs --seq {} / --cp {} divisible by --tp {}", p.seq, p.cp, p.tp));
    }
  }
  if (p.vpp == 1) return;
  if (p.pp < 2) throw InputError(fmt::format("--vpp {} needs --pp >= 2 (interleaving splits pipeline stages)", p.vpp));
  // Megatron's default microbatch group is pp microbatches per chunk; a last group shorter than
  // pp is refused there, so the count must be a multiple of pp.
  if (p.microbatches % p.pp != 0) {
    throw InputError(fmt::format("--vpp {} needs --microbatches {} divisible by --pp {} (Megatron's microbatch groups)",
                                 p.vpp, p.microbatches, p.pp));
  }
  const std::vector<int>& layers = workload.stage_layers;
  for (std::size_t stage = 0; stage < layers.size(); ++stage) {
    if (layers[stage] % p.vpp != 0) {
      throw InputError(fmt::format("--vpp {} must divide every stage's layers; stage {} has {} (stages: {})", p.vpp,
                                   stage, layers[stage], fmt::join(layers, ",")));
    }
  }
  // Megatron's interleaved split lets only the first and the last stage differ from the others.
  for (std::size_t stage = 2; stage + 1 < layers.size(); ++stage) {
    if (layers[stage] != layers[1]) {
      throw InputError(
          fmt::format("--vpp {} needs the middle stages' layers equal (only the first and last may differ), found {}",
                      p.vpp, fmt::join(layers, ",")));
    }
  }
}

}  // namespace

int default_sequence(const ModelSpec& model) {
  // A learned table has no row past max_positions; RoPE has no such bound.
  if (model.position_embedding == PositionEmbedding::kLearned) return std::min(kDefaultSequence, model.max_positions);
  return kDefaultSequence;
}

Workload make_workload(ModelSpec model, Parallelism parallel) {
  const Parallelism& p = parallel;
  require_in_range(p.tp, "--tp", kMaxParallelDegree);
  require_in_range(p.cp, "--cp", kMaxParallelDegree);
  require_in_range(p.pp, "--pp", kMaxPipelineStages);
  require_in_range(p.dp, "--dp", kMaxParallelDegree);
  require_in_range(p.mbs, "--mbs", kMaxMicrobatchSize);
  require_in_range(p.seq, "--seq", kMaxSequence);
  require_in_range(p.microbatches, "--microbatches", kMaxMicrobatches);
  require_in_range(p.nanobatches, "--nanobatches", kMaxMicrobatchSize);
  require_in_range(p.vpp, "--vpp", kMaxPipelineStages);
  // Each degree fits an int; their product may not, so it is taken in 64 bits.
  if (const long long gpus = static_cast<long long>(p.tp) * p.cp * p.pp * p.dp; gpus > kMaxGpus) {
    throw InputError(fmt::format("--tp {} x --cp {} x --pp {} x --dp {} = {} GPUs exceeds the limit of {}", p.tp, p.cp,
                                 p.pp, p.dp, gpus, kMaxGpus));
  }
  const std::string& name = model.name;
  if (model.position_embedding == PositionEmbedding::kLearned && p.seq > model.max_positions) {
    throw InputError(fmt::format("--seq {} exceeds {}'s max_positions {} (learned position embeddings)", p.seq, name,
                                 model.max_positions));
  }
  if (model.heads % p.tp != 0) {
    throw InputError(fmt::format("--tp {} must divide the {} attention heads of {}", p.tp, model.heads, name));
  }
  if (model.kv_groups % p.tp != 0) {
    throw InputError(fmt::format("--tp {} must divide the {} key/value groups of {}", p.tp, model.kv_groups, name));
  }
  if (model.ffn % p.tp != 0) {
    throw InputError(fmt::format("--tp {} must divide the MLP width {} of {}", p.tp, model.ffn, name));
  }
  // Load-balanced causal CP gives every rank two chunks of the sequence.
  if (p.cp > 1 && p.seq % (2 * p.cp) != 0) {
    throw InputError(fmt::format("--cp {} needs --seq divisible by 2 x cp = {} (load-balanced causal chunks), found {}",
                                 p.cp, 2 * p.cp, p.seq));
  }
  if (p.nanobatches != 1 && p.nanobatches != 2) {
    throw InputError(fmt::format("--nanobatches {} must be 1 (no overlap) or 2 (partitioned overlap)", p.nanobatches));
  }
  if (p.mbs == 1 && p.nanobatches == 2) {
    // Token nanobatches: each half of the sequence is a nanobatch, and with SP each half of a
    // rank's CP shard is split over TP again.
    const int tokens_per_rank = p.seq / p.cp;
    const int split = 2 * (p.sequence_parallel ? p.tp : 1);
    if (p.seq % p.cp != 0 || tokens_per_rank % split != 0) {
      throw InputError(fmt::format(
          "--mbs 1 with --nanobatches 2 splits each sequence into two token nanobatches: --seq {} / --cp {} must "
          "be divisible by {}{}",
          p.seq, p.cp, split, p.sequence_parallel ? " (2 halves x --tp, sequence parallel)" : " (2 halves)"));
    }
  } else if (p.mbs % p.nanobatches != 0) {
    throw InputError(fmt::format("--mbs {} must split evenly into {} nanobatches", p.mbs, p.nanobatches));
  }
  if (p.pp > model.layers) {
    throw InputError(fmt::format("--pp {} must not exceed the {} layers of {}", p.pp, model.layers, name));
  }
  Workload workload{std::move(model), std::move(parallel), {}};
  const Parallelism& resolved = workload.parallel;
  const int layers = workload.model.layers;
  if (resolved.layers_per_stage.empty()) {
    for (int stage = 0; stage < resolved.pp; ++stage) {
      workload.stage_layers.push_back(layers / resolved.pp + (stage < layers % resolved.pp ? 1 : 0));
    }
  } else {
    const auto& split = resolved.layers_per_stage;
    const long long total = std::accumulate(split.begin(), split.end(), 0LL);  // no int overflow on hostile input
    if (static_cast<int>(split.size()) != resolved.pp || total != layers) {
      throw InputError(fmt::format("--layers-per-stage {} must list --pp {} stages summing to the {} layers of {}",
                                   fmt::join(split, ","), resolved.pp, layers, workload.model.name));
    }
    for (int count : split) {
      if (count < 1)
        throw InputError(fmt::format("--layers-per-stage {}: every stage needs >= 1 layer", fmt::join(split, ",")));
    }
    workload.stage_layers = split;
  }
  check_megatron_features(workload);
  return workload;
}

int Workload::chunk_first_layer(int stage, int chunk) const {
  int first = chunk * (model.layers / parallel.vpp);
  for (int earlier = 0; earlier < stage; ++earlier) first += chunk_layers(earlier);
  return first;
}

Workload chunk_stages(const Workload& workload) {
  const Parallelism& p = workload.parallel;
  if (p.vpp == 1) return workload;
  Workload chunks = workload;
  chunks.parallel.pp = p.pp * p.vpp;
  chunks.parallel.vpp = 1;
  chunks.stage_layers.assign(static_cast<std::size_t>(chunks.parallel.pp), 0);
  for (int stage = 0; stage < p.pp; ++stage) {
    for (int chunk = 0; chunk < p.vpp; ++chunk) {
      chunks.stage_layers[workload.virtual_stage(stage, chunk)] = workload.chunk_layers(stage);
    }
  }
  chunks.parallel.layers_per_stage = chunks.stage_layers;
  return chunks;
}

std::string workload_to_json(const Workload& workload) {
  const ModelSpec& model = workload.model;
  const Parallelism& p = workload.parallel;
  nlohmann::ordered_json document = {
      {"model", model.name},
      {"shape", nlohmann::ordered_json::parse(model_shape_json(model))},
      {"tp", p.tp},
      {"cp", p.cp},
      {"pp", p.pp},
      {"dp", p.dp},
      {"mbs", p.mbs},
      {"seq", p.seq},
      {"microbatches", p.microbatches},
      {"nanobatches", p.nanobatches},
      {"recompute", p.recompute == Recompute::kFull ? "full" : "none"},
      {"layers_per_stage", workload.stage_layers},
      {"sequence_parallel", p.sequence_parallel},
      {"vpp", p.vpp},
  };
  return document.dump();
}

Workload workload_from_json(std::string_view json_text, std::string_view origin_view) {
  namespace jf = json_fields;
  const std::string origin(origin_view);
  const nlohmann::json document = parse_json(json_text, origin);
  const nlohmann::json& shape = jf::require(document, "shape", origin);
  if (!shape.is_object()) throw InputError(fmt::format("{}: field 'shape' must be an object", origin));
  nlohmann::json model = shape;
  model["name"] = jf::require_string(document, "model", origin);
  Parallelism p;
  p.tp = positive_field(document, "tp", origin);
  p.cp = positive_field(document, "cp", origin);
  p.pp = positive_field(document, "pp", origin);
  p.dp = positive_field(document, "dp", origin);
  p.mbs = positive_field(document, "mbs", origin);
  p.seq = positive_field(document, "seq", origin);
  p.microbatches = positive_field(document, "microbatches", origin);
  p.nanobatches = positive_field(document, "nanobatches", origin);
  const std::string recompute = jf::require_string(document, "recompute", origin);
  if (recompute != "full" && recompute != "none") {
    throw InputError(fmt::format("{}: field 'recompute' must be \"full\" or \"none\", found \"{}\"", origin,
                                 jf::short_text(recompute)));
  }
  p.recompute = recompute == "full" ? Recompute::kFull : Recompute::kNone;
  const nlohmann::json& split = jf::require(document, "layers_per_stage", origin);
  if (!split.is_array() || split.size() > static_cast<std::size_t>(kMaxPipelineStages)) {
    throw InputError(
        fmt::format("{}: field 'layers_per_stage' must be an array of at most {} stages", origin, kMaxPipelineStages));
  }
  for (const nlohmann::json& layers : split) {
    p.layers_per_stage.push_back(positive_field({{"layers_per_stage", layers}}, "layers_per_stage", origin));
  }
  // Blocks written before sequence parallelism and interleaving existed are for neither.
  if (const auto found = document.find("sequence_parallel"); found != document.end()) {
    if (!found->is_boolean())
      throw InputError(fmt::format("{}: field 'sequence_parallel' must be true or false", origin));
    p.sequence_parallel = found->get<bool>();
  }
  if (document.contains("vpp")) p.vpp = positive_field(document, "vpp", origin);
  ModelSpec spec = parse_model(model.dump(), origin + ".shape");
  try {
    return make_workload(std::move(spec), std::move(p));
  } catch (const InputError& error) {
    // The rule names the flag the field stands for; the file is named in front of it.
    throw InputError(fmt::format("{}: {}", origin, error.what()));
  }
}

}  // namespace kareus::workload
