#include "kareus/workload/op_graph.h"

#include <algorithm>

#include "kareus/common/error.h"

namespace kareus::workload {
namespace {

constexpr double kBf16Bytes = 2;

struct Shapes {
  double tokens;           // tokens of one nanobatch on one GPU (its CP shard)
  double sequence_tokens;  // tokens the norms and residual adds see: tokens / TP with SP
  double batch;            // sequences in one nanobatch (0.5 for a token nanobatch)
  double seq_full;         // full sequence (keys/values after the CP all-gather)
  double hidden;
  double q_width;      // query heads x head_dim on one TP rank
  double kv_width;     // key/value heads x head_dim on one TP rank (K or V alone)
  double heads_local;  // query heads on one TP rank
  double ffn_local;    // MLP width on one TP rank
  double fc1_out;      // FC1 outputs on one TP rank (2 x ffn for SwiGLU)
};

Shapes shapes_of(const Workload& workload) {
  const ModelSpec& model = workload.model;
  const Parallelism& p = workload.parallel;
  Shapes s{};
  s.batch = workload.nanobatch_sequences();
  s.tokens = workload.nanobatch_tokens_per_gpu();
  s.sequence_tokens = p.sequence_parallel ? s.tokens / p.tp : s.tokens;
  s.seq_full = p.seq;
  s.hidden = model.hidden;
  s.heads_local = static_cast<double>(model.heads) / p.tp;
  s.q_width = s.heads_local * model.head_dim;
  s.kv_width = static_cast<double>(model.kv_groups) / p.tp * model.head_dim;
  s.ffn_local = static_cast<double>(model.ffn) / p.tp;
  s.fc1_out = (model.mlp == MlpKind::kSwiGlu ? 2 : 1) * s.ffn_local;
  return s;
}

Op new_op(std::string name, OpKind kind, OpRole role) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.role = role;
  return op;
}

Op gemm(std::string name, OpRole role, double m, double n, double k) {
  Op op = new_op(std::move(name), OpKind::kGemm, role);
  op.flops = 2 * m * n * k;
  op.bytes_read = (m * k + k * n) * kBf16Bytes;
  op.bytes_written = m * n * kBf16Bytes;
  op.gemm = {m, n, k};
  return op;
}

/// A memory-bound op over `elements` outputs reading `inputs` tensors of that size.
Op memory_op(std::string name, OpKind kind, OpRole role, double elements, double inputs, double flops_per_element) {
  Op op = new_op(std::move(name), kind, role);
  op.flops = elements * flops_per_element;
  op.bytes_read = elements * inputs * kBf16Bytes;
  op.bytes_written = elements * kBf16Bytes;
  return op;
}

// A norm's work per element. RMSNorm: square and accumulate (2), scale by the reciprocal root
// (1), times the weight (1). LayerNorm does more: accumulate the mean (1), subtract it (1), add
// the bias (1).
constexpr double kRmsNormFlopsPerElement = 4;
constexpr double kLayerNormMoreFlopsPerElement = 3;
// LayerNorm keeps each row's mean for its backward, in fp32 (RMSNorm keeps only the reciprocal
// root, as LayerNorm also does: not counted in either).
constexpr double kFp32Bytes = 4;

/// A norm of the model's kind over `rows` vectors of `width` elements; `norms` distinct norms
/// (learned vectors) take part (2 for the q and k norms). LayerNorm reads its biases (`norms` x
/// `width`) and writes each row's mean more than RMSNorm; backward_of then reads the means and
/// writes the biases' gradients.
Op norm_op(std::string name, OpRole role, NormKind norm, double rows, double width, double norms) {
  const double elements = rows * width;
  Op op = memory_op(std::move(name), OpKind::kNorm, role, elements, 1, kRmsNormFlopsPerElement);
  if (norm == NormKind::kLayerNorm) {
    op.flops += elements * kLayerNormMoreFlopsPerElement;
    op.bytes_read += norms * width * kBf16Bytes;
    op.bytes_written += rows * kFp32Bytes;
  }
  return op;
}

Op collective(std::string name, OpRole role, CollectiveKind kind, CommGroup group, int group_size, double bytes) {
  Op op = new_op(std::move(name), OpKind::kCollective, role);
  op.collective = Collective{kind, group, group_size, bytes};
  // An all-reduce reads its input and writes its output once in HBM; the link traffic is
  // the device model's business.
  op.bytes_read = bytes;
  op.bytes_written = bytes;
  return op;
}

/// The backward of a compute op: twice the FLOPs (input and weight gradients), reading
/// the output gradient and the saved input, writing the input gradient.
Op backward_of(const Op& forward) {
  Op op = forward;
  op.name += "_bwd";
  op.direction = Direction::kBackward;
  op.flops = 2 * forward.flops;
  op.bytes_read = forward.bytes_read + forward.bytes_written;
  op.bytes_written = forward.bytes_read;
  return op;
}

}  // namespace

bool Op::is_memory_bound() const {
  return kind == OpKind::kNorm || kind == OpKind::kRope || kind == OpKind::kActivation || kind == OpKind::kElementwise;
}

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kGemm:
      return "gemm";
    case OpKind::kAttention:
      return "attention";
    case OpKind::kNorm:
      return "norm";
    case OpKind::kRope:
      return "rope";
    case OpKind::kActivation:
      return "activation";
    case OpKind::kElementwise:
      return "elementwise";
    case OpKind::kEmbedding:
      return "embedding";
    case OpKind::kLoss:
      return "loss";
    case OpKind::kCollective:
      return "collective";
  }
  return "?";
}

std::string_view to_string(CommGroup group) {
  switch (group) {
    case CommGroup::kTp:
      return "tp";
    case CommGroup::kCp:
      return "cp";
    case CommGroup::kDp:
      return "dp";
    case CommGroup::kPp:
      return "pp";
  }
  return "?";
}

std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kSendRecv:
      return "send_recv";
  }
  return "?";
}

std::string_view short_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "ar";
    case CollectiveKind::kAllGather:
      return "ag";
    case CollectiveKind::kReduceScatter:
      return "rs";
    case CollectiveKind::kSendRecv:
      return "p2p";
  }
  return "?";
}

LayerGraph build_layer_graph(const Workload& workload) {
  const Shapes s = shapes_of(workload);
  const ModelSpec& model = workload.model;
  const int tp = workload.parallel.tp;
  const int cp = workload.parallel.cp;
  const bool sp = workload.parallel.sequence_parallel;
  const double activation_bytes = s.tokens * s.hidden * kBf16Bytes;
  // K and V of every CP rank: what the all-gather outputs and the reduce-scatter reduces.
  const double kv_gathered_bytes = 2 * s.batch * s.seq_full * s.kv_width * kBf16Bytes;
  auto tp_collective = [&](std::string name, OpRole role, CollectiveKind kind) {
    return collective(std::move(name), role, kind, CommGroup::kTp, tp, activation_bytes);
  };

  LayerGraph graph;
  std::vector<Op>& fwd = graph.forward;
  fwd.push_back(norm_op("input_norm", OpRole::kInputNorm, model.norm, s.sequence_tokens, s.hidden, 1));
  if (sp) fwd.push_back(tp_collective("attn_all_gather", OpRole::kQkvInputGather, CollectiveKind::kAllGather));
  fwd.push_back(gemm("qkv", OpRole::kQkv, s.tokens, s.q_width + 2 * s.kv_width, s.hidden));
  if (model.qk_norm) {
    // Every query and key head of every token, normalized over head_dim by the q or the k norm.
    const double heads = s.heads_local + static_cast<double>(model.kv_groups) / tp;
    fwd.push_back(norm_op("qkv_post", OpRole::kQkvPost, model.norm, s.tokens * heads, model.head_dim, 2));
  }
  if (model.position_embedding == PositionEmbedding::kRope) {
    fwd.push_back(memory_op("rope", OpKind::kRope, OpRole::kRope, s.tokens * (s.q_width + s.kv_width), 1, 3));
  }
  if (cp > 1) {
    fwd.push_back(collective("kv_all_gather", OpRole::kKvGather, CollectiveKind::kAllGather, CommGroup::kCp, cp,
                             kv_gathered_bytes));
  }
  {
    // Causal attention of this rank's queries against all keys: half the score matrix.
    Op attention = new_op("attention", OpKind::kAttention, OpRole::kAttention);
    attention.flops = 4 * s.batch * (s.seq_full / cp) * s.seq_full * model.head_dim * s.heads_local / 2;
    attention.bytes_read = (s.tokens * s.q_width + 2 * s.batch * s.seq_full * s.kv_width) * kBf16Bytes;
    attention.bytes_written = s.tokens * s.q_width * kBf16Bytes;
    // Ring attention computes against one rank's K/V per step (its backward and recompute too).
    if (cp > 1) attention.ring_steps = cp;
    fwd.push_back(attention);
  }
  fwd.push_back(gemm("out_proj", OpRole::kOutProj, s.tokens, s.hidden, s.q_width));
  if (sp) {
    fwd.push_back(tp_collective("attn_reduce_scatter", OpRole::kAttnReduce, CollectiveKind::kReduceScatter));
  } else if (tp > 1) {
    fwd.push_back(tp_collective("attn_all_reduce", OpRole::kAttnReduce, CollectiveKind::kAllReduce));
  }
  fwd.push_back(memory_op("attn_bda", OpKind::kElementwise, OpRole::kAttnBda, s.sequence_tokens * s.hidden, 2, 1));
  fwd.push_back(norm_op("mlp_norm", OpRole::kMlpNorm, model.norm, s.sequence_tokens, s.hidden, 1));
  if (sp) fwd.push_back(tp_collective("mlp_all_gather", OpRole::kFc1InputGather, CollectiveKind::kAllGather));
  fwd.push_back(gemm("fc1", OpRole::kFc1, s.tokens, s.fc1_out, s.hidden));
  if (model.mlp == MlpKind::kSwiGlu) {
    fwd.push_back(memory_op("swiglu", OpKind::kActivation, OpRole::kActivation, s.tokens * s.ffn_local, 2, 5));
  } else {
    fwd.push_back(memory_op("gelu", OpKind::kActivation, OpRole::kActivation, s.tokens * s.ffn_local, 1, 8));
  }
  fwd.push_back(gemm("fc2", OpRole::kFc2, s.tokens, s.hidden, s.ffn_local));
  if (sp) {
    fwd.push_back(tp_collective("mlp_reduce_scatter", OpRole::kMlpReduce, CollectiveKind::kReduceScatter));
  } else if (tp > 1) {
    fwd.push_back(tp_collective("mlp_all_reduce", OpRole::kMlpReduce, CollectiveKind::kAllReduce));
  }
  fwd.push_back(memory_op("mlp_bda", OpKind::kElementwise, OpRole::kMlpBda, s.sequence_tokens * s.hidden, 2, 1));

  // Backward: reverse order. Without SP the forward's row-parallel all-reduces need nothing in
  // backward and column-parallel linears (QKV, FC1) all-reduce their input gradient over TP.
  // With SP (header comment) a forward reduce-scatter becomes an all-gather of the gradient, a
  // column-parallel linear re-gathers its input before its backward, and the forward's
  // all-gather becomes the reduce-scatter of the input gradient after it.
  std::vector<Op>& bwd = graph.backward;
  for (auto op = fwd.rbegin(); op != fwd.rend(); ++op) {
    if (op->is_collective()) {
      if (!sp || op->collective->group != CommGroup::kTp) continue;
      switch (op->role) {
        case OpRole::kMlpReduce:
          bwd.push_back(tp_collective("mlp_grad_all_gather", OpRole::kMlpGradGather, CollectiveKind::kAllGather));
          break;
        case OpRole::kAttnReduce:
          bwd.push_back(tp_collective("attn_grad_all_gather", OpRole::kAttnGradGather, CollectiveKind::kAllGather));
          break;
        case OpRole::kFc1InputGather:
          bwd.push_back(
              tp_collective("fc1_grad_reduce_scatter", OpRole::kFc1GradReduce, CollectiveKind::kReduceScatter));
          break;
        default:  // kQkvInputGather
          bwd.push_back(
              tp_collective("qkv_grad_reduce_scatter", OpRole::kQkvGradReduce, CollectiveKind::kReduceScatter));
          break;
      }
      continue;
    }
    const bool column_parallel = op->role == OpRole::kFc1 || op->role == OpRole::kQkv;
    const bool is_fc1 = op->role == OpRole::kFc1;
    if (sp && column_parallel) {
      bwd.push_back(tp_collective(is_fc1 ? "fc1_input_all_gather" : "qkv_input_all_gather",
                                  is_fc1 ? OpRole::kFc1InputGather : OpRole::kQkvInputGather,
                                  CollectiveKind::kAllGather));
    }
    if (op->role == OpRole::kAttention && cp > 1) {
      bwd.push_back(collective("kv_regather", OpRole::kKvGather, CollectiveKind::kAllGather, CommGroup::kCp, cp,
                               kv_gathered_bytes));
    }
    bwd.push_back(backward_of(*op));
    if (op->role == OpRole::kAttention && cp > 1) {
      bwd.push_back(collective("dkv_reduce_scatter", OpRole::kDkvScatter, CollectiveKind::kReduceScatter,
                               CommGroup::kCp, cp, kv_gathered_bytes));
    }
    if (!sp && tp > 1 && column_parallel) {
      bwd.push_back(tp_collective(is_fc1 ? "fc1_grad_all_reduce" : "qkv_grad_all_reduce",
                                  is_fc1 ? OpRole::kFc1GradReduce : OpRole::kQkvGradReduce,
                                  CollectiveKind::kAllReduce));
    }
  }
  for (Op& op : bwd) op.direction = Direction::kBackward;
  return graph;
}

NonpartitionWork build_nonpartition_work(const Workload& workload, int stage) {
  const Shapes s = shapes_of(workload);
  const int tp = workload.parallel.tp;
  const int stages = workload.parallel.pp;
  const bool sp = workload.parallel.sequence_parallel;
  const double activation_bytes = s.tokens * s.hidden * kBf16Bytes;
  // What crosses a stage boundary: with SP the residual stream is this rank's shard of the sequence.
  const double boundary_bytes = s.sequence_tokens * s.hidden * kBf16Bytes;
  const double vocab_local = static_cast<double>(workload.model.vocab) / tp;
  auto tp_collective = [&](std::string name, OpRole role, CollectiveKind kind) {
    return collective(std::move(name), role, kind, CommGroup::kTp, tp, activation_bytes);
  };
  NonpartitionWork work;
  std::vector<Op> embedding_backward_ops;
  if (stage == 0) {
    // A learned position table is one more row per token, read and summed with the token's row.
    const double tables = workload.model.position_embedding == PositionEmbedding::kLearned ? 2 : 1;
    Op embedding = new_op("embedding", OpKind::kEmbedding, OpRole::kEmbedding);
    embedding.bytes_read = tables * activation_bytes;
    embedding.bytes_written = activation_bytes;
    work.forward.push_back(embedding);
    // Vocab-parallel embedding: each rank holds part of the table, the rows are summed (with
    // SP reduce-scattered over the sequence, whose backward all-gathers the rows' gradients).
    if (sp) {
      work.forward.push_back(
          tp_collective("embedding_reduce_scatter", OpRole::kEmbeddingReduce, CollectiveKind::kReduceScatter));
      embedding_backward_ops.push_back(
          tp_collective("embedding_grad_all_gather", OpRole::kEmbeddingReduce, CollectiveKind::kAllGather));
    } else if (tp > 1) {
      work.forward.push_back(
          tp_collective("embedding_all_reduce", OpRole::kEmbeddingReduce, CollectiveKind::kAllReduce));
    }
    Op embedding_backward = backward_of(embedding);
    embedding_backward.bytes_written = tables * activation_bytes;  // the rows' gradients, per table
    embedding_backward_ops.push_back(embedding_backward);
  }
  if (stage == stages - 1) {
    const Op final_norm =
        norm_op("final_norm", OpRole::kFinalNorm, workload.model.norm, s.sequence_tokens, s.hidden, 1);
    const Op output = gemm("output_layer", OpRole::kOutputLayer, s.tokens, vocab_local, s.hidden);
    // Vocab-parallel cross entropy: a few passes over this rank's logits, plus tiny all-reduces.
    Op loss = memory_op("cross_entropy", OpKind::kLoss, OpRole::kLoss, s.tokens * vocab_local, 2, 6);
    // Append: with one stage (pp == 1) the embedding ops pushed above come first.
    work.forward.push_back(final_norm);
    // The output layer is column-parallel: with SP it gathers the normed sequence first.
    if (sp) {
      work.forward.push_back(tp_collective("output_all_gather", OpRole::kOutputReduce, CollectiveKind::kAllGather));
    }
    work.forward.insert(work.forward.end(), {output, loss});
    if (tp > 1) {
      work.forward.push_back(collective("loss_all_reduce", OpRole::kLoss, CollectiveKind::kAllReduce, CommGroup::kTp,
                                        tp, 3 * s.tokens * 4));
    }
    // Backward runs head first, so with one stage these go before the embedding's backward.
    std::vector<Op> head_backward = {backward_of(loss)};
    if (sp) {
      head_backward.push_back(
          tp_collective("output_input_all_gather", OpRole::kOutputReduce, CollectiveKind::kAllGather));
    }
    head_backward.push_back(backward_of(output));
    if (sp) {
      head_backward.push_back(
          tp_collective("output_grad_reduce_scatter", OpRole::kOutputReduce, CollectiveKind::kReduceScatter));
    } else if (tp > 1) {
      head_backward.push_back(
          tp_collective("output_grad_all_reduce", OpRole::kOutputReduce, CollectiveKind::kAllReduce));
    }
    head_backward.push_back(backward_of(final_norm));
    work.backward.insert(work.backward.end(), head_backward.begin(), head_backward.end());
  }
  work.backward.insert(work.backward.end(), embedding_backward_ops.begin(), embedding_backward_ops.end());
  if (stage + 1 < stages) {
    work.forward.push_back(collective("send_activations", OpRole::kPipelineSend, CollectiveKind::kSendRecv,
                                      CommGroup::kPp, 2, boundary_bytes));
  }
  if (stage > 0) {
    work.backward.push_back(collective("send_gradients", OpRole::kPipelineSend, CollectiveKind::kSendRecv,
                                       CommGroup::kPp, 2, boundary_bytes));
  }
  for (Op& op : work.backward) op.direction = Direction::kBackward;
  return work;
}

std::optional<Op> gradient_reduction(const Workload& workload, int stage) {
  const int dp = workload.parallel.dp;
  if (dp == 1) return std::nullopt;
  const ModelSpec& model = workload.model;
  double parameters = workload.stage_layers[stage] * model.layer_parameters();
  if (stage == 0 || stage == workload.parallel.pp - 1) parameters += static_cast<double>(model.vocab) * model.hidden;
  // The learned position table is whole on every TP rank (not vocab-parallel, as in Megatron).
  const double local_parameters = parameters / workload.parallel.tp + (stage == 0 ? model.position_parameters() : 0);
  return collective("gradient_all_reduce", OpRole::kGradientReduce, CollectiveKind::kAllReduce, CommGroup::kDp, dp,
                    local_parameters * kBf16Bytes);
}

double iteration_flops(const Workload& workload) {
  const LayerGraph graph = build_layer_graph(workload);
  auto sum = [](const std::vector<Op>& ops) {
    double flops = 0;
    for (const Op& op : ops) flops += op.flops;
    return flops;
  };
  const double recompute = workload.parallel.recompute == Recompute::kFull ? 1 : 0;
  const double layer_flops = (1 + recompute) * sum(graph.forward) + sum(graph.backward);
  double per_nanobatch = 0;
  for (int stage = 0; stage < workload.parallel.pp; ++stage) {
    const NonpartitionWork work = build_nonpartition_work(workload, stage);
    per_nanobatch += workload.stage_layers[stage] * layer_flops + sum(work.forward) + sum(work.backward);
  }
  const Parallelism& p = workload.parallel;
  return per_nanobatch * p.nanobatches * p.microbatches * p.tp * p.cp * p.dp;
}

}  // namespace kareus::workload
