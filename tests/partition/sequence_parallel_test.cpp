// The partitions of a sequence-parallel layer: cut at every all-gather and reduce-scatter, keys
// unique, and the keys of a workload without sequence parallelism as they always were.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/partition/comm_fit.h"
#include "kareus/partition/partition.h"

namespace kareus::partition {
namespace {

using workload::CollectiveKind;

constexpr double kMiB = 1024.0 * 1024.0;

workload::Workload make(const std::string& model, int tp, int cp, bool sequence_parallel, int mbs = 8, int seq = 4096) {
  workload::Parallelism parallel;
  parallel.tp = tp;
  parallel.cp = cp;
  parallel.mbs = mbs;
  parallel.seq = seq;
  parallel.sequence_parallel = sequence_parallel;
  return workload::make_workload(workload::load_model(model), parallel);
}

/// One partition of a steady-state layer, as a hand-written row.
struct Row {
  std::string key;
  int nanobatch;
  std::vector<std::string> compute_ops;
  std::string collective;  ///< the overlapped collective's op (the other nanobatch's)
  CollectiveKind kind;
  std::vector<std::string> slots;
};

void expect_layer(const workload::Workload& workload, Direction direction, const std::vector<Row>& rows, double bytes) {
  const std::vector<Partition> partitions = layer_partitions(workload, direction);
  ASSERT_EQ(partitions.size(), rows.size());
  for (std::size_t index = 0; index < rows.size(); ++index) {
    const Row& row = rows[index];
    const Partition& partition = partitions[index];
    SCOPED_TRACE(row.key + "(" + std::to_string(row.nanobatch) + ")");
    EXPECT_EQ(partition.key, row.key);
    EXPECT_EQ(partition.nanobatch, row.nanobatch);
    std::vector<std::string> ops, slots;
    for (const workload::Op& op : partition.compute_ops) ops.push_back(op.name);
    for (const Slot& slot : partition.slots) slots.push_back(slot.name);
    EXPECT_EQ(ops, row.compute_ops);
    EXPECT_EQ(slots, row.slots);
    ASSERT_TRUE(partition.collective.has_value());
    EXPECT_EQ(partition.collective->name, row.collective);
    EXPECT_EQ(partition.collective->collective->kind, row.kind);
    EXPECT_EQ(partition.collective->collective->group, workload::CommGroup::kTp);
    EXPECT_EQ(partition.collective->collective->group_size, workload.parallel.tp);
    EXPECT_DOUBLE_EQ(partition.collective->collective->bytes, bytes);
    EXPECT_TRUE(partition.searchable());
  }
}

const auto kAg = CollectiveKind::kAllGather;
const auto kRs = CollectiveKind::kReduceScatter;

// Forward: the segments between the collectives are [previous MLP's residual add, input norm],
// [QKV .. O-proj], [residual add, MLP norm], [FC1 .. FC2]. NB0 overlaps NB1's collective of the
// segment before (so a key's suffix is the kind it overlaps), NB1 overlaps NB0's own.
std::vector<Row> forward_rows() {
  const std::vector<std::string> attn_norm = {"mlp_bda", "input_norm"};
  const std::vector<std::string> attn = {"qkv", "rope", "attention", "out_proj"};
  const std::vector<std::string> attn_slots = {"linear_0", "rope_0", "attn_0", "linear_1"};
  const std::vector<std::string> mlp_norm = {"attn_bda", "mlp_norm"};
  const std::vector<std::string> mlp = {"fc1", "swiglu", "fc2"};
  const std::vector<std::string> mlp_slots = {"linear_0", "activation_0", "linear_1"};
  return {
      {"fwd_attn_norm_rs", 0, attn_norm, "mlp_reduce_scatter", kRs, {"norm_0"}},
      {"fwd_attn_norm_ag", 1, attn_norm, "attn_all_gather", kAg, {"norm_0"}},
      {"fwd_attn_ag", 0, attn, "attn_all_gather", kAg, attn_slots},
      {"fwd_attn_rs", 1, attn, "attn_reduce_scatter", kRs, attn_slots},
      {"fwd_mlp_norm_rs", 0, mlp_norm, "attn_reduce_scatter", kRs, {"norm_0"}},
      {"fwd_mlp_norm_ag", 1, mlp_norm, "mlp_all_gather", kAg, {"norm_0"}},
      {"fwd_mlp_ag", 0, mlp, "mlp_all_gather", kAg, mlp_slots},
      {"fwd_mlp_rs", 1, mlp, "mlp_reduce_scatter", kRs, mlp_slots},
  };
}

// Backward: [next layer's input norm, residual add] | gradient all-gather | [FC2, SwiGLU] | FC1
// input re-gather | [FC1] | input-gradient reduce-scatter | [MLP norm, residual add] | ... The
// keys name FC1 and FC2 apart ("fc1", "fc2") where a collective separates them.
std::vector<Row> backward_rows() {
  const std::vector<std::string> attn_norm = {"input_norm_bwd", "mlp_bda_bwd"};
  const std::vector<std::string> fc2 = {"fc2_bwd", "swiglu_bwd"};
  const std::vector<std::string> mlp_norm = {"mlp_norm_bwd", "attn_bda_bwd"};
  const std::vector<std::string> ao = {"out_proj_bwd", "attention_bwd", "rope_bwd"};
  return {
      {"bwd_attn_norm_rs", 0, attn_norm, "qkv_grad_reduce_scatter", kRs, {"norm_0"}},
      {"bwd_attn_norm_ag", 1, attn_norm, "mlp_grad_all_gather", kAg, {"norm_0"}},
      {"bwd_fc2", 0, fc2, "mlp_grad_all_gather", kAg, {"linear_0", "activation_0"}},
      {"bwd_fc2", 1, fc2, "fc1_input_all_gather", kAg, {"linear_0", "activation_0"}},
      {"bwd_fc1_ag", 0, {"fc1_bwd"}, "fc1_input_all_gather", kAg, {"linear_0"}},
      {"bwd_fc1_rs", 1, {"fc1_bwd"}, "fc1_grad_reduce_scatter", kRs, {"linear_0"}},
      {"bwd_mlp_norm_rs", 0, mlp_norm, "fc1_grad_reduce_scatter", kRs, {"norm_0"}},
      {"bwd_mlp_norm_ag", 1, mlp_norm, "attn_grad_all_gather", kAg, {"norm_0"}},
      {"bwd_ao", 0, ao, "attn_grad_all_gather", kAg, {"linear_0", "attn_0", "rope_0"}},
      {"bwd_ao", 1, ao, "qkv_input_all_gather", kAg, {"linear_0", "attn_0", "rope_0"}},
      {"bwd_qkv_ag", 0, {"qkv_bwd"}, "qkv_input_all_gather", kAg, {"linear_0"}},
      {"bwd_qkv_rs", 1, {"qkv_bwd"}, "qkv_grad_reduce_scatter", kRs, {"linear_0"}},
  };
}

// TP 8 (--mbs 8 --seq 4096): 16384 tokens per nanobatch x 3072 x 2 bytes = 96 MiB per collective.
TEST(SequenceParallelPartitions, TpEightLayerByHand) {
  const workload::Workload workload = make("llama3.2-3b", 8, 1, true);
  expect_layer(workload, Direction::kForward, forward_rows(), 96 * kMiB);
  expect_layer(workload, Direction::kBackward, backward_rows(), 96 * kMiB);
}

// TP 2 (--mbs 4 --seq 2048): 4096 tokens x 3072 x 2 bytes = 24 MiB; the same cuts and keys.
TEST(SequenceParallelPartitions, TpTwoLayerByHand) {
  const workload::Workload workload = make("llama3.2-3b", 2, 1, true, 4, 2048);
  expect_layer(workload, Direction::kForward, forward_rows(), 24 * kMiB);
  expect_layer(workload, Direction::kBackward, backward_rows(), 24 * kMiB);
}

TEST(SequenceParallelPartitions, SearchableKeysForwardThenBackwardEachOnce) {
  const std::vector<std::string> expected = {"fwd_attn_norm_rs", "fwd_attn_norm_ag", "fwd_attn_ag",     "fwd_attn_rs",
                                             "fwd_mlp_norm_rs",  "fwd_mlp_norm_ag",  "fwd_mlp_ag",      "fwd_mlp_rs",
                                             "bwd_attn_norm_rs", "bwd_attn_norm_ag", "bwd_fc2",         "bwd_fc1_ag",
                                             "bwd_fc1_rs",       "bwd_mlp_norm_rs",  "bwd_mlp_norm_ag", "bwd_ao",
                                             "bwd_qkv_ag",       "bwd_qkv_rs"};
  EXPECT_EQ(searchable_keys(make("llama3.2-3b", 8, 1, true)), expected);
}

// With CP as well, the K/V all-gather and re-gather and the dK/dV reduce-scatter cut too:
// [QKV, RoPE] | K/V gather | [attention, O-proj] forward; backward [O-proj] | re-gather |
// [attention] | dK/dV scatter | [RoPE] | QKV input re-gather | [QKV].
TEST(SequenceParallelPartitions, WithContextParallelismToo) {
  EXPECT_EQ(searchable_keys(make("llama3.2-3b", 4, 2, true)), (std::vector<std::string>{"fwd_attn_norm_rs",
                                                                                        "fwd_attn_norm_ag",
                                                                                        "fwd_qkv",
                                                                                        "fwd_ao_ag",
                                                                                        "fwd_ao_rs",
                                                                                        "fwd_mlp_norm_rs",
                                                                                        "fwd_mlp_norm_ag",
                                                                                        "fwd_mlp_ag",
                                                                                        "fwd_mlp_rs",
                                                                                        "bwd_attn_norm_rs",
                                                                                        "bwd_attn_norm_ag",
                                                                                        "bwd_fc2",
                                                                                        "bwd_fc1_ag",
                                                                                        "bwd_fc1_rs",
                                                                                        "bwd_mlp_norm_rs",
                                                                                        "bwd_mlp_norm_ag",
                                                                                        "bwd_o",
                                                                                        "bwd_a_ag",
                                                                                        "bwd_a_rs",
                                                                                        "bwd_rope_rs",
                                                                                        "bwd_rope_ag",
                                                                                        "bwd_qkv_ag",
                                                                                        "bwd_qkv_rs"}));
  const Partition rope = representative_partition(make("llama3.2-3b", 4, 2, true), "bwd_rope_ag");
  ASSERT_EQ(rope.compute_ops.size(), 1u);
  EXPECT_EQ(rope.compute_ops[0].name, "rope_bwd");
  EXPECT_EQ(rope.collective->name, "qkv_input_all_gather");
}

// The keys of workloads without sequence parallelism are those plans were written with before:
// the four TP keys, the CP keys of docs/kareus.md section 2, and TP 1 with CP's one key.
TEST(SequenceParallelPartitions, KeysWithoutSequenceParallelismAreUnchanged) {
  EXPECT_EQ(searchable_keys(make("llama3.2-3b", 8, 1, false)),
            (std::vector<std::string>{"fwd_attn", "fwd_mlp", "bwd_mlp", "bwd_attn"}));
  EXPECT_EQ(searchable_keys(make("qwen3-1.7b", 4, 2, false)),
            (std::vector<std::string>{"fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar", "fwd_mlp", "bwd_mlp",
                                      "bwd_o_ar", "bwd_o_ag", "bwd_a_ag", "bwd_a_rs", "bwd_qkv_rs", "bwd_qkv_ar"}));
  EXPECT_EQ(searchable_keys(make("llama3.2-3b", 1, 2, false)),
            (std::vector<std::string>{"fwd_attn_mlp", "bwd_qkvo_mlp_rs", "bwd_qkvo_mlp_ag", "bwd_a_ag", "bwd_a_rs"}));
}

// Every preset at every TP and CP it allows, with and without SP: each key names one partition
// of the layer, and a stage's instances of a key hold the same collective kind.
TEST(SequenceParallelPartitions, KeysAreUniqueForEveryPresetAndLayout) {
  for (const std::string model : {"llama3.2-3b", "qwen3-1.7b", "llama3.3-70b", "gpt3-175b"}) {
    for (const int tp : {2, 4, 8}) {
      for (const int cp : {1, 2}) {
        for (const bool sp : {false, true}) {
          SCOPED_TRACE(model + " tp " + std::to_string(tp) + " cp " + std::to_string(cp) + (sp ? " sp" : ""));
          workload::Workload workload;
          try {
            workload = make(model, tp, cp, sp, 8, 2048);
          } catch (const InputError&) {
            continue;  // a layout the model refuses (heads not divisible)
          }
          for (const Direction direction : {Direction::kForward, Direction::kBackward}) {
            std::map<std::string, std::set<std::vector<std::string>>> ops_of_key;
            for (const Partition& partition : layer_partitions(workload, direction)) {
              std::vector<std::string> ops;
              for (const workload::Op& op : partition.compute_ops) ops.push_back(op.name);
              ops_of_key[partition.key].insert(ops);
            }
            for (const auto& [key, ops] : ops_of_key) EXPECT_EQ(ops.size(), 1u) << key;
            std::map<std::string, CollectiveKind> kind_of_key;
            for (const Partition& partition : build_partitions(workload, 0, direction)) {
              if (!partition.searchable()) continue;
              const auto [found, added] = kind_of_key.emplace(partition.key, partition.collective->collective->kind);
              EXPECT_EQ(found->second, partition.collective->collective->kind) << partition.key;
            }
          }
        }
      }
    }
  }
}

// The comm-config rules take the SP keys as they take the others: each is needed, each slot checked.
TEST(SequenceParallelPartitions, CommRulesNameTheSequenceParallelKeys) {
  const workload::Workload workload = make("llama3.2-3b", 8, 1, true);
  const InstructionCommRules forward(workload, 0, Direction::kForward);
  // In the stage's order: its first layer's NB0 norm partition has no collective before it, so
  // fwd_attn_norm_rs first runs in the second layer.
  EXPECT_EQ(forward.keys(),
            (std::vector<std::string>{"fwd_attn_norm_ag", "fwd_attn_ag", "fwd_attn_rs", "fwd_mlp_norm_rs",
                                      "fwd_mlp_norm_ag", "fwd_mlp_ag", "fwd_mlp_rs", "fwd_attn_norm_rs"}));
  CommConfigs configs;
  for (const std::string& key : forward.keys()) configs[key] = {"norm_0", 12};
  try {
    forward.check(configs, {}, "p.json");
    FAIL() << "fwd_attn_ag has no norm_0";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "p.json: partition 'fwd_attn_ag': no launch slot 'norm_0' (slots: linear_0, rope_0, attn_0, linear_1, "
                 "none)");
  }
}

}  // namespace
}  // namespace kareus::partition
