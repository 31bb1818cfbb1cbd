#include "kareus/common/evenly_spread.h"

#include <algorithm>
#include <cmath>

namespace kareus {

std::vector<std::size_t> evenly_spread_positions(std::size_t count, std::size_t samples) {
  samples = std::min(count, samples);
  std::vector<std::size_t> positions;
  for (std::size_t sample = 0; sample < samples; ++sample) {
    // Multiply before dividing: exact for the counts a frontier has, so ties round alike.
    const std::size_t position =
        samples == 1
            ? 0
            : static_cast<std::size_t>(std::lround(static_cast<double>(sample) * static_cast<double>(count - 1) /
                                                   static_cast<double>(samples - 1)));
    if (positions.empty() || positions.back() != position) positions.push_back(position);
  }
  return positions;
}

}  // namespace kareus
