#include "kareus/device/replay_device.h"

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::device {
namespace {

std::string signature_of(const partition::Partition& partition) {
  return op_signature(partition.compute_ops, partition.collective ? &*partition.collective : nullptr);
}

std::string where(const MeasurementRecord& record, std::string_view fallback) {
  return record.origin.empty() ? std::string(fallback) : record.origin;
}

// A record no GPU of this kind could have produced: refused before it can steer a plan.
void check_physical(const MeasurementRecord& record, const GpuSpec& gpu, std::string_view fallback) {
  if (record.gpu != gpu.name) {
    throw InputError(fmt::format("{}: the record was measured on gpu {}, the plan is for {}", where(record, fallback),
                                 record.gpu, gpu.name));
  }
  require_supported_clock(gpu, record.config.freq_mhz, fmt::format("{}: freq_mhz", where(record, fallback)));
  if (record.time_s < kMinMeasuredTimeS) {
    throw InputError(fmt::format("{}: time_s {:g} of {} is under {:g} s, shorter than anything measurable",
                                 where(record, fallback), record.time_s, record.partition.key, kMinMeasuredTimeS));
  }
  const double power_w = record.energy_j / record.time_s;
  const double low_w = gpu.idle_power_w / 10;
  const double high_w = 2 * gpu.power_limit_w;
  if (power_w < low_w || (high_w > 0 && power_w > high_w)) {
    throw InputError(fmt::format(
        "{}: energy_j / time_s = {:.4g} W for {} is outside [{:g}, {:g}] W (a tenth of the {}'s idle power, twice its "
        "power limit)",
        where(record, fallback), power_w, record.partition.key, low_w, high_w, gpu.name));
  }
}

double ratio(double a, double b) { return a > b ? a / b : b / a; }

}  // namespace

std::string op_signature(const std::vector<workload::Op>& ops, const workload::Op* collective) {
  std::string signature;
  for (const workload::Op& op : ops) signature += op.name + ",";
  if (collective != nullptr) signature += "|" + collective->name;
  return signature;
}

ReplayDevice::ReplayDevice(GpuSpec gpu, const std::vector<MeasurementRecord>& records, std::string origin)
    : gpu_(std::move(gpu)), origin_(std::move(origin)) {
  for (const MeasurementRecord& record : records) {
    Work& work = works_[record.partition.key][signature_of(record.partition)];
    if (work.slots.empty()) {
      for (const partition::Slot& slot : record.partition.slots) work.slots.push_back(slot.name);
    }
    check_physical(record, gpu_, origin_);
    MeasuredConfig& entry = work.configs[{record.config.freq_mhz, record.config.ctas, record.config.slot}];
    entry.config = record.config;
    if (entry.count == 0) {
      entry.first = {record.time_s, record.energy_j};
      entry.first_origin = where(record, origin_);
    } else if (ratio(record.time_s, entry.first.time_s) > kMaxRepeatRatio ||
               ratio(record.energy_j, entry.first.energy_j) > kMaxRepeatRatio) {
      throw InputError(fmt::format(
          "{}: {} at {} MHz, {} CTAs, slot '{}' measured {:.6g} s, {:.6g} J; {} measured it {:.6g} s, {:.6g} J: "
          "repeats of one measurement must agree within {:g}x, so one of the two lines is wrong (remove it)",
          where(record, origin_), record.partition.key, record.config.freq_mhz, record.config.ctas, record.config.slot,
          record.time_s, record.energy_j, entry.first_origin, entry.first.time_s, entry.first.energy_j,
          kMaxRepeatRatio));
    }
    // A running mean: logs can hold a config many times (front re-measurements, resumed runs).
    ++entry.count;
    entry.mean.time_s += (record.time_s - entry.mean.time_s) / entry.count;
    entry.mean.energy_j += (record.energy_j - entry.mean.energy_j) / entry.count;
  }
}

const ReplayDevice::Work* ReplayDevice::find_work(const std::string& key, const std::string& signature) const {
  const auto by_key = works_.find(key);
  if (by_key == works_.end()) return nullptr;
  const auto by_ops = by_key->second.find(signature);
  return by_ops == by_key->second.end() ? nullptr : &by_ops->second;
}

void ReplayDevice::unmeasured(const std::string& key, const partition::KnobConfig& config) const {
  const bool known = works_.contains(key);
  throw UnmeasuredError(
      fmt::format("{}: no measurement of {} at {} MHz{}{}", origin_, key, config.freq_mhz,
                  config.slot.empty() ? std::string() : fmt::format(", {} CTAs, slot {}", config.ctas, config.slot),
                  known ? "" : " (the logs have no record of this key at any config)"));
}

Measurement ReplayDevice::measure(const partition::Partition& partition, const partition::KnobConfig& config) {
  const ConfigKey wanted{config.freq_mhz, config.ctas, config.slot};
  if (const Work* work = find_work(partition.key, signature_of(partition))) {
    if (auto found = work->configs.find(wanted); found != work->configs.end()) return found->second.mean;
  }
  if (!partition.searchable()) unmeasured(partition.key, config);
  // An instance whose ops differ from the representative's: answer as the representative does
  // (see the file comment), first at the same config, then at the leading slots it lacks.
  const auto by_key = works_.find(partition.key);
  if (by_key == works_.end()) unmeasured(partition.key, config);
  for (const auto& [signature, work] : by_key->second) {
    if (auto found = work.configs.find(wanted); found != work.configs.end()) return found->second.mean;
    for (const std::string& slot : work.slots) {
      if (partition.find_slot(slot)) break;  // the instance has this slot and the ones after it
      const auto lacking = work.configs.find({config.freq_mhz, config.ctas, slot});
      if (lacking != work.configs.end()) return lacking->second.mean;
    }
  }
  unmeasured(partition.key, config);
}

Measurement ReplayDevice::measure_serial(const SerialWork& work, int freq_mhz) {
  const partition::KnobConfig config{freq_mhz, work.ctas, std::string(kSerialSlot)};
  if (const Work* found = find_work(work.key, op_signature(work.ops, nullptr))) {
    if (auto entry = found->configs.find({freq_mhz, work.ctas, config.slot}); entry != found->configs.end()) {
      return entry->second.mean;
    }
  }
  unmeasured(work.key, config);
}

std::vector<MeasuredConfig> ReplayDevice::measured_configs(const partition::Partition& partition) const {
  std::vector<MeasuredConfig> configs;
  if (const Work* work = find_work(partition.key, signature_of(partition))) {
    for (const auto& [key, entry] : work->configs) configs.push_back(entry);
  }
  return configs;
}

Measurement ResumingDevice::measure(const partition::Partition& partition, const partition::KnobConfig& config) {
  try {
    return replay_.measure(partition, config);
  } catch (const UnmeasuredError&) {
    return live_.measure(partition, config);
  }
}

Measurement ResumingDevice::measure_serial(const SerialWork& work, int freq_mhz) {
  try {
    return replay_.measure_serial(work, freq_mhz);
  } catch (const UnmeasuredError&) {
    return live_.measure_serial(work, freq_mhz);
  }
}

}  // namespace kareus::device
