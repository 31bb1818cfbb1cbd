// kareus/device/device.h - the one seam to hardware: measure a partition under a knob config.
//
// Third stage of the data flow (workload -> partition -> device -> search). Every later stage
// (search, compose, the plan job and its simulators) reaches time and energy only through this
// interface. Implementations: the emulator (emulator.h, default, runs anywhere), the CUDA
// backend (cuda_device.h) and replay of recorded `kareus profile` logs (replay_device.h).
// A measurement is what one GPU spends on one run of the work. Units: seconds, joules, MHz.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kareus/common/error.h"
#include "kareus/device/gpu_spec.h"
#include "kareus/partition/partition.h"
#include "kareus/partition/search_space.h"

namespace kareus::device {

struct Measurement {
  double time_s = 0;
  double energy_j = 0;  ///< one GPU, one run of the work
};

/// Work that runs with nothing overlapped: ops in order on one stream, a collective among them
/// blocking compute with `ctas` CTAs. Megatron's layers, the nonpartition work (embedding, head
/// and loss) and the DP gradient reduction. `key` names it in logs ("serial:layer_forward").
struct SerialWork {
  std::string key;
  std::vector<workload::Op> ops;
  int ctas = 0;
};

/// The slot string a measurement record of serial work carries (no partition has this slot).
inline constexpr std::string_view kSerialSlot = "serial";

/// What a device that cannot measure (replay) throws for work it has no record of; an
/// InputError because the user's logs are incomplete. The message names key, clock and config.
class UnmeasuredError : public InputError {
 public:
  explicit UnmeasuredError(const std::string& message) : InputError(message) {}
};

class Device {
 public:
  virtual ~Device() = default;
  [[nodiscard]] virtual const GpuSpec& gpu() const = 0;
  /// "emulator", "cuda", "replay".
  [[nodiscard]] virtual std::string_view kind() const = 0;
  /// Measures `partition` under `config`. Throws InputError for a config the GPU cannot run
  /// (unsupported clock, CTA count above the SM count, unknown slot), UnmeasuredError where
  /// the device only replays records, Error on device failure.
  [[nodiscard]] virtual Measurement measure(const partition::Partition& partition,
                                            const partition::KnobConfig& config) = 0;
  /// Measures `work` at `freq_mhz`. The default runs each maximal run of compute ops as a
  /// partition without collective and each collective as a collective-only partition (slot
  /// "start", work.ctas CTAs), and adds them up: serial work has nothing to overlap.
  [[nodiscard]] virtual Measurement measure_serial(const SerialWork& work, int freq_mhz);
};

/// Checks `config` against `gpu` and `partition`; throws InputError naming the value and range.
void validate_config(const GpuSpec& gpu, const partition::Partition& partition, const partition::KnobConfig& config);

/// A collective-only partition ("collective:<op>", slot "start"), as kernel sweeps measure it.
[[nodiscard]] partition::Partition collective_partition(const workload::Op& collective);

}  // namespace kareus::device
