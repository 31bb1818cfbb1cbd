// kareus/device/device.h - the one seam to hardware: measure a partition under a knob config.
//
// Third stage of the data flow (workload -> partition -> device -> search). Implementations:
// the emulator (emulator.h, default, runs anywhere), and later the CUDA backend and replay of
// recorded logs. A measurement is what one GPU spends on one run of the partition.
#pragma once

#include <string_view>

#include "kareus/device/gpu_spec.h"
#include "kareus/partition/partition.h"
#include "kareus/partition/search_space.h"

namespace kareus::device {

struct Measurement {
  double time_s = 0;
  double energy_j = 0;  ///< one GPU, one run of the partition
};

class Device {
 public:
  virtual ~Device() = default;
  [[nodiscard]] virtual const GpuSpec& gpu() const = 0;
  /// "emulator", "cuda", "replay".
  [[nodiscard]] virtual std::string_view kind() const = 0;
  /// Measures `partition` under `config`. Throws InputError for a config the GPU cannot run
  /// (unsupported clock, CTA count above the SM count, unknown slot), Error on device failure.
  [[nodiscard]] virtual Measurement measure(const partition::Partition& partition,
                                            const partition::KnobConfig& config) = 0;
};

/// Checks `config` against `gpu` and `partition`; throws InputError naming the value and range.
void validate_config(const GpuSpec& gpu, const partition::Partition& partition, const partition::KnobConfig& config);

}  // namespace kareus::device
