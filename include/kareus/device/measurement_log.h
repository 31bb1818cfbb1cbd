// kareus/device/measurement_log.h - measurements as an append-only JSONL log.
//
// Every measurement the CUDA backend (or the emulator, through `kareus profile`) makes is one
// JSON object per line: what ran (workload, partition key, the partition's ops, collective and
// slots, so the record is self-contained and `kareus calibrate` can replay it on the emulator
// without rebuilding the workload), the knob config, the result (time_s and energy_j of one run
// of the partition on one GPU) and how trustworthy it is (clock readings over the window,
// clock-event / throttle reasons, temperature, power). Schema "kareus.measurement/1".
// Units: s, J, MHz, W, C.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/common/jsonl_log.h"
#include "kareus/common/version.h"
#include "kareus/partition/partition.h"
#include "kareus/partition/search_space.h"

namespace kareus::device {

inline constexpr std::string_view kMeasurementSchema = "kareus.measurement/1";
/// The first line of a `kareus profile --all` log: what the measurements are of.
inline constexpr std::string_view kProfileHeaderSchema = "kareus.profile/1";

/// How a measurement window went on real hardware (all zero for the emulator).
struct MeasurementDetails {
  int repetitions = 0;       ///< partition runs inside the energy window
  double window_s = 0;       ///< wall time of the energy window
  double clock_min_mhz = 0;  ///< SM clock readings over the window
  double clock_max_mhz = 0;
  double clock_mean_mhz = 0;
  std::uint64_t clock_events = 0;  ///< OR of NVML clock-event reasons over the window
  double temperature_start_c = 0;
  double temperature_end_c = 0;
  double power_mean_w = 0;  ///< energy over the window / its wall time
  int retries = 0;          ///< windows thrown away because the clock did not hold
  bool stable = true;       ///< the clock held the locked value and nothing throttled

  friend bool operator==(const MeasurementDetails&, const MeasurementDetails&) = default;
};

/// Bounds on a record's numbers (docs/limits.md): larger ones are refused naming file and line,
/// so no sum or fit over records can overflow to infinity.
inline constexpr double kMaxMeasuredTimeS = 1e6;     ///< one run of a partition, seconds
inline constexpr double kMaxMeasuredEnergyJ = 1e12;  ///< one run, one GPU, joules
inline constexpr double kMaxOpCount = 1e30;          ///< flops, bytes and GEMM sizes of an op

struct MeasurementRecord {
  std::string backend;        ///< "cuda", "emulator"
  std::string gpu;            ///< preset name, e.g. "h200"
  std::string device_name;    ///< what the driver calls it ("NVIDIA H200"); empty on the emulator
  std::string workload_json;  ///< workload::workload_to_json, or empty for a bare kernel
  partition::Partition partition;
  partition::KnobConfig config;
  double time_s = 0;    ///< one run of the partition
  double energy_j = 0;  ///< one run, one GPU
  MeasurementDetails details;
  std::string origin;  ///< "file.jsonl:12" when read from a file (for error messages), else empty

  /// "gemm", "attention", "memory_bound", "collective" for a one-kernel partition, else "partition".
  [[nodiscard]] std::string kernel_class() const;
};

/// What a profile log measured and where: the header line `kareus plan --measurements` checks
/// the workload flags against. `space_json` and `search_json` are opaque JSON objects.
struct ProfileHeader {
  std::string workload_json;  ///< workload::workload_to_json
  std::string gpu;            ///< preset name
  std::string backend;        ///< "emulator", "cuda"
  std::string device_name;    ///< what the driver calls the GPU; empty on the emulator
  std::string driver;         ///< driver/NVML description; empty on the emulator
  std::vector<int> clocks_mhz;
  std::string space_json = "{}";   ///< the knob space options
  std::string search_json = "{}";  ///< budget fraction, seed, front repeats
  std::string kareus_version = std::string(kKareusVersion);
  std::string date;  ///< UTC, ISO 8601

  friend bool operator==(const ProfileHeader&, const ProfileHeader&) = default;
};

/// One line of JSON (no newline).
[[nodiscard]] std::string to_json_line(const MeasurementRecord& record);
[[nodiscard]] std::string to_json_line(const ProfileHeader& header);

/// Parses one line; `origin` ("file.jsonl:12") names it in errors. Throws InputError.
[[nodiscard]] MeasurementRecord parse_measurement_line(std::string_view line, std::string_view origin);

/// Appends `record` as one whole line to `path` (created if missing) through the shared JSONL
/// writer (common/jsonl_log.h: PATH.lock held, a failed write cut back). A writer of many records
/// holds a JsonlAppender instead (RecordingDevice). Throws Error on I/O failure.
void append_measurement(const std::filesystem::path& path, const MeasurementRecord& record);

/// Appends `header` as one line to `path` (created if missing), as append_measurement.
void append_profile_header(const std::filesystem::path& path, const ProfileHeader& header);

/// Every record of a JSONL file; blank lines and profile headers are skipped. A torn last line
/// is reported through `warn` and skipped. Throws InputError naming file and line.
[[nodiscard]] std::vector<MeasurementRecord> read_measurements(const std::filesystem::path& path,
                                                               const JsonlAppender::Warn& warn = {});

struct ProfileLog {
  std::vector<ProfileHeader> headers;  ///< in file order (a resumed log may hold several)
  std::vector<MeasurementRecord> records;
};

/// Headers and records of a JSONL file, as read_measurements reads them.
[[nodiscard]] ProfileLog read_profile_log(const std::filesystem::path& path, const JsonlAppender::Warn& warn = {});

/// The current UTC time as ISO 8601 ("2026-12-01T10:00:00Z").
[[nodiscard]] std::string utc_now_iso8601();

}  // namespace kareus::device
