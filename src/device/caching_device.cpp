#include "kareus/device/caching_device.h"

#include "kareus/device/replay_device.h"

namespace kareus::device {

template <typename Measure>
Measurement CachingDevice::cached(Key key, Measure measure) {
  if (auto found = cache_.find(key); found != cache_.end()) return found->second;
  Measurement mean;
  for (int repeat = 0; repeat < repeats_; ++repeat) {
    const Measurement one = measure();
    mean.time_s += one.time_s / repeats_;
    mean.energy_j += one.energy_j / repeats_;
    ++inner_measurements_;
  }
  return cache_.emplace(std::move(key), mean).first->second;
}

Measurement CachingDevice::measure(const partition::Partition& partition, const partition::KnobConfig& config) {
  const std::string ops = op_signature(partition.compute_ops, partition.collective ? &*partition.collective : nullptr);
  return cached({partition.key, ops, config.freq_mhz, config.ctas, config.slot},
                [&] { return inner_.measure(partition, config); });
}

Measurement CachingDevice::measure_serial(const SerialWork& work, int freq_mhz) {
  return cached({work.key, op_signature(work.ops, nullptr), freq_mhz, work.ctas, std::string(kSerialSlot)},
                [&] { return inner_.measure_serial(work, freq_mhz); });
}

}  // namespace kareus::device
