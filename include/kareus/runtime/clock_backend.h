// kareus/runtime/clock_backend.h - the seam between the runtime and one GPU's clock controls.
//
// The frequency controller and the kareusd daemon drive a ClockBackend: lock the SM clock to a
// value (MHz), reset it to the driver's default, read back the clock the GPU actually runs, list
// the supported clocks and read the cumulative energy counter (mJ). Implementations: the recorder
// (machines without a GPU, and tests), NVML loaded at run time (nvml_clock_backend.h over
// nvml/nvml.h) and the kareusd client (kareusd_client.h). A backend is used from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/common/error.h"

namespace kareus::runtime {

/// Thrown by a backend that did not apply a change and asks the caller to skip it rather than
/// fail (kareusd's rate limit): the clock stays as it was.
class ClockChangeSkipped : public Error {
 public:
  using Error::Error;
};

class ClockBackend {
 public:
  virtual ~ClockBackend() = default;

  /// Locks the GPU's SM clock to `freq_mhz` (min = max). Throws Error on failure.
  virtual void set_locked_clock(int freq_mhz) = 0;
  /// Releases the lock; the driver picks clocks again. Throws Error on failure.
  virtual void reset() = 0;
  /// The SM clock the GPU runs now (MHz). Throws Error on failure.
  [[nodiscard]] virtual int read_clock_mhz() = 0;
  /// Supported SM clocks (MHz), descending. Throws Error on failure.
  [[nodiscard]] virtual std::vector<int> supported_clocks_mhz() = 0;
  /// Energy used since an unspecified origin (mJ), or nullopt where not available.
  [[nodiscard]] virtual std::optional<std::uint64_t> read_energy_mj() = 0;
  /// A short description for messages, e.g. "nvml gpu 0".
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// One call a RecorderClockBackend saw.
struct RecordedClockCall {
  enum class Kind { kSet, kReset };
  Kind kind = Kind::kSet;
  int freq_mhz = 0;  ///< the requested clock for kSet, 0 for kReset

  friend bool operator==(const RecordedClockCall&, const RecordedClockCall&) = default;
};

/// A GPU without hardware: remembers the locked clock and every call. The effective clock of a
/// lock is the highest supported clock <= the request (the lowest supported one if none), which
/// is how the driver rounds; unlocked it runs the highest supported clock. Energy grows by
/// 1 mJ per MHz of effective clock per read, so tests can see it move. Thread-safe, so a test
/// can inspect calls() while the controller thread drives it.
class RecorderClockBackend final : public ClockBackend {
 public:
  /// `supported_clocks_mhz` must be non-empty and positive (throws InputError otherwise).
  explicit RecorderClockBackend(std::vector<int> supported_clocks_mhz = default_clocks_mhz());

  void set_locked_clock(int freq_mhz) override;
  void reset() override;
  [[nodiscard]] int read_clock_mhz() override;
  [[nodiscard]] std::vector<int> supported_clocks_mhz() override;
  [[nodiscard]] std::optional<std::uint64_t> read_energy_mj() override;
  [[nodiscard]] std::string describe() const override { return "recorder"; }

  /// Every set/reset call so far, in order.
  [[nodiscard]] std::vector<RecordedClockCall> calls() const;
  /// The locked clock (MHz), or nullopt when unlocked.
  [[nodiscard]] std::optional<int> locked_clock_mhz() const;
  /// 1980 down to 210 MHz in steps of 15 (an H100's range).
  [[nodiscard]] static std::vector<int> default_clocks_mhz();

 private:
  int effective_locked(int freq_mhz) const;

  mutable std::mutex mutex_;
  std::vector<int> supported_mhz_;  ///< descending
  std::optional<int> locked_mhz_;
  std::vector<RecordedClockCall> calls_;
  std::uint64_t energy_mj_ = 0;
};

/// Makes a backend from a spec: "recorder", "nvml", "nvml:LIBRARY_PATH" or "kareusd:SOCKET_PATH",
/// driving GPU `gpu_index`. Throws InputError naming the spec when it is none of these, and Error
/// when the backend cannot start (no driver, daemon not reachable).
[[nodiscard]] std::unique_ptr<ClockBackend> make_clock_backend(std::string_view spec, int gpu_index);

}  // namespace kareus::runtime
