#include "kareus/device/emulator.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/device/kernel_model.h"
#include "kareus/partition/partition.h"
#include "kareus/workload/model.h"

namespace kareus::device {
namespace {

workload::Workload llama_cp1_tp8() {
  workload::Parallelism parallel;
  parallel.layers_per_stage = {15, 13};
  return workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
}

workload::Op tp8_all_reduce_96mib() {
  const workload::LayerGraph graph = workload::build_layer_graph(llama_cp1_tp8());
  for (const workload::Op& op : graph.forward) {
    if (op.name == "attn_all_reduce") return op;
  }
  throw std::logic_error("no all-reduce");
}

TEST(Emulator, AllReduceFlattensBeyondAKneeInCtaCount) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  const workload::Op all_reduce = tp8_all_reduce_96mib();
  ASSERT_DOUBLE_EQ(all_reduce.collective->bytes, 96.0 * 1024 * 1024);
  const double asymptote = collective_kernel(gpu, all_reduce, gpu.sm_count, gpu.clock_max_mhz).time_s;
  int knee = 0;
  double previous = 1e9;
  for (int ctas = 1; ctas <= gpu.sm_count; ++ctas) {
    const double time = collective_kernel(gpu, all_reduce, ctas, gpu.clock_max_mhz).time_s;
    EXPECT_LE(time, previous) << ctas;  // more CTAs never hurt the collective itself
    previous = time;
    if (knee == 0 && time <= 1.05 * asymptote) knee = ctas;
  }
  EXPECT_GE(knee, 15);
  EXPECT_LE(knee, 40);
  // Below the knee the collective is CTA-bound: 3 CTAs are several times slower.
  EXPECT_GT(collective_kernel(gpu, all_reduce, 3, gpu.clock_max_mhz).time_s, 4 * asymptote);
  // The knee moves with the clock: per-CTA copy rate scales with f.
  EXPECT_GT(collective_kernel(gpu, all_reduce, 12, 900).time_s,
            collective_kernel(gpu, all_reduce, 12, 1410).time_s * 1.3);
}

TEST(Emulator, MemoryBoundKernelEnergyOptimalClockIsWellBelowMax) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  const workload::LayerGraph graph = workload::build_layer_graph(llama_cp1_tp8());
  const workload::Op& norm = graph.forward.front();
  ASSERT_EQ(norm.kind, workload::OpKind::kNorm);
  int best_clock = 0;
  double best_energy = 1e30;
  for (int clock : gpu.supported_clocks_mhz()) {
    const KernelRun run = compute_kernel(gpu, norm, clock, full_resources(gpu));
    const double energy = power_w(gpu, clock, &run, nullptr, 0) * run.time_s;
    if (energy < best_energy) {
      best_energy = energy;
      best_clock = clock;
    }
  }
  EXPECT_LT(best_clock, 0.75 * gpu.clock_max_mhz);
  // A GEMM, by contrast, is compute-bound: its time scales with 1/f.
  const workload::Op& qkv = graph.forward[1];
  ASSERT_EQ(qkv.name, "qkv");
  const double slow = compute_kernel(gpu, qkv, 705, full_resources(gpu)).time_s;
  const double fast = compute_kernel(gpu, qkv, 1410, full_resources(gpu)).time_s;
  EXPECT_NEAR(slow / fast, 2.0, 0.1);
}

TEST(Emulator, RingAttentionStepsWaitIdleAtStaticPower) {
  // Each ring step adds cp_ring_step_us of waiting to the attention kernel, at static power: the
  // same work in a longer window, so its energy grows by exactly static power x the wait.
  GpuSpec gpu = load_gpu("a100-40gb");
  gpu.cp_ring_step_us = 100;
  workload::Op attention;
  for (const workload::Op& op : workload::build_layer_graph(llama_cp1_tp8()).forward) {
    if (op.kind == workload::OpKind::kAttention) attention = op;
  }
  ASSERT_EQ(attention.ring_steps, 0);
  workload::Op ring = attention;
  ring.ring_steps = 2;
  for (const int clock : {900, 1410}) {
    const KernelRun plain = compute_kernel(gpu, attention, clock, full_resources(gpu));
    const KernelRun stepped = compute_kernel(gpu, ring, clock, full_resources(gpu));
    EXPECT_NEAR(stepped.time_s - plain.time_s, 200e-6, 1e-12);
    const double plain_j = power_w(gpu, clock, &plain, nullptr, 0) * plain.time_s;
    const double stepped_j = power_w(gpu, clock, &stepped, nullptr, 0) * stepped.time_s;
    EXPECT_NEAR(stepped_j - plain_j, gpu.static_power_w * 200e-6, 1e-9);
  }
}

TEST(Emulator, LockingAtTheAverageClockNeverUsesMoreEnergy) {
  // Theorem 1: same cycles, same time; convex dynamic power => the locked clock wins.
  const GpuSpec gpu = load_gpu("a100-40gb");
  const workload::LayerGraph graph = workload::build_layer_graph(llama_cp1_tp8());
  const workload::Op& fc1 = *std::find_if(graph.forward.begin(), graph.forward.end(),
                                          [](const workload::Op& op) { return op.name == "fc1"; });
  // Per-cycle activity and HBM traffic of a compute-bound kernel do not depend on the clock.
  const KernelRun reference = compute_kernel(gpu, fc1, gpu.clock_max_mhz, full_resources(gpu));
  auto power_at = [&](double clock) {
    KernelRun run = reference;
    run.hbm_bytes_per_s = reference.hbm_bytes_per_s * clock / gpu.clock_max_mhz;
    return power_w(gpu, clock, &run, nullptr, 0);
  };
  std::mt19937_64 random(7);
  std::uniform_int_distribution<int> pieces(2, 8);
  std::uniform_real_distribution<double> clock(gpu.clock_min_mhz, gpu.clock_max_mhz);
  std::uniform_real_distribution<double> cycles(1e6, 1e9);
  for (int trial = 0; trial < 1000; ++trial) {
    double total_cycles = 0, total_time = 0, fluctuating_energy = 0;
    for (int piece = pieces(random); piece > 0; --piece) {
      const double f_mhz = clock(random);
      const double piece_cycles = cycles(random);
      const double time_s = piece_cycles / (f_mhz * 1e6);
      total_cycles += piece_cycles;
      total_time += time_s;
      fluctuating_energy += power_at(f_mhz) * time_s;
    }
    const double average_mhz = total_cycles / total_time / 1e6;
    const double locked_energy = power_at(average_mhz) * total_time;
    ASSERT_LE(locked_energy, fluctuating_energy * (1 + 1e-12)) << "trial " << trial;
  }
}

TEST(Emulator, EnergyIsTheIntegralOfThePowerTimeline) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  for (const partition::Partition& partition : partition::layer_partitions(llama_cp1_tp8(), Direction::kForward)) {
    const partition::KnobConfig config{1200, 12, partition.slots[1].name};
    const PartitionRun run = run_partition(gpu, partition, config);
    double energy = 0;
    double covered = 0;
    for (const PowerInterval& interval : run.timeline) {
      ASSERT_GE(interval.end_s, interval.start_s);
      energy += interval.power_w * (interval.end_s - interval.start_s);
      covered += interval.end_s - interval.start_s;
    }
    EXPECT_NEAR(energy, run.energy_j, 1e-9 * run.energy_j);
    EXPECT_NEAR(covered, run.time_s, 1e-12);
    EXPECT_NEAR(run.time_s, std::max(run.compute_end_s, run.comm_end_s), 1e-12);
  }
}

TEST(Emulator, OverlapBeatsComputeThenCommunicateAndMoreCtasSlowCompute) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  const partition::Partition partition = partition::representative_partition(llama_cp1_tp8(), "fwd_mlp");
  ASSERT_TRUE(partition.collective.has_value());
  const PartitionRun overlapped = run_partition(gpu, partition, {1410, 24, "norm_0"});
  std::vector<workload::Op> serial = partition.compute_ops;
  serial.push_back(*partition.collective);
  const PartitionRun sequential = run_serial(gpu, serial, 1410, 24);
  EXPECT_LT(overlapped.time_s, 0.9 * sequential.time_s);
  double previous_compute = 0;
  for (int ctas : {3, 12, 24, 48}) {
    const PartitionRun run = run_partition(gpu, partition, {1410, ctas, "norm_0"});
    EXPECT_GT(run.compute_end_s, previous_compute) << ctas;
    previous_compute = run.compute_end_s;
  }
}

TEST(Emulator, HbmIsSharedInProportionToDemandOnlyWhenSaturated) {
  GpuSpec gpu = load_gpu("a100-40gb");
  gpu.power_limit_w = 1e4;  // no throttling: times follow from bandwidth and FLOPs alone
  gpu.partition_sync_us = 0;
  gpu.comm_overlap_slowdown = 0;
  const workload::Op all_reduce = tp8_all_reduce_96mib();
  const CollectiveRun comm = collective_kernel(gpu, all_reduce, 24, 1410);
  const double bandwidth = full_resources(gpu).hbm_bytes_per_s;
  const ComputeResources beside{gpu.sm_count - 24.0, bandwidth};
  auto run_beside = [&](const workload::Op& op) {
    partition::Partition partition;
    partition.key = "test";
    partition.compute_ops = {op};
    partition.collective = all_reduce;
    partition.slots = {{"norm_0", 0}};
    return run_partition(gpu, partition, {1410, 24, "norm_0"});
  };
  // A streaming op (200 MB) wants all of HBM; beside the collective's 3 bytes per bus byte the
  // demand exceeds it, so both slow, and what each gets adds up to the bandwidth.
  workload::Op stream;
  stream.name = "swiglu";
  stream.kind = workload::OpKind::kElementwise;
  stream.flops = 1e8;
  stream.bytes_read = 1.5e8;
  stream.bytes_written = 0.5e8;
  ASSERT_GT(compute_kernel(gpu, stream, 1410, beside).hbm_bytes_per_s + comm.hbm_bytes_per_s, bandwidth);
  const PartitionRun shared = run_beside(stream);
  const double op_s = shared.compute_end_s;
  ASSERT_LT(op_s, shared.comm_end_s);
  EXPECT_GT(op_s, compute_kernel(gpu, stream, 1410, beside).time_s);
  // The collective ran op_s at a share of its rate, then alone: comm_end = op_s x share + rest.
  const double comm_share = (op_s + comm.time_s - shared.comm_end_s) / op_s;
  EXPECT_NEAR(2e8 / op_s + comm_share * comm.hbm_bytes_per_s, bandwidth, 1e-6 * bandwidth);
  // A GEMM beside it draws little HBM: it runs on the SMs left, the collective at its own rate.
  workload::Op gemm;
  gemm.name = "fc1";
  gemm.kind = workload::OpKind::kGemm;
  gemm.gemm = {8192, 2048, 3072};
  gemm.flops = 2 * 8192.0 * 2048 * 3072;
  gemm.bytes_read = (8192.0 * 3072 + 3072.0 * 2048) * 2;
  gemm.bytes_written = 8192.0 * 2048 * 2;
  ASSERT_LT(compute_kernel(gpu, gemm, 1410, beside).hbm_bytes_per_s + comm.hbm_bytes_per_s, bandwidth);
  const PartitionRun apart = run_beside(gemm);
  ASSERT_LT(apart.compute_end_s, apart.comm_end_s);
  EXPECT_NEAR(apart.compute_end_s, compute_kernel(gpu, gemm, 1410, beside).time_s, 1e-12);
  EXPECT_NEAR(apart.comm_end_s, comm.time_s, 1e-12);
}

TEST(Emulator, ASlowedCollectiveMovesItsBytesOverTheLinkOnce) {
  // Power only from the link: the energy above static is the collective's bus bytes at the
  // link's energy per byte, however long sharing the SMs (slowdown) or HBM (a streaming op)
  // stretches it.
  GpuSpec gpu = load_gpu("a100-40gb");
  gpu.power_limit_w = 1e4;
  gpu.partition_sync_us = 0;
  gpu.partition_host_us = 0;
  gpu.sm_dynamic_power_w = 0;
  gpu.hbm_power_w_per_tbps = 0;
  const workload::Op all_reduce = tp8_all_reduce_96mib();
  const CollectiveRun alone = collective_kernel(gpu, all_reduce, 24, 1410);
  const double link_energy_j =
      gpu.link_power_w * alone.bus_bytes_per_s * alone.time_s / (gpu.link_bandwidth_gbps * 1e9);
  workload::Op stream;  // wants all of HBM: the collective's share falls below 1
  stream.name = "swiglu";
  stream.kind = workload::OpKind::kElementwise;
  stream.flops = 1e8;
  stream.bytes_read = 1.5e8;
  stream.bytes_written = 0.5e8;
  for (const double slowdown : {0.0, 0.5}) {
    gpu.comm_overlap_slowdown = slowdown;
    partition::Partition partition;
    partition.key = "test";
    partition.compute_ops = {stream, stream};
    partition.collective = all_reduce;
    partition.slots = {{"norm_0", 0}};
    const PartitionRun run = run_partition(gpu, partition, {1410, 24, "norm_0"});
    ASSERT_GT(run.comm_end_s, alone.time_s * (1 + slowdown / 4)) << slowdown;  // it was slowed
    EXPECT_NEAR(run.energy_j - gpu.static_power_w * run.time_s, link_energy_j, 1e-9 * link_energy_j) << slowdown;
  }
}

TEST(Emulator, MeasurementIsSeededAndNoisyNearTheTruth) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  const partition::Partition partition = partition::representative_partition(llama_cp1_tp8(), "fwd_attn");
  const partition::KnobConfig config{1200, 12, "linear_0"};
  EmulatedDevice first(gpu, {true, 42, 5});
  EmulatedDevice second(gpu, {true, 42, 5});
  EmulatedDevice exact(gpu, {false, 42, 5});
  const Measurement a = first.measure(partition, config);
  const Measurement b = second.measure(partition, config);
  const Measurement truth = exact.measure(partition, config);
  EXPECT_EQ(a.time_s, b.time_s);
  EXPECT_EQ(a.energy_j, b.energy_j);
  EXPECT_NE(a.time_s, truth.time_s);
  EXPECT_NEAR(a.time_s / truth.time_s, 1, 0.05);
  EXPECT_NEAR(a.energy_j / truth.energy_j, 1, 0.08);
}

// The noise's distribution, from the preset and the counter model alone (no library's numbers):
// time x (1 + 0.01 N), and power x (counted window energy / true window energy) x (1 + 0.015 N),
// where both window ends are read up to one 100 ms counter period late (a triangular skew of
// standard deviation 0.1 s / sqrt(6) over the 5 s window) and the 1 mJ rounding is ~1e-6 of
// the window's energy. Repeats of one config draw fresh noise, so 4000 of them estimate each
// factor's mean and standard deviation; the bounds are 4 standard errors.
TEST(Emulator, NoiseHasThePresetsSpread) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  ASSERT_DOUBLE_EQ(gpu.noise_time_fraction, 0.01);
  ASSERT_DOUBLE_EQ(gpu.noise_energy_fraction, 0.015);
  ASSERT_DOUBLE_EQ(gpu.energy_counter_period_ms, 100);
  const partition::Partition partition = partition::representative_partition(llama_cp1_tp8(), "fwd_attn");
  const partition::KnobConfig config{1200, 12, "linear_0"};
  const Measurement truth = EmulatedDevice(gpu, {false, 42, 5}).measure(partition, config);
  EmulatedDevice noisy(gpu, {true, 42, 5});
  constexpr int kRepeats = 4000;
  double time_sum = 0, time_squares = 0, power_sum = 0, power_squares = 0, cross = 0;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    const Measurement m = noisy.measure(partition, config);
    const double time_factor = m.time_s / truth.time_s;
    const double power_factor = (m.energy_j / m.time_s) / (truth.energy_j / truth.time_s);
    time_sum += time_factor;
    time_squares += time_factor * time_factor;
    power_sum += power_factor;
    power_squares += power_factor * power_factor;
    cross += time_factor * power_factor;
  }
  const double time_mean = time_sum / kRepeats, power_mean = power_sum / kRepeats;
  const double time_sd = std::sqrt(time_squares / kRepeats - time_mean * time_mean);
  const double power_sd = std::sqrt(power_squares / kRepeats - power_mean * power_mean);
  const double expected_power_sd = std::sqrt(0.015 * 0.015 + std::pow(0.1 / std::sqrt(6.0) / 5, 2));  // 0.0171
  EXPECT_NEAR(time_mean, 1, 4 * 0.01 / std::sqrt(kRepeats));
  EXPECT_NEAR(power_mean, 1, 4 * expected_power_sd / std::sqrt(kRepeats));
  // The standard error of a standard deviation is about sd / sqrt(2 n): 1.1% here.
  EXPECT_NEAR(time_sd / 0.01, 1, 4 / std::sqrt(2.0 * kRepeats));
  EXPECT_NEAR(power_sd / expected_power_sd, 1, 4 / std::sqrt(2.0 * kRepeats));
  // Time and power noise are independent draws.
  const double correlation = (cross / kRepeats - time_mean * power_mean) / (time_sd * power_sd);
  EXPECT_NEAR(correlation, 0, 4 / std::sqrt(kRepeats));
}

TEST(Emulator, RejectsConfigsTheGpuCannotRun) {
  const GpuSpec gpu = load_gpu("a100-40gb");
  EmulatedDevice device(gpu, {});
  const partition::Partition partition = partition::representative_partition(llama_cp1_tp8(), "fwd_attn");
  struct Case {
    partition::KnobConfig config;
    std::string message;
  };
  const Case cases[] = {
      {{1405, 12, "norm_0"}, "freq_mhz 1405: a100-40gb supports 210..1410 MHz in 15 MHz steps"},
      {{1410, 109, "norm_0"}, "partition fwd_attn on a100-40gb: ctas 109 is outside 1..108 (one CTA per SM)"},
      {{1410, 12, "linear_7"}, "slot \"linear_7\" is not a slot of partition fwd_attn"},
  };
  for (const Case& row : cases) {
    SCOPED_TRACE(row.message);
    try {
      (void)device.measure(partition, row.config);
      FAIL() << "expected InputError";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(row.message), std::string::npos) << error.what();
    }
  }
}

}  // namespace
}  // namespace kareus::device

namespace kareus::device {
namespace {

TEST(Emulator, PowerLimitThrottlesTheClockOfHotKernelsOnly) {
  GpuSpec gpu = load_gpu("a100-40gb");
  gpu.power_limit_w = 250;
  const partition::Partition partition = partition::representative_partition(llama_cp1_tp8(), "fwd_mlp");
  const PartitionRun run = run_partition(gpu, partition, {1410, 12, "norm_0"});
  bool throttled_gemm = false;
  bool full_speed_norm = false;
  for (const PowerInterval& interval : run.timeline) {
    EXPECT_LE(interval.power_w, gpu.power_limit_w + 1e-9) << interval.compute_op;
    if (interval.compute_op == "fc1" && interval.freq_mhz < 1410) throttled_gemm = true;
    if (interval.compute_op == "mlp_norm" && interval.freq_mhz == 1410) full_speed_norm = true;
  }
  EXPECT_TRUE(throttled_gemm);   // the clock fluctuates: down for GEMMs...
  EXPECT_TRUE(full_speed_norm);  // ...back up for memory-bound work
  const PartitionRun unlimited = run_partition(load_gpu("a100-40gb"), partition, {1410, 12, "norm_0"});
  EXPECT_GT(run.time_s, unlimited.time_s);
}

}  // namespace
}  // namespace kareus::device
