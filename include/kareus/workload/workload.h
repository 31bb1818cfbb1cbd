// kareus/workload/workload.h - a model under a parallelism: the unit every later stage plans for.
//
// Parallelism follows Megatron: TP shards heads and the MLP, CP shards the sequence
// (load-balanced causal), PP splits layers into stages, DP replicates. Each microbatch is
// cut into `nanobatches` halves along the batch dimension for overlap (docs/kareus.md
// section 2). make_workload validates every rule and names the flag that breaks it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kareus/workload/model.h"

namespace kareus::workload {

enum class Recompute { kFull, kNone };

/// How a pipeline instruction runs: every op of the microbatch in sequence with collectives
/// blocking compute (Megatron), or cut into nanobatches whose collectives overlap compute.
enum class OverlapMode { kNone, kNanobatch };

/// "none" / "nanobatch".
[[nodiscard]] std::string_view to_string(OverlapMode overlap);
/// Parses "none" / "nanobatch"; throws InputError naming `origin`.
[[nodiscard]] OverlapMode parse_overlap_mode(std::string_view text, std::string_view origin = "--overlap");

/// What make_workload accepts (docs/limits.md): every size flag and JSON integer has a range, and
/// the GPU count tp x cp x pp x dp is checked in 64 bits before anything multiplies ints.
inline constexpr int kMaxParallelDegree = 65536;  ///< tp, cp, dp each
inline constexpr int kMaxPipelineStages = 1024;   ///< pp
inline constexpr long long kMaxGpus = 1 << 20;    ///< tp x cp x pp x dp
inline constexpr int kMaxMicrobatchSize = 65536;  ///< mbs, sequences
inline constexpr int kMaxSequence = 1 << 24;      ///< seq, tokens
inline constexpr int kMaxMicrobatches = 4096;     ///< microbatches per iteration

/// The sequence length (tokens) of a workload that names none: the artifact's 4096
/// (docs/kareus.md section 7), or the model's max_positions when a learned position table has
/// fewer rows (GPT-3: 2048). The one rule the CLI, the Python binding and Parallelism{} share.
inline constexpr int kDefaultSequence = 4096;
[[nodiscard]] int default_sequence(const ModelSpec& model);

struct Parallelism {
  int tp = 8;
  int cp = 1;
  int pp = 2;
  int dp = 1;
  int mbs = 8;                 ///< microbatch size (sequences)
  int seq = kDefaultSequence;  ///< tokens; default_sequence(model) is the default for a given model
  int microbatches = 8;
  int nanobatches = 2;
  Recompute recompute = Recompute::kFull;
  std::vector<int> layers_per_stage{};  ///< empty = even split (earlier stages take the remainder)
  /// Megatron's sequence parallelism: norms, residual adds and dropout run on 1/tp of the
  /// tokens, and each TP all-reduce becomes an all-gather before and a reduce-scatter after.
  bool sequence_parallel = false;
  /// Virtual pipeline stages (model chunks) per rank: 1 = 1F1B, more = Megatron's interleaved
  /// 1F1B, where chunk c of stage s holds the (c x pp + s)-th block of layers.
  int vpp = 1;
};

struct Workload {
  ModelSpec model;
  Parallelism parallel;
  std::vector<int> stage_layers;  ///< resolved layers per stage, size pp

  [[nodiscard]] int gpus() const { return parallel.tp * parallel.cp * parallel.pp * parallel.dp; }
  /// GPUs that run one pipeline stage (TP x CP x DP).
  [[nodiscard]] int gpus_per_stage() const { return parallel.tp * parallel.cp * parallel.dp; }
  /// Layers in one model chunk of `stage` (stage_layers / vpp; make_workload checks it divides).
  [[nodiscard]] int chunk_layers(int stage) const { return stage_layers[stage] / parallel.vpp; }
  /// The model's index (0-based) of the first layer of chunk `chunk` of `stage`: Megatron's
  /// offset, chunk x (layers / vpp) plus the earlier stages' chunk sizes.
  [[nodiscard]] int chunk_first_layer(int stage, int chunk) const;
  /// The pipeline position of chunk `chunk` of `stage` among all pp x vpp chunks (Megatron's
  /// virtual stage): activations flow from virtual stage v to v + 1.
  [[nodiscard]] int virtual_stage(int stage, int chunk) const { return chunk * parallel.pp + stage; }
  /// Whether the nanobatches split each microbatch's tokens rather than its sequences: a
  /// one-sequence microbatch (--mbs 1) in two nanobatches, each one half of the sequence.
  [[nodiscard]] bool token_nanobatches() const { return parallel.mbs < parallel.nanobatches; }
  /// Sequences in one nanobatch; 0.5 for token nanobatches. The cost model prices each token
  /// nanobatch as the mean of the two halves: exact for every linear op and, summed over both,
  /// for causal attention (the second half's queries see three times the keys of the first's).
  [[nodiscard]] double nanobatch_sequences() const { return static_cast<double>(parallel.mbs) / parallel.nanobatches; }
  /// Tokens one GPU processes in one nanobatch (its CP shard of the sequence).
  [[nodiscard]] double nanobatch_tokens_per_gpu() const { return nanobatch_sequences() * parallel.seq / parallel.cp; }
};

/// Validates `parallel` against `model` and resolves the stage split. Throws InputError
/// whose message names the flag and the rule, e.g.
/// "--tp 6 must divide the 24 attention heads of llama3.2-3b", or
/// "--seq 4096 exceeds gpt3-175b's max_positions 2048 (learned position embeddings)".
[[nodiscard]] Workload make_workload(ModelSpec model, Parallelism parallel);

/// Every model chunk as a stage of its own: pp x vpp stages and vpp 1, stage virtual_stage(s, c)
/// holding chunk c of stage s's layers. What one instruction of a chunk runs is what that stage
/// runs: the embedding on the first chunk (chunk 0 of stage 0), the final norm, output layer and
/// loss on the last (chunk vpp - 1 of the last stage), and a P2P send to the neighbouring chunk,
/// also between the last stage's chunk c and stage 0's chunk c + 1. With vpp 1 it is `workload`.
/// Per-rank quantities (the DP gradient reduction) stay with `workload` itself.
[[nodiscard]] Workload chunk_stages(const Workload& workload);

/// The workload as a JSON object (model name and shape, parallelism), for summaries and plans.
[[nodiscard]] std::string workload_to_json(const Workload& workload);

/// The inverse of workload_to_json: the workload a JSON object names ("model", "shape" as
/// model_shape_json, the parallel fields), validated by make_workload. Other keys are ignored.
/// Throws InputError naming `origin` and the missing or wrong field.
[[nodiscard]] Workload workload_from_json(std::string_view json_text, std::string_view origin);

}  // namespace kareus::workload
