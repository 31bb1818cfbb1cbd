// kareus/search/evaluation_log.h - the append-only JSONL log of a partition's measurements.
//
// One file per (workload, partition, device): the first line is a header
//   {"schema": "kareus.evaluations/1", "workload": {...}, "partition": "fwd_attn",
//    "nanobatch": 0, "device": {"kind": "emulator", "gpu": "a100-40gb"}, "seed": 0}
// then one line per measurement
//   {"config": {"freq_mhz": 1410, "ctas": 12, "slot": "linear_0"}, "time_s": T, "energy_j": E}
// Lines go through the shared JSONL writer (common/jsonl_log.h): whole lines, each fsync'd, so a
// crash, kill -9 or full disk loses at most the line being written and never leaves a fragment.
// Opening an existing log reads its measurements back so a search resumes without repeating
// one; a torn or corrupt last line is reported through the warning callback and cut off,
// anything else malformed, or a header of another workload, partition or device, is an
// InputError naming the file and line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kareus/common/jsonl_log.h"
#include "kareus/search/pareto.h"

namespace kareus::search {

struct LogHeader {
  std::string workload_json;  ///< workload::workload_to_json
  std::string partition_key;
  int nanobatch = 0;
  std::string device_kind;  ///< Device::kind()
  std::string gpu;          ///< GpuSpec::name
  std::uint64_t seed = 0;
};

using WarningCallback = std::function<void(const std::string& message)>;

class EvaluationLog {
 public:
  /// Opens `path`, creating it with `header` if it does not exist or is empty, and holds the
  /// advisory lock PATH.lock (common/file_lock.h) until destroyed. Throws InputError if another
  /// process holds the lock (naming its pid), if it cannot be read or written, if its header differs from `header`
  /// (naming the field), or if a line other than the last is malformed.
  EvaluationLog(std::filesystem::path path, const LogHeader& header, const WarningCallback& warn = {});
  EvaluationLog(const EvaluationLog&) = delete;
  EvaluationLog& operator=(const EvaluationLog&) = delete;

  /// Measurements already in the file when it was opened, in file order.
  [[nodiscard]] const std::vector<Evaluation>& recorded() const { return recorded_; }
  /// The recorded measurement of `config`, if any.
  [[nodiscard]] std::optional<Evaluation> find(const partition::KnobConfig& config) const;
  /// Appends one line and fsyncs it. Not thread-safe; callers serialise. Throws Error on I/O failure.
  void append(const Evaluation& evaluation);

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  JsonlAppender log_;  ///< holds PATH.lock: one process appends to a log at a time
  std::vector<Evaluation> recorded_;
};

}  // namespace kareus::search
