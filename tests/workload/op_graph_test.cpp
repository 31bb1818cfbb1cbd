#include "kareus/workload/op_graph.h"

#include <string>

#include <gtest/gtest.h>

namespace kareus::workload {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Workload make(const std::string& model, int cp, int tp, int mbs = 8, int seq = 4096) {
  Parallelism parallel;
  parallel.cp = cp;
  parallel.tp = tp;
  parallel.mbs = mbs;
  parallel.seq = seq;
  return make_workload(load_model(model), parallel);
}

std::vector<std::string> names(const std::vector<Op>& ops) {
  std::vector<std::string> result;
  for (const Op& op : ops) result.push_back(op.name);
  return result;
}

const Op& find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (op.name == name) return op;
  }
  throw std::runtime_error("no op " + name);
}

TEST(LayerGraph, ForwardOrderFollowsMegatron) {
  EXPECT_EQ(names(build_layer_graph(make("llama3.2-3b", 1, 8)).forward),
            (std::vector<std::string>{"input_norm", "qkv", "rope", "attention", "out_proj", "attn_all_reduce",
                                      "attn_bda", "mlp_norm", "fc1", "swiglu", "fc2", "mlp_all_reduce", "mlp_bda"}));
  // Qwen3's q/k RMSNorm sits between QKV and RoPE; CP gathers K,V right before attention.
  EXPECT_EQ(names(build_layer_graph(make("qwen3-1.7b", 2, 4)).forward),
            (std::vector<std::string>{"input_norm", "qkv", "qkv_post", "rope", "kv_all_gather", "attention", "out_proj",
                                      "attn_all_reduce", "attn_bda", "mlp_norm", "fc1", "swiglu", "fc2",
                                      "mlp_all_reduce", "mlp_bda"}));
}

TEST(LayerGraph, BackwardReversesWithColumnParallelGradReduces) {
  EXPECT_EQ(names(build_layer_graph(make("llama3.2-3b", 1, 8)).backward),
            (std::vector<std::string>{"mlp_bda_bwd", "fc2_bwd", "swiglu_bwd", "fc1_bwd", "fc1_grad_all_reduce",
                                      "mlp_norm_bwd", "attn_bda_bwd", "out_proj_bwd", "attention_bwd", "rope_bwd",
                                      "qkv_bwd", "qkv_grad_all_reduce", "input_norm_bwd"}));
  // With CP, attention backward re-gathers K,V before and reduce-scatters dK,dV after.
  EXPECT_EQ(
      names(build_layer_graph(make("llama3.2-3b", 2, 4)).backward),
      (std::vector<std::string>{"mlp_bda_bwd", "fc2_bwd", "swiglu_bwd", "fc1_bwd", "fc1_grad_all_reduce",
                                "mlp_norm_bwd", "attn_bda_bwd", "out_proj_bwd", "kv_regather", "attention_bwd",
                                "dkv_reduce_scatter", "rope_bwd", "qkv_bwd", "qkv_grad_all_reduce", "input_norm_bwd"}));
  for (const Op& op : build_layer_graph(make("llama3.2-3b", 2, 4)).backward) {
    SCOPED_TRACE(op.name);
    EXPECT_EQ(op.direction, Direction::kBackward);
  }
}

TEST(LayerGraph, WithoutTensorParallelismThereAreNoTpCollectives) {
  const LayerGraph graph = build_layer_graph(make("llama3.2-3b", 2, 1));
  for (const std::vector<Op>* ops : {&graph.forward, &graph.backward}) {
    for (const Op& op : *ops) {
      SCOPED_TRACE(op.name);
      if (op.is_collective()) {
        EXPECT_EQ(op.collective->group, CommGroup::kCp);
      }
    }
  }
}

// docs/kareus.md section 7: TP all-reduce payload per nanobatch = seq/CP * mbs/2 * hidden * 2 bytes;
// CP K+V all-gather = 2 * seq * mbs/2 * (kv groups/TP) * 128 * 2 bytes.
TEST(LayerGraph, CollectivePayloadsMatchReference) {
  struct Row {
    std::string model;
    int cp, tp, mbs, seq;
    double tp_bytes, cp_bytes;
  };
  const Row rows[] = {
      {"llama3.2-3b", 1, 8, 8, 4096, 100663296, 0},  // 96 MiB exactly
      {"llama3.2-3b", 2, 4, 8, 4096, 48 * kMiB, 16 * kMiB},  {"llama3.2-3b", 2, 4, 8, 8192, 96 * kMiB, 32 * kMiB},
      {"llama3.2-3b", 2, 4, 16, 4096, 96 * kMiB, 32 * kMiB}, {"qwen3-1.7b", 1, 8, 8, 8192, 128 * kMiB, 0},
      {"qwen3-1.7b", 2, 4, 8, 4096, 32 * kMiB, 16 * kMiB},   {"llama3.3-70b", 2, 4, 8, 4096, 128 * kMiB, 16 * kMiB},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.model + " cp " + std::to_string(row.cp) + " tp " + std::to_string(row.tp) + " mbs " +
                 std::to_string(row.mbs) + " seq " + std::to_string(row.seq));
    const LayerGraph graph = build_layer_graph(make(row.model, row.cp, row.tp, row.mbs, row.seq));
    for (const char* name : {"attn_all_reduce", "mlp_all_reduce"}) {
      const Collective& tp = *find(graph.forward, name).collective;
      EXPECT_EQ(tp.kind, CollectiveKind::kAllReduce);
      EXPECT_EQ(tp.group, CommGroup::kTp);
      EXPECT_EQ(tp.group_size, row.tp);
      EXPECT_DOUBLE_EQ(tp.bytes, row.tp_bytes) << name;
    }
    for (const char* name : {"fc1_grad_all_reduce", "qkv_grad_all_reduce"}) {
      EXPECT_DOUBLE_EQ(find(graph.backward, name).collective->bytes, row.tp_bytes) << name;
    }
    // Ring attention runs one step per CP rank's K/V, forward and backward; none without CP.
    const int ring_steps = row.cp == 1 ? 0 : row.cp;
    EXPECT_EQ(find(graph.forward, "attention").ring_steps, ring_steps);
    EXPECT_EQ(find(graph.backward, "attention_bwd").ring_steps, ring_steps);
    EXPECT_EQ(find(graph.forward, "qkv").ring_steps, 0);
    if (row.cp == 1) continue;
    const Collective& gather = *find(graph.forward, "kv_all_gather").collective;
    EXPECT_EQ(gather.kind, CollectiveKind::kAllGather);
    EXPECT_EQ(gather.group, CommGroup::kCp);
    EXPECT_EQ(gather.group_size, row.cp);
    EXPECT_DOUBLE_EQ(gather.bytes, row.cp_bytes);
    EXPECT_DOUBLE_EQ(find(graph.backward, "kv_regather").collective->bytes, row.cp_bytes);
    const Collective& scatter = *find(graph.backward, "dkv_reduce_scatter").collective;
    EXPECT_EQ(scatter.kind, CollectiveKind::kReduceScatter);
    EXPECT_DOUBLE_EQ(scatter.bytes, row.cp_bytes);
  }
}

TEST(LayerGraph, GemmShapesAndBackwardFlops) {
  // llama3.2-3b, TP 8, CP 1, nanobatch 4 x 4096 = 16384 tokens per GPU.
  const LayerGraph graph = build_layer_graph(make("llama3.2-3b", 1, 8));
  struct Row {
    std::string name;
    double m, n, k;
  };
  const Row rows[] = {
      {"qkv", 16384, (24 + 2 * 8) * 128 / 8.0, 3072},
      {"out_proj", 16384, 3072, 24 * 128 / 8.0},
      {"fc1", 16384, 2 * 8192 / 8.0, 3072},
      {"fc2", 16384, 3072, 8192 / 8.0},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const Op& forward = find(graph.forward, row.name);
    EXPECT_EQ(forward.kind, OpKind::kGemm);
    EXPECT_DOUBLE_EQ(forward.gemm.m, row.m);
    EXPECT_DOUBLE_EQ(forward.gemm.n, row.n);
    EXPECT_DOUBLE_EQ(forward.gemm.k, row.k);
    EXPECT_DOUBLE_EQ(forward.flops, 2 * row.m * row.n * row.k);
    EXPECT_DOUBLE_EQ(find(graph.backward, row.name + "_bwd").flops, 2 * forward.flops);
  }
  // Causal attention on one TP rank: 2 * b * s^2 * head_dim * heads/TP.
  EXPECT_DOUBLE_EQ(find(graph.forward, "attention").flops, 2.0 * 4 * 4096.0 * 4096 * 128 * 3);
  EXPECT_DOUBLE_EQ(find(graph.backward, "attention_bwd").flops, 2 * find(graph.forward, "attention").flops);
}

// Hand derivation of one iteration's model FLOPs over all GPUs. Per layer and token, the
// forward GEMMs cost 2 x (GEMM weights); backward twice that, so 6 x params x tokens. Causal
// attention: forward 2 * b * s^2 * head_dim * heads per layer, backward 2x. Full recompute
// repeats the layers' forward: x 4/3. The output layer (not recomputed) adds 2 * hidden * vocab
// per token forward and twice that backward. Tokens = mbs * seq * microbatches * dp.
struct HandFlops {
  double layers;        ///< transformer layers, forward + backward, no recompute
  double output_layer;  ///< output GEMM forward + backward
};

HandFlops hand_flops(const Workload& workload) {
  const ModelSpec& m = workload.model;
  const Parallelism& p = workload.parallel;
  const double gemm_weights = static_cast<double>(m.hidden) * (m.heads + 2 * m.kv_groups) * m.head_dim  // QKV
                              + static_cast<double>(m.heads) * m.head_dim * m.hidden                    // O-proj
                              + 3.0 * m.hidden * m.ffn;                                                 // SwiGLU MLP
  const double sequences = static_cast<double>(p.mbs) * p.microbatches * p.dp;
  const double tokens = sequences * p.seq;
  const double attention_forward = 2 * sequences * p.seq * static_cast<double>(p.seq) * m.head_dim * m.heads;
  return {m.layers * (6 * gemm_weights * tokens + 3 * attention_forward), 6.0 * m.hidden * m.vocab * tokens};
}

TEST(IterationFlops, MatchesHandDerivationWithinTwoPercent) {
  struct Row {
    std::string model;
    int cp, tp, dp, seq;
  };
  const Row rows[] = {
      {"llama3.2-3b", 1, 8, 1, 4096},
      {"qwen3-1.7b", 1, 8, 1, 4096},
      {"llama3.2-3b", 2, 4, 1, 8192},
      {"qwen3-1.7b", 2, 4, 2, 4096},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.model + " cp " + std::to_string(row.cp) + " dp " + std::to_string(row.dp));
    Parallelism parallel;
    parallel.cp = row.cp;
    parallel.tp = row.tp;
    parallel.dp = row.dp;
    parallel.seq = row.seq;
    const Workload full = make_workload(load_model(row.model), parallel);
    const HandFlops hand = hand_flops(full);
    const double expected_full = hand.layers * 4 / 3 + hand.output_layer;
    EXPECT_NEAR(iteration_flops(full) / expected_full, 1.0, 0.02);

    parallel.recompute = Recompute::kNone;
    const Workload none = make_workload(load_model(row.model), parallel);
    const double expected_none = hand.layers + hand.output_layer;
    EXPECT_NEAR(iteration_flops(none) / expected_none, 1.0, 0.02);
    // Recompute repeats exactly the layers' forward: without it the layers cost 3/4.
    EXPECT_NEAR((iteration_flops(none) - hand.output_layer) / (iteration_flops(full) - hand.output_layer), 0.75, 1e-3);
  }
}

TEST(IterationFlops, Llama3BArtifactIterationIsSevenPointTwoSevenPflop) {
  // The number itself, so a regression in any term shows: 8 x 2.8186e9 layer GEMM weights x
  // 262144 tokens + 4 x 28 layers x (2 x 64 x 4096^2 x 128 x 24) + 6 x 3072 x 128256 x 262144.
  EXPECT_NEAR(iteration_flops(make("llama3.2-3b", 1, 8)) / 1e15, 7.2696, 0.02 * 7.2696);
}

TEST(NonpartitionWork, FirstStageEmbedsLastStageComputesLoss) {
  const Workload workload = make("llama3.2-3b", 1, 8);
  const NonpartitionWork first = build_nonpartition_work(workload, 0);
  const NonpartitionWork last = build_nonpartition_work(workload, 1);
  EXPECT_EQ(names(first.forward), (std::vector<std::string>{"embedding", "embedding_all_reduce", "send_activations"}));
  EXPECT_EQ(names(last.forward),
            (std::vector<std::string>{"final_norm", "output_layer", "cross_entropy", "loss_all_reduce"}));
  EXPECT_EQ(names(last.backward).back(), "send_gradients");
  // Vocab-parallel output GEMM: 2 * tokens * hidden * vocab/TP.
  EXPECT_DOUBLE_EQ(find(last.forward, "output_layer").flops, 2.0 * 16384 * 3072 * (128256 / 8.0));
  EXPECT_FALSE(gradient_reduction(workload, 0).has_value());
}

TEST(NonpartitionWork, OneStageEmbedsAndComputesLoss) {
  // With pp == 1 the only stage is both first and last: it embeds, computes the loss, and sends
  // nothing. Backward runs from the loss to the embedding.
  Parallelism parallel;
  parallel.tp = 8;
  parallel.pp = 1;
  const Workload workload = make_workload(load_model("llama3.2-3b"), parallel);
  const NonpartitionWork only = build_nonpartition_work(workload, 0);
  EXPECT_EQ(names(only.forward), (std::vector<std::string>{"embedding", "embedding_all_reduce", "final_norm",
                                                           "output_layer", "cross_entropy", "loss_all_reduce"}));
  EXPECT_EQ(names(only.backward),
            (std::vector<std::string>{"cross_entropy_bwd", "output_layer_bwd", "output_grad_all_reduce",
                                      "final_norm_bwd", "embedding_bwd"}));
  for (const Op& op : only.backward) EXPECT_EQ(op.direction, Direction::kBackward);
  // The one stage's work is the two stages' work of pp == 2 less the P2P sends.
  parallel.pp = 2;
  const Workload two = make_workload(load_model("llama3.2-3b"), parallel);
  auto bytes = [](const std::vector<Op>& ops) {
    double total = 0;
    for (const Op& op : ops) {
      if (op.role != OpRole::kPipelineSend) total += op.bytes_read + op.bytes_written + op.flops;
    }
    return total;
  };
  const NonpartitionWork first = build_nonpartition_work(two, 0);
  const NonpartitionWork last = build_nonpartition_work(two, 1);
  EXPECT_DOUBLE_EQ(bytes(only.forward), bytes(first.forward) + bytes(last.forward));
  EXPECT_DOUBLE_EQ(bytes(only.backward), bytes(first.backward) + bytes(last.backward));
}

/// llama3.2-3b's shape with a learned table of `max_positions` rows in place of RoPE.
Workload learned_positions(int max_positions, int dp) {
  ModelSpec model = load_model("llama3.2-3b");
  model.position_embedding = PositionEmbedding::kLearned;
  model.max_positions = max_positions;
  model.rotary_scaling.reset();
  Parallelism parallel;
  parallel.tp = 8;
  parallel.pp = 2;
  parallel.dp = dp;
  return make_workload(model, parallel);
}

TEST(LayerGraph, LearnedPositionsHaveNoRopeOpAndTheSameOtherOps) {
  const LayerGraph learned = build_layer_graph(learned_positions(4096, 1));
  const LayerGraph rotary = build_layer_graph(make("llama3.2-3b", 1, 8));
  EXPECT_EQ(names(learned.forward),
            (std::vector<std::string>{"input_norm", "qkv", "attention", "out_proj", "attn_all_reduce", "attn_bda",
                                      "mlp_norm", "fc1", "swiglu", "fc2", "mlp_all_reduce", "mlp_bda"}));
  for (const std::vector<Op>* ops : {&learned.forward, &learned.backward}) {
    for (const Op& op : *ops) EXPECT_NE(op.kind, OpKind::kRope) << op.name;
  }
  // Every other op, both directions, is the RoPE model's op unchanged.
  auto without_rope = [](const std::vector<Op>& ops) {
    std::vector<Op> kept;
    for (const Op& op : ops) {
      if (op.kind != OpKind::kRope) kept.push_back(op);
    }
    return kept;
  };
  for (const auto& [mine, theirs] :
       {std::pair{&learned.forward, &rotary.forward}, std::pair{&learned.backward, &rotary.backward}}) {
    const std::vector<Op> expected = without_rope(*theirs);
    ASSERT_EQ(names(*mine), names(expected));
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ((*mine)[i].flops, expected[i].flops) << expected[i].name;
      EXPECT_EQ((*mine)[i].bytes_read + (*mine)[i].bytes_written, expected[i].bytes_read + expected[i].bytes_written)
          << expected[i].name;
    }
  }
}

TEST(NonpartitionWork, LearnedPositionTableIsEmbeddedAndItsGradientReduced) {
  const Workload learned = learned_positions(4096, 2);
  Workload rotary = learned;
  rotary.model.position_embedding = PositionEmbedding::kRope;
  rotary.model.max_positions = 0;
  // One nanobatch on one GPU: 4 sequences x 4096 tokens x 3072 x 2 bytes = 100,663,296 bytes per
  // table; the learned table adds one row per token, read forward, its gradient written backward.
  const double rows_bytes = 4.0 * 4096 * 3072 * 2;
  const NonpartitionWork learned_first = build_nonpartition_work(learned, 0);
  const NonpartitionWork rotary_first = build_nonpartition_work(rotary, 0);
  EXPECT_EQ(find(rotary_first.forward, "embedding").bytes_read, rows_bytes);
  EXPECT_EQ(find(learned_first.forward, "embedding").bytes_read, 2 * rows_bytes);
  EXPECT_EQ(find(learned_first.forward, "embedding").bytes_written, rows_bytes);
  EXPECT_EQ(find(rotary_first.backward, "embedding_bwd").bytes_written, rows_bytes);
  EXPECT_EQ(find(learned_first.backward, "embedding_bwd").bytes_written, 2 * rows_bytes);
  // Parameters: exactly max_positions x hidden more (4096 x 3072 = 12,582,912).
  EXPECT_EQ(learned.model.parameters() - rotary.model.parameters(), 12582912.0);
  EXPECT_EQ(learned.model.position_parameters(), 12582912.0);
  // The first stage's DP all-reduce carries the whole table on every TP rank (not / tp): 2 bytes
  // per parameter; the last stage holds no position table.
  EXPECT_EQ(gradient_reduction(learned, 0)->collective->bytes - gradient_reduction(rotary, 0)->collective->bytes,
            12582912.0 * 2);
  EXPECT_EQ(gradient_reduction(learned, 1)->collective->bytes, gradient_reduction(rotary, 1)->collective->bytes);
}

}  // namespace
}  // namespace kareus::workload

namespace kareus::workload {
namespace {

/// qwen3-1.7b (q/k norms included) at TP 4, DP 2, with its norms of kind `norm`.
Workload qwen_with(NormKind norm) {
  ModelSpec model = load_model("qwen3-1.7b");
  model.norm = norm;
  Parallelism parallel;
  parallel.tp = 4;
  parallel.dp = 2;
  return make_workload(model, parallel);
}

TEST(LayerGraph, LayerNormCountsItsMeanAndBiasOverRmsNorm) {
  const Workload rms = qwen_with(NormKind::kRmsNorm);
  const Workload layer_norm = qwen_with(NormKind::kLayerNorm);
  // One nanobatch on one GPU: 4 sequences x 4096 tokens; hidden 2048; q/k norms over head_dim
  // 128 for 16/4 query and 8/4 key heads per TP rank. Per element LayerNorm adds the mean's sum,
  // its subtraction and the bias (3 FLOPs); it reads its bias vectors (bf16) and writes each
  // row's mean (fp32) for the backward; the backward (2x FLOPs) reads the means and writes the
  // biases' gradients.
  const double tokens = 4.0 * 4096, hidden = 2048, head_dim = 128, qk_rows = tokens * (4 + 2);
  struct Extra {
    std::string name;
    double flops, read, written;
  };
  const Extra extras[] = {
      {"input_norm", 3 * tokens * hidden, hidden * 2, tokens * 4},
      {"qkv_post", 3 * qk_rows * head_dim, 2 * head_dim * 2, qk_rows * 4},  // the q and the k norm's biases
      {"mlp_norm", 3 * tokens * hidden, hidden * 2, tokens * 4},
  };
  const LayerGraph rms_graph = build_layer_graph(rms);
  const LayerGraph ln_graph = build_layer_graph(layer_norm);
  ASSERT_EQ(names(ln_graph.forward), names(rms_graph.forward));
  ASSERT_EQ(names(ln_graph.backward), names(rms_graph.backward));
  for (const Extra& extra : extras) {
    SCOPED_TRACE(extra.name);
    const Op& rms_fwd = find(rms_graph.forward, extra.name);
    const Op& ln_fwd = find(ln_graph.forward, extra.name);
    EXPECT_EQ(rms_fwd.flops, 4 * (extra.name == "qkv_post" ? qk_rows * head_dim : tokens * hidden));
    EXPECT_EQ(ln_fwd.flops - rms_fwd.flops, extra.flops);
    EXPECT_EQ(ln_fwd.bytes_read - rms_fwd.bytes_read, extra.read);
    EXPECT_EQ(ln_fwd.bytes_written - rms_fwd.bytes_written, extra.written);
    const Op& rms_bwd = find(rms_graph.backward, extra.name + "_bwd");
    const Op& ln_bwd = find(ln_graph.backward, extra.name + "_bwd");
    EXPECT_EQ(ln_bwd.flops - rms_bwd.flops, 2 * extra.flops);
    EXPECT_EQ(ln_bwd.bytes_read - rms_bwd.bytes_read, extra.read + extra.written);
    EXPECT_EQ(ln_bwd.bytes_written - rms_bwd.bytes_written, extra.read);
  }
  // Every other op is the same.
  for (const auto& [mine, theirs] :
       {std::pair{&ln_graph.forward, &rms_graph.forward}, std::pair{&ln_graph.backward, &rms_graph.backward}}) {
    for (std::size_t i = 0; i < mine->size(); ++i) {
      if ((*mine)[i].kind == OpKind::kNorm) continue;
      EXPECT_EQ((*mine)[i].flops, (*theirs)[i].flops) << (*mine)[i].name;
      EXPECT_EQ((*mine)[i].bytes_read, (*theirs)[i].bytes_read) << (*mine)[i].name;
      EXPECT_EQ((*mine)[i].bytes_written, (*theirs)[i].bytes_written) << (*mine)[i].name;
    }
  }
  // The last stage's final norm does the same over hidden.
  const NonpartitionWork rms_last = build_nonpartition_work(rms, 1);
  const NonpartitionWork ln_last = build_nonpartition_work(layer_norm, 1);
  const Op& rms_final = find(rms_last.forward, "final_norm");
  const Op& ln_final = find(ln_last.forward, "final_norm");
  EXPECT_EQ(ln_final.flops - rms_final.flops, 3 * tokens * hidden);
  EXPECT_EQ(ln_final.bytes_read - rms_final.bytes_read, hidden * 2);
  EXPECT_EQ(ln_final.bytes_written - rms_final.bytes_written, tokens * 4);
  // Parameters: a bias beside each norm weight, two norms over hidden and the q/k norms over
  // head_dim per layer (2 x 2048 + 2 x 128 = 4352), and the final norm's (2048).
  EXPECT_EQ(layer_norm.model.layer_parameters() - rms.model.layer_parameters(), 4352.0);
  EXPECT_EQ(layer_norm.model.parameters() - rms.model.parameters(), 28 * 4352.0 + 2048);
  // Stage 0's DP all-reduce carries its 14 layers' biases, split over TP 4, 2 bytes each.
  EXPECT_EQ(gradient_reduction(layer_norm, 0)->collective->bytes - gradient_reduction(rms, 0)->collective->bytes,
            14 * 4352.0 / 4 * 2);
}

/// llama3.2-3b at TP `tp`, CP `cp`, with sequence parallelism.
Workload sequence_parallel(int tp, int cp = 1, int mbs = 8, int seq = 4096) {
  Parallelism parallel;
  parallel.tp = tp;
  parallel.cp = cp;
  parallel.mbs = mbs;
  parallel.seq = seq;
  parallel.sequence_parallel = true;
  return make_workload(load_model("llama3.2-3b"), parallel);
}

// Megatron-Core's sequence parallelism (tensor_parallel/layers.py, mappings.py): a column-parallel
// linear all-gathers its input, a row-parallel one reduce-scatters its output; in backward the
// gradient of a reduce-scatter is all-gathered, and a column-parallel linear re-gathers its input
// for the weight gradient and reduce-scatters its input gradient.
TEST(LayerGraph, SequenceParallelReplacesTheAllReducesInMegatronsOrder) {
  const LayerGraph graph = build_layer_graph(sequence_parallel(8));
  EXPECT_EQ(names(graph.forward),
            (std::vector<std::string>{"input_norm", "attn_all_gather", "qkv", "rope", "attention", "out_proj",
                                      "attn_reduce_scatter", "attn_bda", "mlp_norm", "mlp_all_gather", "fc1", "swiglu",
                                      "fc2", "mlp_reduce_scatter", "mlp_bda"}));
  EXPECT_EQ(
      names(graph.backward),
      (std::vector<std::string>{"mlp_bda_bwd", "mlp_grad_all_gather", "fc2_bwd", "swiglu_bwd", "fc1_input_all_gather",
                                "fc1_bwd", "fc1_grad_reduce_scatter", "mlp_norm_bwd", "attn_bda_bwd",
                                "attn_grad_all_gather", "out_proj_bwd", "attention_bwd", "rope_bwd",
                                "qkv_input_all_gather", "qkv_bwd", "qkv_grad_reduce_scatter", "input_norm_bwd"}));
  // With CP as well, the CP collectives stay where they were.
  EXPECT_EQ(names(build_layer_graph(sequence_parallel(4, 2)).backward),
            (std::vector<std::string>{"mlp_bda_bwd", "mlp_grad_all_gather", "fc2_bwd", "swiglu_bwd",
                                      "fc1_input_all_gather", "fc1_bwd", "fc1_grad_reduce_scatter", "mlp_norm_bwd",
                                      "attn_bda_bwd", "attn_grad_all_gather", "out_proj_bwd", "kv_regather",
                                      "attention_bwd", "dkv_reduce_scatter", "rope_bwd", "qkv_input_all_gather",
                                      "qkv_bwd", "qkv_grad_reduce_scatter", "input_norm_bwd"}));
}

// Every SP collective moves the whole sequence of the nanobatch's tokens: an all-gather outputs
// it, a reduce-scatter takes it in. TP 8: 4 x 4096 tokens x 3072 x 2 bytes = 96 MiB; TP 2 at
// --mbs 4 --seq 2048: 2 x 2048 x 3072 x 2 = 24 MiB (what the all-reduce carried).
TEST(LayerGraph, SequenceParallelCollectivesCarryTheWholeSequence) {
  struct Row {
    int tp, mbs, seq;
    double bytes;
  };
  for (const Row& row : {Row{8, 8, 4096, 96 * kMiB}, Row{2, 4, 2048, 24 * kMiB}}) {
    SCOPED_TRACE("tp " + std::to_string(row.tp));
    const LayerGraph graph = build_layer_graph(sequence_parallel(row.tp, 1, row.mbs, row.seq));
    int gathers = 0, scatters = 0;
    for (const std::vector<Op>* ops : {&graph.forward, &graph.backward}) {
      for (const Op& op : *ops) {
        if (!op.is_collective()) continue;
        SCOPED_TRACE(op.name);
        const Collective& collective = *op.collective;
        EXPECT_EQ(collective.group, CommGroup::kTp);
        EXPECT_EQ(collective.group_size, row.tp);
        EXPECT_DOUBLE_EQ(collective.bytes, row.bytes);
        const bool gather = op.name.ends_with("all_gather");
        EXPECT_EQ(collective.kind, gather ? CollectiveKind::kAllGather : CollectiveKind::kReduceScatter);
        (gather ? gathers : scatters)++;
      }
    }
    // Forward 2 + 2; backward 2 gradient gathers + 2 input re-gathers, 2 scatters.
    EXPECT_EQ(gathers, 6);
    EXPECT_EQ(scatters, 4);
  }
}

// Norms and residual adds run on the rank's 1/TP of the tokens; GEMMs, RoPE, the activation and
// attention see the whole sequence, as without SP.
TEST(LayerGraph, SequenceParallelShardsNormsAndResidualAddsOnly) {
  const LayerGraph plain = build_layer_graph(make("llama3.2-3b", 1, 8));
  const LayerGraph sp = build_layer_graph(sequence_parallel(8));
  for (const auto& [mine, theirs] :
       {std::pair{&sp.forward, &plain.forward}, std::pair{&sp.backward, &plain.backward}}) {
    std::vector<Op> compute;
    for (const Op& op : *mine) {
      if (!op.is_collective()) compute.push_back(op);
    }
    std::vector<Op> reference;
    for (const Op& op : *theirs) {
      if (!op.is_collective()) reference.push_back(op);
    }
    ASSERT_EQ(names(compute), names(reference));
    for (std::size_t i = 0; i < compute.size(); ++i) {
      SCOPED_TRACE(compute[i].name);
      const bool sharded = compute[i].kind == OpKind::kNorm || compute[i].kind == OpKind::kElementwise;
      const double scale = sharded ? 1.0 / 8 : 1.0;
      EXPECT_DOUBLE_EQ(compute[i].flops, scale * reference[i].flops);
      EXPECT_DOUBLE_EQ(compute[i].bytes_read, scale * reference[i].bytes_read);
      EXPECT_DOUBLE_EQ(compute[i].bytes_written, scale * reference[i].bytes_written);
    }
  }
  // The input norm: 2048 of the 16384 tokens x 3072, read once at 2 bytes.
  EXPECT_DOUBLE_EQ(find(sp.forward, "input_norm").bytes_read, 2048.0 * 3072 * 2);
}

// Token nanobatches (--mbs 1): each half of the sequence is priced as the mean of the two, so
// both together do exactly the work of the whole microbatch, op by op, collectives included
// (GEMMs: their FLOPs; each half reads the weights again).
TEST(LayerGraph, TokenHalvesTogetherDoTheWholeMicrobatchsWork) {
  Parallelism parallel{.tp = 4, .cp = 2, .mbs = 1, .sequence_parallel = true};
  const LayerGraph half = build_layer_graph(make_workload(load_model("qwen3-1.7b"), parallel));
  parallel.nanobatches = 1;
  const LayerGraph whole = build_layer_graph(make_workload(load_model("qwen3-1.7b"), parallel));
  for (const auto& [halves, wholes] :
       {std::pair{&half.forward, &whole.forward}, std::pair{&half.backward, &whole.backward}}) {
    ASSERT_EQ(names(*halves), names(*wholes));
    for (std::size_t i = 0; i < halves->size(); ++i) {
      const Op& mine = (*halves)[i];
      const Op& theirs = (*wholes)[i];
      SCOPED_TRACE(mine.name);
      EXPECT_DOUBLE_EQ(2 * mine.flops, theirs.flops);
      if (mine.kind == OpKind::kGemm) {
        // Each half reads the weight (and writes a weight gradient) once of its own: only the
        // token dimension halves.
        EXPECT_DOUBLE_EQ(2 * mine.gemm.m * mine.gemm.n * mine.gemm.k, theirs.gemm.m * theirs.gemm.n * theirs.gemm.k);
        continue;
      }
      EXPECT_DOUBLE_EQ(2 * mine.bytes_read, theirs.bytes_read);
      EXPECT_DOUBLE_EQ(2 * mine.bytes_written, theirs.bytes_written);
      ASSERT_EQ(mine.is_collective(), theirs.is_collective());
      if (mine.is_collective()) {
        EXPECT_DOUBLE_EQ(2 * mine.collective->bytes, theirs.collective->bytes);
      }
    }
  }
  // The QKV GEMM of one half: 4096 / CP 2 / 2 halves = 1024 tokens.
  EXPECT_DOUBLE_EQ(find(half.forward, "qkv").gemm.m, 1024);
}

// The embedding is reduce-scattered onto the sequence, the output layer (column-parallel) gathers
// its input and reduce-scatters its input gradient, and a stage sends its shard of the sequence.
TEST(NonpartitionWork, SequenceParallelScattersTheEmbeddingAndGathersTheHead) {
  const Workload workload = sequence_parallel(8);
  const NonpartitionWork first = build_nonpartition_work(workload, 0);
  const NonpartitionWork last = build_nonpartition_work(workload, 1);
  EXPECT_EQ(names(first.forward),
            (std::vector<std::string>{"embedding", "embedding_reduce_scatter", "send_activations"}));
  EXPECT_EQ(names(first.backward), (std::vector<std::string>{"embedding_grad_all_gather", "embedding_bwd"}));
  EXPECT_EQ(names(last.forward), (std::vector<std::string>{"final_norm", "output_all_gather", "output_layer",
                                                           "cross_entropy", "loss_all_reduce"}));
  EXPECT_EQ(names(last.backward),
            (std::vector<std::string>{"cross_entropy_bwd", "output_input_all_gather", "output_layer_bwd",
                                      "output_grad_reduce_scatter", "final_norm_bwd", "send_gradients"}));
  EXPECT_EQ(find(first.forward, "embedding_reduce_scatter").collective->kind, CollectiveKind::kReduceScatter);
  EXPECT_DOUBLE_EQ(find(last.forward, "output_all_gather").collective->bytes, 96 * kMiB);
  // 16384 tokens / 8 x 3072 x 2 bytes = 12 MiB cross the stage boundary, not 96.
  EXPECT_DOUBLE_EQ(find(first.forward, "send_activations").collective->bytes, 12 * kMiB);
  EXPECT_DOUBLE_EQ(find(last.backward, "send_gradients").collective->bytes, 12 * kMiB);
  EXPECT_DOUBLE_EQ(find(last.forward, "final_norm").bytes_read, 2048.0 * 3072 * 2);
}

// SP saves only the 7/8 of the norms' and residual adds' FLOPs; the iteration does the same GEMMs.
TEST(IterationFlops, SequenceParallelSavesTheShardedOpsFlopsOnly) {
  const Workload plain = make("llama3.2-3b", 1, 8);
  const Workload sp = sequence_parallel(8);
  double sharded_flops = 0;  // per layer per nanobatch: norms and residual adds, forward and backward
  const LayerGraph graph = build_layer_graph(plain);
  for (const std::vector<Op>* ops : {&graph.forward, &graph.backward}) {
    for (const Op& op : *ops) {
      if (op.kind == OpKind::kNorm || op.kind == OpKind::kElementwise) sharded_flops += op.flops;
    }
  }
  double recompute_flops = 0;  // full recompute reruns the forward's
  for (const Op& op : graph.forward) {
    if (op.kind == OpKind::kNorm || op.kind == OpKind::kElementwise) recompute_flops += op.flops;
  }
  const NonpartitionWork last = build_nonpartition_work(plain, 1);
  const double final_norm_flops = find(last.forward, "final_norm").flops + find(last.backward, "final_norm_bwd").flops;
  // 28 layers, 2 nanobatches x 8 microbatches, on tp 8 GPUs.
  const double saved = (28 * (sharded_flops + recompute_flops) + final_norm_flops) * 7.0 / 8 * 16 * 8;
  EXPECT_NEAR(iteration_flops(plain) - iteration_flops(sp), saved, 1e-9 * saved);
  EXPECT_GT(saved, 0);
}

}  // namespace
}  // namespace kareus::workload
