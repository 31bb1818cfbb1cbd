#include "kareus/device/emulator.h"

#include <algorithm>
#include <functional>
#include <random>
#include <string_view>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/partition/comm_fit.h"

namespace kareus::device {
namespace {

/// The highest clock <= `freq_mhz` (in the GPU's steps) at which `power_at` stays within the
/// power limit: what the GPU's power management does to a locked clock under load.
double throttled_clock(const GpuSpec& gpu, double freq_mhz, const std::function<double(double)>& power_at) {
  double clock = freq_mhz;
  while (clock - gpu.clock_step_mhz >= gpu.clock_min_mhz && power_at(clock) > gpu.power_limit_w) {
    clock -= gpu.clock_step_mhz;
  }
  return clock;
}

class TimelineBuilder {
 public:
  void add(double duration_s, double power_w, double freq_mhz, std::string op, bool comm_active) {
    run_.timeline.push_back({now_, now_ + duration_s, power_w, freq_mhz, std::move(op), comm_active});
    run_.energy_j += power_w * duration_s;
    now_ += duration_s;
  }
  [[nodiscard]] double now() const { return now_; }
  PartitionRun finish() {
    run_.time_s = now_;
    return std::move(run_);
  }
  PartitionRun& run() { return run_; }

 private:
  double now_ = 0;
  PartitionRun run_;
};

// Modelling choices, not hardware (a preset has no say in them):
// Multiplicative measurement noise is 1 + sigma x N(0, 1); this floor keeps a measurement
// positive for any sigma the preset allows (<= 0.5), i.e. beyond 2 sigma at most.
constexpr double kNoiseFactorFloor = 0.5;

/// A compute op and a collective running together: the op on the SMs the collective leaves,
/// both drawing on HBM. When their demands (each at the rate it would run alone) exceed the
/// bandwidth, a saturated HBM serves them in proportion to demand, not the collective first;
/// the collective's copy rate falls with its share, and beside compute its loads and stores
/// also contend with the op's in L2 (comm_overlap_slowdown).
struct SharedRun {
  KernelRun compute;
  CollectiveRun comm;  ///< slowed: the same bytes over its longer time, so its traffic rates fall
};

SharedRun hbm_share(const GpuSpec& gpu, const workload::Op& op, double clock, const ComputeResources& resources,
                    const CollectiveRun& comm) {
  SharedRun run{compute_kernel(gpu, op, clock, resources), comm};
  const double demand = run.compute.hbm_bytes_per_s + comm.hbm_bytes_per_s;
  double comm_share = 1;
  if (demand > resources.hbm_bytes_per_s) {
    const double compute_bandwidth = resources.hbm_bytes_per_s * run.compute.hbm_bytes_per_s / demand;
    run.compute = compute_kernel(gpu, op, clock, {resources.sms, compute_bandwidth});
    comm_share = std::min(1.0, (resources.hbm_bytes_per_s - run.compute.hbm_bytes_per_s) / comm.hbm_bytes_per_s);
  }
  const double slowdown = (1 + gpu.comm_overlap_slowdown) / comm_share;
  run.comm.time_s = comm.time_s * slowdown;
  run.comm.bus_bytes_per_s = comm.bus_bytes_per_s / slowdown;
  run.comm.hbm_bytes_per_s = comm.hbm_bytes_per_s / slowdown;
  return run;
}

// FNV-1a, 64 bit: a hash of text that is the same with every standard library (std::hash is
// not), so a seeded emulator gives the same noise everywhere.
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char character : text) {
    hash ^= static_cast<unsigned char>(character);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::uint64_t mix(std::uint64_t value) {  // splitmix64 finalizer
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

}  // namespace

void validate_config(const GpuSpec& gpu, const partition::Partition& partition, const partition::KnobConfig& config) {
  require_supported_clock(gpu, config.freq_mhz, "freq_mhz");
  if (!partition.collective) return;
  partition::require_ctas_within(config.ctas, gpu.sm_count, fmt::format("partition {} on {}", partition.key, gpu.name));
  if (!partition.find_slot(config.slot)) {
    std::vector<std::string> names;
    for (const partition::Slot& slot : partition.slots) names.push_back(slot.name);
    throw InputError(fmt::format("slot \"{}\" is not a slot of partition {} (slots: {})", config.slot, partition.key,
                                 fmt::join(names, ", ")));
  }
}

PartitionRun run_partition(const GpuSpec& gpu, const partition::Partition& partition,
                           const partition::KnobConfig& config) {
  const double freq = config.freq_mhz;
  const ComputeResources full = full_resources(gpu);
  TimelineBuilder timeline;
  if (!partition.collective) return run_serial(gpu, partition.compute_ops, config.freq_mhz, 0);

  // Two streams, advanced event by event: the next event is the end of the current compute op
  // or of the collective. While both run, compute has the SMs the collective's CTAs leave, and
  // the two share HBM (hbm_share).
  const std::size_t slot_op = partition.slots.at(*partition.find_slot(config.slot)).first_op;
  const CollectiveRun comm = collective_kernel(gpu, *partition.collective, config.ctas, freq);
  const double shared_sms = std::max(full.sms - comm.sms, 1.0);
  const std::vector<workload::Op>& ops = partition.compute_ops;
  // The streams meet at the partition's start (join, event wait, the collective's launch and
  // the nanobatch's dispatch), idle at static power: a fitted cost (bench/RESULTS.md).
  timeline.add(gpu.partition_sync_us * 1e-6, gpu.static_power_w, freq, "", false);
  std::size_t op_index = 0;
  double op_remaining = 1;    // fraction of the current compute op left
  double comm_remaining = 1;  // fraction of the collective left
  bool comm_started = false;
  constexpr double kDone = 1e-12;
  while (op_index < ops.size() || comm_remaining > kDone) {
    if (!comm_started && (op_index == slot_op || op_index == ops.size())) {
      comm_started = true;
      timeline.run().comm_start_s = timeline.now();
    }
    const bool computing = op_index < ops.size();
    const bool communicating = comm_started && comm_remaining > kDone;
    if (!computing) {
      const double duration = comm_remaining * comm.time_s;
      timeline.add(duration, power_w(gpu, freq, nullptr, &comm, config.ctas), freq, "", true);
      comm_remaining = 0;
      timeline.run().comm_end_s = timeline.now();
      break;
    }
    const workload::Op& op = ops[op_index];
    auto run_at = [&](double clock) {
      if (!communicating) return SharedRun{compute_kernel(gpu, op, clock, full), {}};
      return hbm_share(gpu, op, clock, {shared_sms, full.hbm_bytes_per_s}, comm);
    };
    // Power from the slowed collective: its bytes spread over its longer time.
    auto power_of = [&](double clock, const SharedRun& run) {
      return power_w(gpu, clock, &run.compute, communicating ? &run.comm : nullptr, config.ctas);
    };
    const double clock = throttled_clock(gpu, freq, [&](double at) { return power_of(at, run_at(at)); });
    const SharedRun both = run_at(clock);
    const KernelRun& kernel = both.compute;
    const double comm_time_s = both.comm.time_s;
    double duration = op_remaining * kernel.time_s;
    if (communicating) duration = std::min(duration, comm_remaining * comm_time_s);
    timeline.add(duration, power_of(clock, both), clock, op.name, communicating);
    op_remaining -= duration / kernel.time_s;
    if (communicating) {
      comm_remaining -= duration / comm_time_s;
      if (comm_remaining <= kDone) timeline.run().comm_end_s = timeline.now();
    }
    if (op_remaining <= kDone) {
      ++op_index;
      op_remaining = 1;
      if (op_index == ops.size()) timeline.run().compute_end_s = timeline.now();
    }
  }
  // The host issues a partition (its ops, the collective's call, the stream events) from Python
  // in partition_host_us; a shorter partition leaves the GPU waiting, idle at static power with
  // the clock held. Per partition, a fitted stand-in: the executor's host may run ahead across an
  // instruction's partitions, a form that fits the real runs worse (bench/RESULTS.md).
  if (timeline.now() < gpu.partition_host_us * 1e-6) {
    timeline.add(gpu.partition_host_us * 1e-6 - timeline.now(), gpu.static_power_w, freq, "", false);
  }
  return timeline.finish();
}

PartitionRun run_serial(const GpuSpec& gpu, const std::vector<workload::Op>& ops, int freq_mhz, int ctas) {
  const ComputeResources full = full_resources(gpu);
  TimelineBuilder timeline;
  for (const workload::Op& op : ops) {
    if (op.is_collective()) {
      const CollectiveRun comm = collective_kernel(gpu, op, ctas, freq_mhz);
      timeline.add(comm.time_s, power_w(gpu, freq_mhz, nullptr, &comm, ctas), freq_mhz, "", true);
      continue;
    }
    auto power_at = [&](double clock) {
      const KernelRun kernel = compute_kernel(gpu, op, clock, full);
      return power_w(gpu, clock, &kernel, nullptr, 0);
    };
    const double clock = throttled_clock(gpu, freq_mhz, power_at);
    const KernelRun kernel = compute_kernel(gpu, op, clock, full);
    timeline.add(kernel.time_s, power_w(gpu, clock, &kernel, nullptr, 0), clock, op.name, false);
  }
  timeline.run().compute_end_s = timeline.now();
  return timeline.finish();
}

EmulatedDevice::EmulatedDevice(GpuSpec gpu, EmulatorOptions options) : gpu_(std::move(gpu)), options_(options) {}

Measurement EmulatedDevice::measure(const partition::Partition& partition, const partition::KnobConfig& config) {
  validate_config(gpu_, partition, config);
  return with_noise(run_partition(gpu_, partition, config), partition.key, partition.nanobatch, config);
}

Measurement EmulatedDevice::measure_serial(const SerialWork& work, int freq_mhz) {
  require_supported_clock(gpu_, freq_mhz, "freq_mhz");
  return with_noise(run_serial(gpu_, work.ops, freq_mhz, work.ctas), work.key, 0,
                    {freq_mhz, work.ctas, std::string(kSerialSlot)});
}

Measurement EmulatedDevice::with_noise(const PartitionRun& run, const std::string& key, int nanobatch,
                                       const partition::KnobConfig& config) {
  Measurement measurement{run.time_s, run.energy_j};
  if (!options_.noise) return measurement;
  // Seeded per (seed, work, config): a first measurement repeats exactly, so a search is
  // reproducible, while different configs see independent noise. Repeats of the same config
  // on this device draw fresh noise (so re-measuring and averaging helps, as on a GPU).
  std::uint64_t state = mix(options_.seed);
  for (const std::string& text : {key, config.slot}) state = mix(state ^ fnv1a(text));
  state = mix(state ^ static_cast<std::uint64_t>(nanobatch));
  state = mix(state ^ (static_cast<std::uint64_t>(config.freq_mhz) << 20) ^ static_cast<std::uint64_t>(config.ctas));
  if (const int repeat = repetitions_[state]++; repeat > 0) state = mix(state ^ static_cast<std::uint64_t>(repeat));
  std::mt19937_64 random(state);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uniform(0, 1);
  measurement.time_s *= std::max(kNoiseFactorFloor, 1 + gpu_.noise_time_fraction * normal(random));
  // The energy counter updates every period: both ends of the window are read up to one
  // period late, and the reading is in whole counter units.
  const double average_power_w = run.energy_j / run.time_s;
  const double counter_skew_s = (uniform(random) - uniform(random)) * gpu_.energy_counter_period_ms * 1e-3;
  const double window_energy_j = average_power_w * (options_.window_s + counter_skew_s);
  const double resolution_j = gpu_.energy_counter_resolution_mj * 1e-3;
  const double counted_j = std::floor(window_energy_j / resolution_j) * resolution_j;
  measurement.energy_j = counted_j / options_.window_s * measurement.time_s *
                         std::max(kNoiseFactorFloor, 1 + gpu_.noise_energy_fraction * normal(random));
  return measurement;
}

}  // namespace kareus::device
