// libFuzzer target for the Perseus profile CSV parser: any bytes parse or throw InputError, and
// every parsed time and energy is inside the documented bounds (so sums stay finite).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kareus/common/error.h"
#include "kareus/plan/perseus_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const int stages = 1 + data[0] % 4;  // the first byte picks --stages
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const kareus::plan::PerseusProfile profile = kareus::plan::parse_perseus_csv(text, "fuzz.csv", stages);
    for (const kareus::plan::StageProfile& stage : profile.stages) {
      for (const auto* options : {&stage.forward, &stage.backward}) {
        for (const kareus::plan::ProfileOption& option : *options) {
          if (!(option.time_s > 0 && option.time_s <= kareus::plan::kMaxInstructionTimeS) ||
              !(option.energy_j >= 0 && option.energy_j <= kareus::plan::kMaxInstructionEnergyJ)) {
            std::abort();
          }
        }
      }
    }
  } catch (const kareus::InputError&) {
  }
  return 0;
}
