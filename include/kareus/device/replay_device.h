// kareus/device/replay_device.h - recorded measurements as a Device: plans from real GPU logs.
//
// Third stage of the data flow, beside the emulator and the CUDA backend. A ReplayDevice holds
// the records of one or more `kareus profile` JSONL logs (measurement_log.h) and answers a
// measured partition config or serial work with its recorded time and energy: the mean where it
// was measured more than once. It never invents a number: unmeasured work throws
// UnmeasuredError naming the key, the clock and the config. Work is identified by its key and
// its ops (names), so a record of one workload never answers for another's partition.
// One deliberate approximation: an instance of a searchable key whose ops differ from the
// recorded representative (the first or last layer of a stage) is answered with the
// representative's measurement at the same config, or, where the instance lacks the planned
// slot and so launches at its first op, at the representative's slot it lacks: exactly the
// representative x instance count that composition predicts. Units: seconds, joules, MHz.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kareus/device/device.h"
#include "kareus/device/measurement_log.h"

namespace kareus::device {

/// A measured config and its mean measurement.
struct MeasuredConfig {
  partition::KnobConfig config;
  Measurement mean;
  int count = 0;             ///< measurements averaged
  Measurement first;         ///< the first record's, which every repeat must agree with
  std::string first_origin;  ///< "file.jsonl:12" of the first record (empty when not from a file)
};

/// Repeats of one measurement (one work at one config) may differ by measurement noise only:
/// a repeat whose time or energy is more than this factor above or below the first record's is
/// refused, naming both lines, rather than averaged in (docs/limits.md).
inline constexpr double kMaxRepeatRatio = 2;
/// The shortest time a record may give: no partition or kernel run is measured below it.
inline constexpr double kMinMeasuredTimeS = 1e-6;

class ReplayDevice final : public Device {
 public:
  /// `origin` names the logs in errors ("m.jsonl" or "2 logs"). Throws InputError naming the
  /// record's line for a record of another GPU, one outside physical bounds (time_s under
  /// kMinMeasuredTimeS; power energy_j / time_s below a tenth of the GPU's idle power or above
  /// twice its power limit) and a repeat that disagrees with the first record beyond
  /// kMaxRepeatRatio.
  ReplayDevice(GpuSpec gpu, const std::vector<MeasurementRecord>& records, std::string origin);

  [[nodiscard]] const GpuSpec& gpu() const override { return gpu_; }
  [[nodiscard]] std::string_view kind() const override { return "replay"; }
  [[nodiscard]] Measurement measure(const partition::Partition& partition,
                                    const partition::KnobConfig& config) override;
  [[nodiscard]] Measurement measure_serial(const SerialWork& work, int freq_mhz) override;

  /// Every measured config of `partition` (key and ops must match), config order.
  [[nodiscard]] std::vector<MeasuredConfig> measured_configs(const partition::Partition& partition) const;

 private:
  using ConfigKey = std::tuple<int, int, std::string>;  // freq_mhz, ctas, slot
  struct Work {
    std::vector<std::string> slots;  ///< slot names of the recorded partition
    std::map<ConfigKey, MeasuredConfig> configs;
  };
  /// By key, then by op signature.
  using WorkByOps = std::map<std::string, Work>;

  [[nodiscard]] const Work* find_work(const std::string& key, const std::string& signature) const;
  [[noreturn]] void unmeasured(const std::string& key, const partition::KnobConfig& config) const;

  GpuSpec gpu_;
  std::string origin_;
  std::map<std::string, WorkByOps> works_;
};

/// Answers from a replay of earlier measurements where it can and measures on `live` (which
/// should log) where it cannot: a crashed `kareus plan --backend cuda --log` run resumes
/// without measuring again what its log holds. Both must outlive this.
class ResumingDevice final : public Device {
 public:
  ResumingDevice(ReplayDevice& replay, Device& live) : replay_(replay), live_(live) {}
  [[nodiscard]] const GpuSpec& gpu() const override { return live_.gpu(); }
  [[nodiscard]] std::string_view kind() const override { return live_.kind(); }
  [[nodiscard]] Measurement measure(const partition::Partition& partition,
                                    const partition::KnobConfig& config) override;
  [[nodiscard]] Measurement measure_serial(const SerialWork& work, int freq_mhz) override;

 private:
  ReplayDevice& replay_;
  Device& live_;
};

/// The op signature replay matches work by: the names of the compute ops and the collective.
[[nodiscard]] std::string op_signature(const std::vector<workload::Op>& ops, const workload::Op* collective);

}  // namespace kareus::device
