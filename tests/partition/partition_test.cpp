#include "kareus/partition/partition.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "kareus/common/error.h"

namespace kareus::partition {
namespace {

using workload::CollectiveKind;
using workload::CommGroup;

workload::Workload make(const std::string& model, int cp, int tp, std::vector<int> layers_per_stage = {}) {
  workload::Parallelism parallel;
  parallel.cp = cp;
  parallel.tp = tp;
  parallel.layers_per_stage = std::move(layers_per_stage);
  return workload::make_workload(workload::load_model(model), parallel);
}

/// "key(NB)" for each partition, e.g. "fwd_attn(0) fwd_attn(1)".
std::string spell(const std::vector<Partition>& partitions) {
  std::string text;
  for (const Partition& partition : partitions) {
    if (!text.empty()) text += ' ';
    text += partition.key + "(" + std::to_string(partition.nanobatch) + ")";
  }
  return text;
}

std::vector<std::string> op_names(const Partition& partition) {
  std::vector<std::string> names;
  for (const workload::Op& op : partition.compute_ops) names.push_back(op.name);
  return names;
}

std::vector<std::string> slot_names(const Partition& partition) {
  std::vector<std::string> names;
  for (const Slot& slot : partition.slots) names.push_back(slot.name);
  return names;
}

/// Every partition of one steady-state layer, forward then backward, by key (NB0's if shared).
std::map<std::string, Partition> by_key(const workload::Workload& workload) {
  std::map<std::string, Partition> partitions;
  for (Direction direction : {Direction::kForward, Direction::kBackward}) {
    for (const Partition& partition : layer_partitions(workload, direction)) {
      partitions.emplace(partition.key, partition);
    }
  }
  return partitions;
}

TEST(PartitionBuilder, CpOneForwardOrderMatchesReference) {
  EXPECT_EQ(spell(layer_partitions(make("llama3.2-3b", 1, 8), Direction::kForward)),
            "fwd_attn(0) fwd_attn(1) fwd_mlp(0) fwd_mlp(1)");
}

TEST(PartitionBuilder, CpOneBackwardOrderMatchesReference) {
  EXPECT_EQ(spell(layer_partitions(make("llama3.2-3b", 1, 8), Direction::kBackward)),
            "bwd_mlp(0) bwd_mlp(1) bwd_attn(0) bwd_attn(1)");
}

TEST(PartitionBuilder, CpTwoForwardOrderMatchesReference) {
  for (const std::string model : {"llama3.2-3b", "qwen3-1.7b"}) {
    SCOPED_TRACE(model);
    EXPECT_EQ(spell(layer_partitions(make(model, 2, 4), Direction::kForward)),
              "fwd_qkv_ar(0) fwd_qkv_ag(1) fwd_ao_ag(0) fwd_ao_ar(1) fwd_mlp(0) fwd_mlp(1)");
  }
}

TEST(PartitionBuilder, CpTwoBackwardOrderMatchesReference) {
  for (const std::string model : {"llama3.2-3b", "qwen3-1.7b"}) {
    SCOPED_TRACE(model);
    EXPECT_EQ(spell(layer_partitions(make(model, 2, 4), Direction::kBackward)),
              "bwd_mlp(0) bwd_mlp(1) bwd_o_ar(0) bwd_o_ag(1) bwd_a_ag(0) bwd_a_rs(1) bwd_qkv_rs(0) bwd_qkv_ar(1)");
  }
}

struct KeyRow {
  std::string key;
  std::vector<std::string> compute_ops;
  CollectiveKind kind;
  CommGroup group;
  std::vector<std::string> slots;
};

void expect_keys(const workload::Workload& workload, const std::vector<KeyRow>& rows) {
  const std::map<std::string, Partition> partitions = by_key(workload);
  ASSERT_EQ(partitions.size(), rows.size());
  for (const KeyRow& row : rows) {
    SCOPED_TRACE(row.key);
    ASSERT_EQ(partitions.count(row.key), 1u);
    const Partition& partition = partitions.at(row.key);
    EXPECT_EQ(op_names(partition), row.compute_ops);
    ASSERT_TRUE(partition.collective.has_value());
    EXPECT_EQ(partition.collective->collective->kind, row.kind);
    EXPECT_EQ(partition.collective->collective->group, row.group);
    EXPECT_EQ(slot_names(partition), row.slots);
    EXPECT_TRUE(partition.searchable());
    // Each slot starts at the op it names.
    for (const Slot& slot : partition.slots) ASSERT_LT(slot.first_op, partition.compute_ops.size());
  }
}

// docs/kareus.md section 2's table: compute ops | collective of the other nanobatch | slots
// (all slots here; the artifact searched a subset, see search_space_test).
TEST(PartitionBuilder, CpOneKeysHoldReferenceOpsCollectivesAndSlots) {
  expect_keys(make("llama3.2-3b", 1, 8),
              {
                  {"fwd_attn",
                   {"mlp_bda", "input_norm", "qkv", "rope", "attention", "out_proj"},
                   CollectiveKind::kAllReduce,
                   CommGroup::kTp,
                   {"norm_0", "linear_0", "rope_0", "attn_0", "linear_1"}},
                  {"fwd_mlp",
                   {"attn_bda", "mlp_norm", "fc1", "swiglu", "fc2"},
                   CollectiveKind::kAllReduce,
                   CommGroup::kTp,
                   {"norm_0", "linear_0", "activation_0", "linear_1"}},
                  {"bwd_mlp",
                   {"input_norm_bwd", "mlp_bda_bwd", "fc2_bwd", "swiglu_bwd", "fc1_bwd"},
                   CollectiveKind::kAllReduce,
                   CommGroup::kTp,
                   {"norm_0", "linear_0", "activation_0", "linear_1"}},
                  {"bwd_attn",
                   {"mlp_norm_bwd", "attn_bda_bwd", "out_proj_bwd", "attention_bwd", "rope_bwd", "qkv_bwd"},
                   CollectiveKind::kAllReduce,
                   CommGroup::kTp,
                   {"norm_0", "linear_0", "attn_0", "rope_0", "linear_1"}},
              });
}

TEST(PartitionBuilder, CpTwoKeysHoldReferenceOpsCollectivesAndSlots) {
  const std::vector<std::string> qkv = {"mlp_bda", "input_norm", "qkv", "rope"};
  const std::vector<std::string> o_bwd = {"mlp_norm_bwd", "attn_bda_bwd", "out_proj_bwd"};
  const std::vector<std::string> qkv_bwd = {"rope_bwd", "qkv_bwd"};
  const auto ar = CollectiveKind::kAllReduce;
  const auto ag = CollectiveKind::kAllGather;
  const auto rs = CollectiveKind::kReduceScatter;
  const auto tp = CommGroup::kTp;
  const auto cp = CommGroup::kCp;
  expect_keys(make("llama3.2-3b", 2, 4), {
                                             {"fwd_qkv_ar", qkv, ar, tp, {"norm_0", "linear_0", "rope_0"}},
                                             {"fwd_qkv_ag", qkv, ag, cp, {"norm_0", "linear_0", "rope_0"}},
                                             {"fwd_ao_ag", {"attention", "out_proj"}, ag, cp, {"attn_0", "linear_0"}},
                                             {"fwd_ao_ar", {"attention", "out_proj"}, ar, tp, {"attn_0", "linear_0"}},
                                             {"fwd_mlp",
                                              {"attn_bda", "mlp_norm", "fc1", "swiglu", "fc2"},
                                              ar,
                                              tp,
                                              {"norm_0", "linear_0", "activation_0", "linear_1"}},
                                             {"bwd_mlp",
                                              {"input_norm_bwd", "mlp_bda_bwd", "fc2_bwd", "swiglu_bwd", "fc1_bwd"},
                                              ar,
                                              tp,
                                              {"norm_0", "linear_0", "activation_0", "linear_1"}},
                                             {"bwd_o_ar", o_bwd, ar, tp, {"norm_0", "linear_0"}},
                                             {"bwd_o_ag", o_bwd, ag, cp, {"norm_0", "linear_0"}},
                                             {"bwd_a_ag", {"attention_bwd"}, ag, cp, {"attn_0"}},
                                             {"bwd_a_rs", {"attention_bwd"}, rs, cp, {"attn_0"}},
                                             {"bwd_qkv_rs", qkv_bwd, rs, cp, {"rope_0", "linear_0"}},
                                             {"bwd_qkv_ar", qkv_bwd, ar, tp, {"rope_0", "linear_0"}},
                                         });
}

// The artifact names the memory-bound run "QKV post (q/k RMSNorm) + RoPE" rope_0 for Qwen3 as
// for Llama (docs/kareus.md section 2's table lists rope_0 for fwd_attn, fwd_qkv_ag, bwd_qkv_*),
// so --slots artifact keeps that launch point for Qwen3 too.
TEST(PartitionBuilder, QwenQkNormAndRopeRunIsTheRopeSlot) {
  const std::map<std::string, Partition> cp1 = by_key(make("qwen3-1.7b", 1, 8));
  EXPECT_EQ(slot_names(cp1.at("fwd_attn")),
            (std::vector<std::string>{"norm_0", "linear_0", "rope_0", "attn_0", "linear_1"}));
  EXPECT_EQ(slot_names(cp1.at("bwd_attn")),
            (std::vector<std::string>{"norm_0", "linear_0", "attn_0", "rope_0", "linear_1"}));
  const std::map<std::string, Partition> cp2 = by_key(make("qwen3-1.7b", 2, 4));
  EXPECT_EQ(slot_names(cp2.at("fwd_qkv_ag")), (std::vector<std::string>{"norm_0", "linear_0", "rope_0"}));
  EXPECT_EQ(slot_names(cp2.at("bwd_qkv_rs")), (std::vector<std::string>{"rope_0", "linear_0"}));
}

TEST(PartitionBuilder, SlotsStartAtTheirFirstOp) {
  const Partition fwd_attn = by_key(make("llama3.2-3b", 1, 8)).at("fwd_attn");
  // mlp_bda + input_norm form one memory-bound run; qkv, rope, attention, out_proj follow.
  const std::vector<std::size_t> first_ops = {0, 2, 3, 4, 5};
  ASSERT_EQ(fwd_attn.slots.size(), first_ops.size());
  for (std::size_t index = 0; index < first_ops.size(); ++index) {
    SCOPED_TRACE(fwd_attn.slots[index].name);
    EXPECT_EQ(fwd_attn.slots[index].first_op, first_ops[index]);
  }
  EXPECT_EQ(fwd_attn.find_slot("attn_0"), std::optional<std::size_t>(3));
  EXPECT_EQ(fwd_attn.find_slot("attn_1"), std::nullopt);
}

TEST(PartitionBuilder, EachPartitionOverlapsTheOtherNanobatchsCollective) {
  // In a steady-state layer, NB1's partition carries the collective NB0 just produced, and
  // NB0's carries NB1's collective of the previous segment.
  const std::vector<Partition> forward = layer_partitions(make("llama3.2-3b", 2, 4), Direction::kForward);
  ASSERT_EQ(forward.size(), 6u);
  const std::vector<std::string> collectives = {"mlp_all_reduce",  "kv_all_gather",   "kv_all_gather",
                                                "attn_all_reduce", "attn_all_reduce", "mlp_all_reduce"};
  for (std::size_t index = 0; index < forward.size(); ++index) {
    SCOPED_TRACE(forward[index].key);
    EXPECT_EQ(forward[index].nanobatch, static_cast<int>(index % 2));
    EXPECT_EQ(forward[index].collective->name, collectives[index]);
  }
}

TEST(BuildPartitions, StageHasTwoPartitionsPerSegmentAndEndsInTrails) {
  struct Row {
    int cp, tp, stage;
    Direction direction;
    int collectives_per_layer;
  };
  const Row rows[] = {
      {1, 8, 0, Direction::kForward, 2},
      {1, 8, 1, Direction::kBackward, 2},
      {2, 4, 0, Direction::kForward, 3},
      {2, 4, 1, Direction::kBackward, 4},
  };
  for (const Row& row : rows) {
    const workload::Workload workload = make("llama3.2-3b", row.cp, row.tp, {15, 13});
    const int layers = workload.stage_layers[row.stage];
    const bool forward = row.direction == Direction::kForward;
    SCOPED_TRACE(std::string(forward ? "forward" : "backward") + " cp " + std::to_string(row.cp) + " stage " +
                 std::to_string(row.stage));
    const std::vector<Partition> partitions = build_partitions(workload, row.stage, row.direction);
    const int segments = layers * row.collectives_per_layer + 1;
    ASSERT_EQ(partitions.size(), static_cast<std::size_t>(2 * segments));
    EXPECT_FALSE(partitions.front().collective.has_value());
    const std::string trail = forward ? "fwd_trail" : "bwd_trail";
    EXPECT_EQ(partitions[partitions.size() - 2].key, trail);
    EXPECT_EQ(partitions.back().key, trail);
    EXPECT_TRUE(partitions[partitions.size() - 2].collective.has_value());
    EXPECT_FALSE(partitions.back().collective.has_value());
    // The body repeats the steady-state layer's keys; only the first and the trails are not searched.
    const std::vector<Partition> layer = layer_partitions(workload, row.direction);
    for (std::size_t index = 0; index + 2 < partitions.size(); ++index) {
      SCOPED_TRACE(index);
      EXPECT_EQ(partitions[index].key, layer[index % layer.size()].key);
      EXPECT_EQ(partitions[index].nanobatch, static_cast<int>(index % 2));
      EXPECT_EQ(partitions[index].direction, row.direction);
      EXPECT_EQ(partitions[index].searchable(), index != 0);
    }
    EXPECT_FALSE(partitions[partitions.size() - 2].searchable());
    EXPECT_FALSE(partitions.back().searchable());
    // Forward walks layers up, backward down.
    EXPECT_EQ(partitions.front().layer, forward ? 0 : layers - 1);
  }
}

TEST(BuildPartitions, EveryComputeOpRunsOncePerNanobatch) {
  const workload::Workload workload = make("qwen3-1.7b", 2, 4, {15, 13});
  const workload::LayerGraph graph = workload::build_layer_graph(workload);
  std::size_t compute_per_layer = 0;
  for (const workload::Op& op : graph.backward) compute_per_layer += op.is_collective() ? 0 : 1;
  std::size_t ops[2] = {0, 0};
  for (const Partition& partition : build_partitions(workload, 1, Direction::kBackward)) {
    ops[partition.nanobatch] += partition.compute_ops.size();
  }
  EXPECT_EQ(ops[0], 13 * compute_per_layer);
  EXPECT_EQ(ops[1], 13 * compute_per_layer);
}

TEST(PartitionBuilder, OneNanobatchIsRejectedNamingTheFlag) {
  workload::Parallelism parallel;
  parallel.nanobatches = 1;
  const workload::Workload workload = workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
  for (Direction direction : {Direction::kForward, Direction::kBackward}) {
    try {
      (void)layer_partitions(workload, direction);
      ADD_FAILURE() << "expected InputError";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find("--nanobatches 1"), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW((void)build_partitions(workload, 0, Direction::kForward), InputError);
}

TEST(SearchableKeys, ForwardThenBackwardEachOnce) {
  EXPECT_EQ(searchable_keys(make("llama3.2-3b", 1, 8)),
            (std::vector<std::string>{"fwd_attn", "fwd_mlp", "bwd_mlp", "bwd_attn"}));
  EXPECT_EQ(searchable_keys(make("llama3.2-3b", 2, 4)),
            (std::vector<std::string>{"fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar", "fwd_mlp", "bwd_mlp",
                                      "bwd_o_ar", "bwd_o_ag", "bwd_a_ag", "bwd_a_rs", "bwd_qkv_rs", "bwd_qkv_ar"}));
}

TEST(RepresentativePartition, SharedKeyGivesNanobatchZeroUnknownKeyListsKeys) {
  const workload::Workload workload = make("llama3.2-3b", 1, 8);
  const Partition partition = representative_partition(workload, "bwd_attn");
  EXPECT_EQ(partition.key, "bwd_attn");
  EXPECT_EQ(partition.nanobatch, 0);
  EXPECT_EQ(partition.direction, Direction::kBackward);
  try {
    (void)representative_partition(workload, "fwd_trail");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("--partition fwd_trail"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("fwd_attn, fwd_mlp, bwd_mlp, bwd_attn"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace kareus::partition
