#include "kareus/device/profile.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "kareus/common/error.h"
#include "kareus/workload/op_graph.h"

namespace kareus::device {

std::vector<partition::KnobConfig> sample_configs(const partition::SearchSpace& space, std::size_t budget,
                                                  std::uint64_t seed) {
  std::vector<std::size_t> indices(space.size());
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  if (budget < indices.size()) {
    // A partial Fisher-Yates shuffle: the first `budget` entries are a uniform sample.
    std::mt19937_64 random(seed);
    for (std::size_t position = 0; position < budget; ++position) {
      std::uniform_int_distribution<std::size_t> pick(position, indices.size() - 1);
      std::swap(indices[position], indices[pick(random)]);
    }
    indices.resize(budget);
    std::sort(indices.begin(), indices.end());
  }
  std::vector<partition::KnobConfig> configs;
  configs.reserve(indices.size());
  for (std::size_t index : indices) configs.push_back(space.at(index));
  return configs;
}

std::vector<partition::Partition> kernel_partitions(const workload::Workload& workload) {
  const workload::LayerGraph graph = workload::build_layer_graph(workload);
  std::vector<partition::Partition> partitions;
  std::set<std::string> seen;
  for (const auto* ops : {&graph.forward, &graph.backward}) {
    for (const workload::Op& op : *ops) {
      if (!seen.insert(op.name).second) continue;
      if (op.is_collective()) {
        if (op.collective->group != workload::CommGroup::kTp && op.collective->group != workload::CommGroup::kCp)
          continue;
        partitions.push_back(collective_partition(op));
        continue;
      }
      partition::Partition kernel;
      kernel.direction = op.direction;
      kernel.key = "kernel:" + op.name;
      kernel.compute_ops.push_back(op);
      partitions.push_back(std::move(kernel));
    }
  }
  return partitions;
}

std::vector<ProfileJob> plan_partition_sweep(const workload::Workload& workload, const std::vector<std::string>& keys,
                                             const std::vector<int>& clocks_mhz, std::size_t budget,
                                             std::uint64_t seed) {
  const std::vector<std::string> chosen = keys.empty() ? partition::searchable_keys(workload) : keys;
  std::vector<ProfileJob> jobs;
  for (std::size_t key_index = 0; key_index < chosen.size(); ++key_index) {
    const partition::Partition partition = partition::representative_partition(workload, chosen[key_index]);
    const partition::SearchSpace space = partition::make_search_space(partition, clocks_mhz, {});
    for (const partition::KnobConfig& config : sample_configs(space, budget, seed + key_index)) {
      jobs.push_back({partition, config});
    }
  }
  return jobs;
}

std::vector<ProfileJob> plan_kernel_sweep(const workload::Workload& workload, const std::vector<int>& clocks_mhz,
                                          const std::vector<int>& ctas) {
  std::vector<ProfileJob> jobs;
  for (const partition::Partition& kernel : kernel_partitions(workload)) {
    for (int clock : clocks_mhz) {
      if (!kernel.collective) {
        jobs.push_back({kernel, {clock, 0, ""}});
        continue;
      }
      for (int count : ctas) jobs.push_back({kernel, {clock, count, "start"}});
    }
  }
  return jobs;
}

Measurement RecordingDevice::measure(const partition::Partition& partition, const partition::KnobConfig& config) {
  const Measurement measurement = inner_.measure(partition, config);
  record(partition, config, measurement);
  return measurement;
}

Measurement RecordingDevice::measure_serial(const SerialWork& work, int freq_mhz) {
  const Measurement measurement = inner_.measure_serial(work, freq_mhz);
  partition::Partition serial;
  serial.key = work.key;
  serial.compute_ops = work.ops;
  if (!work.ops.empty()) serial.direction = work.ops.front().direction;
  record(serial, {freq_mhz, work.ctas, std::string(kSerialSlot)}, measurement);
  return measurement;
}

RecordingDevice::RecordingDevice(Device& inner, const ProfileSink& sink, std::size_t expected)
    : inner_(inner), sink_(sink), expected_(expected) {
  if (!sink_.out.empty()) log_.emplace(sink_.out, sink_.out.string(), sink_.warn);
}

void RecordingDevice::record(const partition::Partition& partition, const partition::KnobConfig& config,
                             const Measurement& measurement) {
  MeasurementRecord record;
  record.backend = std::string(inner_.kind());
  record.gpu = inner_.gpu().name;
  record.device_name = sink_.device_name;
  record.workload_json = sink_.workload_json;
  record.partition = partition;
  record.config = config;
  record.time_s = measurement.time_s;
  record.energy_j = measurement.energy_j;
  if (sink_.details) record.details = sink_.details();
  if (log_) {
    log_->append(to_json_line(record));
    // A sync every 64 records and at the end: a crash loses at most the last few.
    if (records_.size() % 64 == 63) log_->checkpoint();
  }
  records_.push_back(std::move(record));
  if (sink_.progress) sink_.progress(records_.back(), records_.size(), expected_);
}

std::vector<MeasurementRecord> run_profile(Device& device, const std::vector<ProfileJob>& jobs,
                                           const ProfileSink& sink) {
  RecordingDevice recording(device, sink, jobs.size());
  for (const ProfileJob& job : jobs) (void)recording.measure(job.partition, job.config);
  return recording.records();
}

}  // namespace kareus::device
