// kareus/device/profile.h - what `kareus profile` measures and how a sweep is run on a Device.
//
// Two kinds of sweeps over one workload: partitions (the searchable keys of the workload, each
// over a budget-limited random sample of its knob space: unbiased, held-out data for
// calibration; `kareus profile` searches adaptively by default through RecordingDevice), and kernels (every distinct
// compute op of one layer as a one-op partition, and every distinct collective as a
// collective-only partition, over clocks and CTA counts: the data `kareus calibrate` fits
// emulator parameters to). Each measurement becomes a MeasurementRecord appended to a JSONL log.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kareus/device/device.h"
#include "kareus/device/measurement_log.h"
#include "kareus/partition/search_space.h"
#include "kareus/workload/workload.h"

namespace kareus::device {

struct ProfileJob {
  partition::Partition partition;
  partition::KnobConfig config;
};

/// Up to `budget` configs of `space`, drawn uniformly without replacement with `seed` and
/// returned in index order; all of them when budget >= size.
[[nodiscard]] std::vector<partition::KnobConfig> sample_configs(const partition::SearchSpace& space, std::size_t budget,
                                                                std::uint64_t seed);

/// One-op partitions ("kernel:<op>") for every distinct compute op of one layer, forward and
/// backward, and collective-only partitions ("collective:<op>", slot "start") for every
/// distinct TP/CP collective. Ops are identified by name; the first occurrence wins.
[[nodiscard]] std::vector<partition::Partition> kernel_partitions(const workload::Workload& workload);

/// Jobs measuring each partition of `keys` (all searchable keys when empty) over `budget`
/// sampled configs of its space over `clocks_mhz` (artifact CTA ranges, all slots).
/// Throws InputError for an unknown key.
[[nodiscard]] std::vector<ProfileJob> plan_partition_sweep(const workload::Workload& workload,
                                                           const std::vector<std::string>& keys,
                                                           const std::vector<int>& clocks_mhz, std::size_t budget,
                                                           std::uint64_t seed);

/// Jobs measuring every kernel partition at every clock; collectives at every CTA count of
/// `ctas` (clamped to the GPU's SMs by the caller).
[[nodiscard]] std::vector<ProfileJob> plan_kernel_sweep(const workload::Workload& workload,
                                                        const std::vector<int>& clocks_mhz,
                                                        const std::vector<int>& ctas);

struct ProfileSink {
  std::filesystem::path out;  ///< JSONL log to append to; empty = keep in memory only
  std::string workload_json;  ///< written into each record
  std::string device_name;    ///< what the driver calls the GPU; empty on the emulator
  /// Details of the measurement just made (the CUDA backend's window readings); may be empty.
  std::function<MeasurementDetails()> details;
  /// Called after each measurement (progress output belongs to the caller).
  std::function<void(const MeasurementRecord&, std::size_t done, std::size_t total)> progress;
  /// Told about a torn last line cut off `out` when it is opened.
  JsonlAppender::Warn warn;
};

/// Measures every job on `device` in order, appending each record to `sink.out` as soon as it
/// is made. Throws what Device::measure throws.
std::vector<MeasurementRecord> run_profile(Device& device, const std::vector<ProfileJob>& jobs,
                                           const ProfileSink& sink);

/// A Device that measures on another and logs every measurement to a sink, so an adaptive
/// search (search.h) leaves the same JSONL record per measurement as a fixed sweep.
class RecordingDevice final : public Device {
 public:
  /// `expected` is the total passed to sink.progress. `inner` and `sink` must outlive this.
  /// Opens sink.out (when given) for appending, holding its lock until destroyed.
  RecordingDevice(Device& inner, const ProfileSink& sink, std::size_t expected);
  [[nodiscard]] const GpuSpec& gpu() const override { return inner_.gpu(); }
  [[nodiscard]] std::string_view kind() const override { return inner_.kind(); }
  [[nodiscard]] Measurement measure(const partition::Partition& partition,
                                    const partition::KnobConfig& config) override;
  /// Logged as a record of a partition without collective whose ops are the work's, with
  /// config {freq_mhz, work.ctas, kSerialSlot}.
  [[nodiscard]] Measurement measure_serial(const SerialWork& work, int freq_mhz) override;
  [[nodiscard]] const std::vector<MeasurementRecord>& records() const { return records_; }

 private:
  void record(const partition::Partition& partition, const partition::KnobConfig& config,
              const Measurement& measurement);

  Device& inner_;
  const ProfileSink& sink_;
  std::size_t expected_;
  std::vector<MeasurementRecord> records_;
  std::optional<JsonlAppender> log_;
};

}  // namespace kareus::device
