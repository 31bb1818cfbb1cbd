// kareus/partition/comm_config.h - the collective knobs of one partition key.
//
// A partition's collective (partition.h) runs on `ctas` CTAs (SMs) and is launched just before
// the compute op that begins slot `slot`, or after all of the partition's compute for slot
// "none". Plans store one per partition key of each nanobatched instruction; the device layer
// runs an instruction with them; the runtime answers them to the training loop. One type, one
// field order (slot, then ctas) in C++, in plan files and in Python (kareus.CommConfig).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace kareus::partition {

/// The launch slot that starts the collective after all of the partition's compute.
inline constexpr std::string_view kSlotNone = "none";

/// The largest CTA count kareus accepts anywhere (docs/limits.md): more than any GPU has SMs;
/// a known GPU limits a config to its SM count (comm_fit.h).
inline constexpr int kMaxCtas = 65536;

struct CommConfig {
  std::string slot;  ///< a slot name of the partition (Slot::name), or kSlotNone
  int ctas = 0;      ///< CTAs of the collective; 0 = NCCL's own choice (not overlapped)

  friend bool operator==(const CommConfig&, const CommConfig&) = default;
};

/// Comm configs by partition key ("fwd_attn", ...).
using CommConfigs = std::map<std::string, CommConfig, std::less<>>;

}  // namespace kareus::partition
