// kareus/common/evenly_spread.h - which items to keep when a list must be thinned.
//
// A frontier of hundreds of points is written, simulated or drawn as a few (kareus solve
// --max-points, the plan job's simulated plans): those kept are spread evenly over the list's
// positions, the first and last always among them. One rule, so the same frontier thins the
// same way everywhere.
#pragma once

#include <cstddef>
#include <vector>

namespace kareus {

/// min(count, samples) positions into a list of `count` items, ascending and distinct:
/// round(k x (count - 1) / (samples - 1)) for k = 0 .. samples - 1, so position 0 and count - 1
/// are kept. samples == 1 keeps position 0; samples == 0 or count == 0 keeps none.
[[nodiscard]] std::vector<std::size_t> evenly_spread_positions(std::size_t count, std::size_t samples);

}  // namespace kareus
