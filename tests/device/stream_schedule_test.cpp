// The stream/event schedule of partitions: where the collective's launch event is recorded,
// checked against the slots the partition builder makes.
#include "kareus/device/stream_schedule.h"

#include <gtest/gtest.h>

#include "../common/workloads.h"
#include "kareus/common/error.h"
#include "kareus/workload/model.h"

namespace kareus::device {
namespace {

using test_common::llama_3b_15_13;

TEST(StreamSchedule, FwdAttnLaunchesBeforeEachSlotsFirstOp) {
  const partition::Partition fwd_attn = partition::representative_partition(llama_3b_15_13(1, 8), "fwd_attn");
  ASSERT_TRUE(fwd_attn.collective);
  const std::size_t ops = fwd_attn.compute_ops.size();
  for (const partition::Slot& slot : fwd_attn.slots) {
    SCOPED_TRACE(slot.name);
    const StreamSchedule schedule = schedule_partition(fwd_attn, {1410, 12, slot.name});
    EXPECT_TRUE(schedule.has_collective);
    EXPECT_EQ(schedule.launch_after_ops, slot.first_op);
    ASSERT_EQ(schedule.steps.size(), ops + 2);
    // Ops 0..first_op-1, the launch, the remaining ops in order, then the join.
    EXPECT_EQ(schedule.steps[slot.first_op], (StreamStep{StreamStepKind::kLaunchCollective, 0}));
    EXPECT_EQ(schedule.steps.back(), (StreamStep{StreamStepKind::kJoin, 0}));
    std::size_t next_op = 0;
    for (const StreamStep& step : schedule.steps) {
      if (step.kind == StreamStepKind::kComputeOp) {
        EXPECT_EQ(step.op_index, next_op++);
      }
    }
    EXPECT_EQ(next_op, ops);
  }
}

TEST(StreamSchedule, NamedSlotsOfFwdAttnGiveHandCheckedOrder) {
  // fwd_attn (CP 1): bda, norm, qkv, rope, attention, out_proj; the builder names the memory-bound
  // run at the start norm_0, the QKV linear linear_0, then rope_0 and attn_0.
  const partition::Partition fwd_attn = partition::representative_partition(llama_3b_15_13(1, 8), "fwd_attn");
  const std::size_t linear_0 = fwd_attn.slots[*fwd_attn.find_slot("linear_0")].first_op;
  EXPECT_EQ(fwd_attn.compute_ops[linear_0].kind, workload::OpKind::kGemm);
  const StreamSchedule at_start = schedule_partition(fwd_attn, {1410, 12, "norm_0"});
  EXPECT_EQ(at_start.launch_after_ops, 0u);
  EXPECT_EQ(describe(at_start).substr(0, 14), "launch, op 0, ");
  const StreamSchedule at_attention = schedule_partition(fwd_attn, {1410, 12, "attn_0"});
  const std::size_t attention = at_attention.launch_after_ops;
  EXPECT_EQ(fwd_attn.compute_ops[attention].kind, workload::OpKind::kAttention);
  EXPECT_EQ(fwd_attn.compute_ops[attention - 1].kind, workload::OpKind::kRope);
}

TEST(StreamSchedule, EveryPartitionOfACpWorkloadSchedulesEverySlot) {
  const workload::Workload workload = llama_3b_15_13(2, 4);
  for (const Direction direction : {Direction::kForward, Direction::kBackward}) {
    for (const partition::Partition& partition : partition::layer_partitions(workload, direction)) {
      SCOPED_TRACE(partition.key);
      if (!partition.collective) continue;
      for (const partition::Slot& slot : partition.slots) {
        const StreamSchedule schedule = schedule_partition(partition, {1410, 4, slot.name});
        EXPECT_EQ(schedule.launch_after_ops, slot.first_op);
        EXPECT_EQ(schedule.steps.size(), partition.compute_ops.size() + 2);
      }
    }
  }
}

TEST(StreamSchedule, NoCollectiveMeansComputeOnly) {
  partition::Partition kernel;
  kernel.key = "kernel:qkv";
  kernel.compute_ops.resize(2);
  const StreamSchedule schedule = schedule_partition(kernel, {1410, 0, ""});
  EXPECT_FALSE(schedule.has_collective);
  EXPECT_EQ(describe(schedule), "op 0, op 1");
}

TEST(StreamSchedule, CollectiveOnlyPartitionLaunchesThenJoins) {
  partition::Partition collective;
  collective.key = "collective:attn_all_reduce";
  collective.collective = workload::Op{};
  collective.slots.push_back({"start", 0});
  EXPECT_EQ(describe(schedule_partition(collective, {1410, 8, "start"})), "launch, join");
}

TEST(StreamSchedule, UnknownSlotNamesTheSlots) {
  const partition::Partition fwd_mlp = partition::representative_partition(llama_3b_15_13(1, 8), "fwd_mlp");
  try {
    (void)schedule_partition(fwd_mlp, {1410, 12, "attn_0"});
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("slot \"attn_0\" is not a slot of partition fwd_mlp (slots: norm_0"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace kareus::device
