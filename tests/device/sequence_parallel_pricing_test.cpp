// Sequence parallelism's all-gathers and reduce-scatters on the emulated GPU: the ring model of
// the all-reduce, moving (n-1)/n of the tensor once where the all-reduce moves it 2(n-1)/n.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "kareus/device/emulator.h"
#include "kareus/device/kernel_model.h"
#include "kareus/partition/partition.h"
#include "kareus/workload/model.h"

namespace kareus::device {
namespace {

workload::Op layer_op(bool sequence_parallel, const std::string& name) {
  workload::Parallelism parallel;  // llama3.2-3b at TP 8, 16384 tokens per nanobatch: 96 MiB
  parallel.sequence_parallel = sequence_parallel;
  const workload::LayerGraph graph =
      workload::build_layer_graph(workload::make_workload(workload::load_model("llama3.2-3b"), parallel));
  for (const std::vector<workload::Op>* ops : {&graph.forward, &graph.backward}) {
    for (const workload::Op& op : *ops) {
      if (op.name == name) return op;
    }
  }
  throw std::logic_error("no op " + name);
}

// The number by hand, A100 preset at 12 CTAs and 1410 MHz: link 300 GB/s x 0.875 = 262.5 GB/s,
// CTAs 12 x 8 B x 1410 MHz = 135.36 GB/s, their p = 4 smooth minimum 133.0678 GB/s; the ring
// all-gather over 8 ranks moves 7/8 x (96 MiB + 20 MiB fill) = 106430464 bytes in 7 steps of
// 8 us: 106430464 / 133.0678e9 + 56e-6 = 0.85582 ms.
TEST(SequenceParallelPricing, AllGatherOfNinetySixMibAtTwelveCtasByHand) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  const workload::Op gather = layer_op(true, "attn_all_gather");
  ASSERT_EQ(gather.collective->kind, workload::CollectiveKind::kAllGather);
  EXPECT_NEAR(collective_kernel(gpu, gather, 12, 1410).time_s, 0.85582131e-3, 1e-10);
}

// At equal CTAs and clock an all-gather or reduce-scatter of a tensor takes half the time of
// the all-reduce of it, on the link at the same rate, and takes the same SMs: its energy is half.
TEST(SequenceParallelPricing, GatherAndScatterAreHalfAnAllReducesRingTraffic) {
  const workload::Op all_reduce = layer_op(false, "attn_all_reduce");
  for (const std::string gpu_name : {"a100-40gb", "h100-sxm"}) {
    const GpuSpec gpu = load_gpu(gpu_name);
    for (const char* name :
         {"attn_all_gather", "attn_reduce_scatter", "qkv_input_all_gather", "fc1_grad_reduce_scatter"}) {
      const workload::Op op = layer_op(true, name);
      ASSERT_DOUBLE_EQ(op.collective->bytes, all_reduce.collective->bytes);
      for (const int ctas : {3, 12, 24, gpu.sm_count}) {
        for (const int clock : {1005, static_cast<int>(gpu.clock_max_mhz)}) {
          SCOPED_TRACE(gpu_name + " " + name + " ctas " + std::to_string(ctas) + " at " + std::to_string(clock));
          const CollectiveRun half = collective_kernel(gpu, op, ctas, clock);
          const CollectiveRun whole = collective_kernel(gpu, all_reduce, ctas, clock);
          EXPECT_NEAR(half.time_s, whole.time_s / 2, 1e-12 * whole.time_s);
          EXPECT_NEAR(half.bus_bytes_per_s, whole.bus_bytes_per_s, 1e-9 * whole.bus_bytes_per_s);
          EXPECT_DOUBLE_EQ(half.sms, whole.sms);
          const PartitionRun alone = run_serial(gpu, {op}, clock, ctas);
          const PartitionRun reference = run_serial(gpu, {all_reduce}, clock, ctas);
          EXPECT_NEAR(alone.energy_j, reference.energy_j / 2, 1e-9 * reference.energy_j);
        }
      }
    }
  }
}

// A sequence-parallel partition measures on the emulator like any other: its collective (the
// other nanobatch's reduce-scatter) runs beside FC1..FC2 and ends no earlier than it would alone.
TEST(SequenceParallelPricing, PartitionOverlapsItsReduceScatter) {
  workload::Parallelism parallel;
  parallel.sequence_parallel = true;
  const workload::Workload workload = workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
  const GpuSpec gpu = load_gpu("a100-40gb");
  const partition::Partition mlp = partition::representative_partition(workload, "fwd_mlp_rs");
  ASSERT_EQ(mlp.collective->collective->kind, workload::CollectiveKind::kReduceScatter);
  const PartitionRun run = run_partition(gpu, mlp, {1410, 12, "linear_0"});
  const double alone_s = collective_kernel(gpu, *mlp.collective, 12, 1410).time_s;
  EXPECT_GE(run.comm_end_s - run.comm_start_s, alone_s);
  std::vector<workload::Op> serial = mlp.compute_ops;
  serial.push_back(*mlp.collective);
  EXPECT_LT(run.time_s, run_serial(gpu, serial, 1410, 12).time_s);
}

}  // namespace
}  // namespace kareus::device
