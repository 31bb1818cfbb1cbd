// kareus/workload/op_graph.h - the operations of one transformer layer, per nanobatch, per GPU.
//
// The forward list follows docs/kareus.md section 2 (Megatron order); the backward list is
// the reverse with each op's backward and the collectives backward needs (TP all-reduce of
// the input gradient after column-parallel linears; with CP, K/V re-gather before and dK/dV
// reduce-scatter after attention).
// With sequence parallelism (Megatron-Core's tensor_parallel layers and mappings), norms and
// residual adds run on 1/TP of the tokens; each column-parallel linear (QKV, FC1) all-gathers
// its input first and each row-parallel one (O-proj, FC2) reduce-scatters its output. Backward:
// a row-parallel output's gradient is all-gathered; a column-parallel linear re-gathers its
// input (the weight gradient needs the whole sequence; Megatron keeps only its shard), runs
// its backward, and reduce-scatters its input gradient. Megatron overlaps the re-gather with
// the input-gradient GEMM and the reduce-scatter with the weight-gradient GEMM inside one
// nanobatch; here the backward is one op, so both wait for the whole of it (the overlap
// kareus plans is with the other nanobatch). Work is what one GPU does for one nanobatch: FLOPs,
// HBM bytes read and written, and for collectives the group, algorithm and payload.
// FLOP convention: GEMM and attention backward = 2x forward (model FLOPs); causal attention
// counts half of the full score matrix.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/common/direction.h"
#include "kareus/workload/workload.h"

namespace kareus::workload {

enum class OpKind { kGemm, kAttention, kNorm, kRope, kActivation, kElementwise, kEmbedding, kLoss, kCollective };
enum class CommGroup { kTp, kCp, kDp, kPp };
enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kSendRecv };

/// What a layer op is, independent of direction; the partition builder names keys and slots from it.
enum class OpRole {
  kInputNorm,
  kQkv,
  kQkvPost,
  kRope,
  kAttention,
  kOutProj,
  kAttnBda,
  kMlpNorm,
  kFc1,
  kActivation,
  kFc2,
  kMlpBda,
  kKvGather,
  kQkvInputGather,  ///< sequence parallel: QKV's input, gathered in forward and again in backward
  kFc1InputGather,  ///< sequence parallel: FC1's input, likewise
  kAttnGradGather,  ///< sequence parallel: the O-proj output's gradient
  kMlpGradGather,   ///< sequence parallel: the FC2 output's gradient
  kAttnReduce,
  kMlpReduce,
  kQkvGradReduce,
  kFc1GradReduce,
  kDkvScatter,
  kEmbedding,
  kFinalNorm,
  kOutputLayer,
  kLoss,
  kOutputReduce,
  kEmbeddingReduce,
  kPipelineSend,
  kGradientReduce,
};

std::string_view to_string(OpKind kind);
std::string_view to_string(CommGroup group);
std::string_view to_string(CollectiveKind kind);
/// "ar", "ag", "rs", "p2p": the short names partition keys use.
std::string_view short_name(CollectiveKind kind);

struct GemmShape {
  double m = 0, n = 0, k = 0;  ///< C[m x n] = A[m x k] B[k x n]
};

struct Collective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  CommGroup group = CommGroup::kTp;
  int group_size = 1;
  double bytes =
      0;  ///< payload: the full tensor an all-reduce reduces / an all-gather outputs / a reduce-scatter inputs
};

struct Op {
  std::string name;  ///< e.g. "qkv", "fc1_bwd", "attn_all_reduce"
  OpKind kind = OpKind::kElementwise;
  OpRole role = OpRole::kInputNorm;
  Direction direction = Direction::kForward;
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  GemmShape gemm;                        ///< for kGemm (backward: the forward shape)
  std::optional<Collective> collective;  ///< for kCollective
  int ring_steps = 0;                    ///< kAttention under context parallelism: the K/V ring's steps (= CP)

  [[nodiscard]] bool is_collective() const { return kind == OpKind::kCollective; }
  /// Memory-bound ops (norm, rope, activation, elementwise) merge into one launch slot.
  [[nodiscard]] bool is_memory_bound() const;
};

/// One layer's ops for one nanobatch on one GPU, forward and backward, in execution order.
struct LayerGraph {
  std::vector<Op> forward;
  std::vector<Op> backward;
};

[[nodiscard]] LayerGraph build_layer_graph(const Workload& workload);

/// Work outside the partitions, per nanobatch on one GPU, run without overlap at the
/// instruction's clock: embedding (first stage), final norm + output GEMM + loss (last stage),
/// and the P2P send of activations (gradients in backward) to the neighbouring stage.
struct NonpartitionWork {
  std::vector<Op> forward;
  std::vector<Op> backward;
};

[[nodiscard]] NonpartitionWork build_nonpartition_work(const Workload& workload, int stage);

/// The DP gradient all-reduce at the end of the iteration for `stage`, or nullopt when dp == 1.
[[nodiscard]] std::optional<Op> gradient_reduction(const Workload& workload, int stage);

/// FLOPs of one whole training iteration over all GPUs (forward, backward, and the recompute
/// forward when recompute is full), from the op graph.
[[nodiscard]] double iteration_flops(const Workload& workload);

}  // namespace kareus::workload
