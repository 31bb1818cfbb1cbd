#include "kareus/runtime/rank_mapping.h"

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::runtime {

RankCoordinates map_rank(int global_rank, const ParallelDegrees& degrees) {
  const struct {
    const char* name;
    int value;
  } named[] = {{"tp", degrees.tp}, {"cp", degrees.cp}, {"pp", degrees.pp}, {"dp", degrees.dp}};
  // The same bound as the workload's (docs/limits.md), checked factor by factor so the product
  // never overflows.
  constexpr long long kMaxWorldSize = 1 << 20;
  long long world_size = 1;
  for (const auto& degree : named) {
    if (degree.value < 1) {
      throw InputError(fmt::format("parallel degree {} must be >= 1, found {}", degree.name, degree.value));
    }
    world_size *= degree.value;
    if (world_size > kMaxWorldSize) {
      throw InputError(fmt::format("world size tp {} x cp {} x pp {} x dp {} exceeds the limit of {} ranks", degrees.tp,
                                   degrees.cp, degrees.pp, degrees.dp, kMaxWorldSize));
    }
  }
  if (global_rank < 0 || global_rank >= world_size) {
    throw InputError(fmt::format("rank {} is out of range: world size is {} (tp {} x cp {} x pp {} x dp {})",
                                 global_rank, world_size, degrees.tp, degrees.cp, degrees.pp, degrees.dp));
  }
  RankCoordinates coordinates;
  coordinates.tp_rank = global_rank % degrees.tp;
  coordinates.cp_rank = (global_rank / degrees.tp) % degrees.cp;
  coordinates.dp_rank = (global_rank / (degrees.tp * degrees.cp)) % degrees.dp;
  coordinates.stage = global_rank / (degrees.tp * degrees.cp * degrees.dp);
  return coordinates;
}

}  // namespace kareus::runtime
