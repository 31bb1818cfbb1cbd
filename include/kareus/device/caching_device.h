// kareus/device/caching_device.h - measure each distinct piece of work once (or `repeats` times).
//
// A plan's instructions run the same partition and serial work many times (every layer, both
// nanobatches, every microbatch). On a GPU each measurement is a thermally stable window of
// seconds, so a CachingDevice over another device measures each distinct (key, ops, config)
// `repeats` times on first use, answers with the mean, and from memory afterwards.
#pragma once

#include <map>
#include <string>
#include <tuple>

#include "kareus/device/device.h"

namespace kareus::device {

class CachingDevice final : public Device {
 public:
  /// `inner` must outlive this. Precondition: repeats >= 1.
  CachingDevice(Device& inner, int repeats) : inner_(inner), repeats_(repeats) {}
  [[nodiscard]] const GpuSpec& gpu() const override { return inner_.gpu(); }
  [[nodiscard]] std::string_view kind() const override { return inner_.kind(); }
  [[nodiscard]] Measurement measure(const partition::Partition& partition,
                                    const partition::KnobConfig& config) override;
  [[nodiscard]] Measurement measure_serial(const SerialWork& work, int freq_mhz) override;
  /// Measurements made on the inner device so far.
  [[nodiscard]] std::size_t inner_measurements() const { return inner_measurements_; }

 private:
  using Key = std::tuple<std::string, std::string, int, int, std::string>;  // key, ops, clock, ctas, slot
  template <typename Measure>
  Measurement cached(Key key, Measure measure);

  Device& inner_;
  int repeats_;
  std::map<Key, Measurement> cache_;
  std::size_t inner_measurements_ = 0;
};

}  // namespace kareus::device
