// kareus/plan/perseus_csv.h - Perseus per-instruction profiles (the input of `kareus solve`).
//
// A Perseus profile CSV lists, for every pipeline stage and instruction type, the time and
// energy of one forward or backward of one microbatch at each GPU clock:
//   stage,instruction,frequency,time,energy      (header required)
//   0,forward,1410,0.0123,3.52
// instruction is "forward" or "backward"; frequency in MHz (integer), time in seconds (> 0),
// energy in joules (>= 0). Every stage 0..stages-1 needs at least one forward and one backward
// row. Errors are InputErrors naming FILE:LINE and what was expected.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace kareus::plan {

struct ProfileOption {
  int freq_mhz = 0;
  double time_s = 0;
  double energy_j = 0;
};

struct StageProfile {
  std::vector<ProfileOption> forward;   ///< in file order
  std::vector<ProfileOption> backward;  ///< in file order
};

struct PerseusProfile {
  std::vector<StageProfile> stages;  ///< stage s at index s
};

/// Bounds on a row's numbers (docs/limits.md); a row beyond them is refused naming file and line,
/// so no sum over a pipeline's instructions can overflow.
inline constexpr double kMaxInstructionTimeS = 1e6;
inline constexpr double kMaxInstructionEnergyJ = 1e12;
/// The smallest solver time unit (seconds): kMaxInstructionTimeS / kMinUnitTimeS units fit 64 bits.
inline constexpr double kMinUnitTimeS = 1e-9;

/// Parses CSV text; `origin` (a path) prefixes every message. `stages` (>= 1) is the
/// pipeline depth the profile must cover (the --stages flag).
[[nodiscard]] PerseusProfile parse_perseus_csv(std::string_view text, std::string_view origin, int stages);

/// Reads and parses a profile file (see parse_perseus_csv).
[[nodiscard]] PerseusProfile read_perseus_csv(const std::filesystem::path& path, int stages);

}  // namespace kareus::plan
