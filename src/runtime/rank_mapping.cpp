#include "kareus/runtime/rank_mapping.h"

#include <map>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/workload/workload.h"

namespace kareus::runtime {

RankCoordinates map_rank(int global_rank, const ParallelDegrees& degrees) {
  const struct {
    const char* name;
    int value;
  } named[] = {{"tp", degrees.tp}, {"cp", degrees.cp}, {"pp", degrees.pp}, {"dp", degrees.dp}};
  // The workload's GPU bound (docs/limits.md), checked factor by factor so the product never
  // overflows.
  long long world_size = 1;
  for (const auto& degree : named) {
    if (degree.value < 1) {
      throw InputError(fmt::format("parallel degree {} must be >= 1, found {}", degree.name, degree.value));
    }
    world_size *= degree.value;
    if (world_size > workload::kMaxGpus) {
      throw InputError(fmt::format("world size tp {} x cp {} x pp {} x dp {} exceeds the limit of {} ranks", degrees.tp,
                                   degrees.cp, degrees.pp, degrees.dp, workload::kMaxGpus));
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

int global_rank(const RankCoordinates& coordinates, const ParallelDegrees& degrees) {
  (void)map_rank(0, degrees);  // validates the degrees
  const struct {
    const char* name;
    int value;
    int degree;
  } named[] = {{"tp_rank", coordinates.tp_rank, degrees.tp},
               {"cp_rank", coordinates.cp_rank, degrees.cp},
               {"dp_rank", coordinates.dp_rank, degrees.dp},
               {"stage", coordinates.stage, degrees.pp}};
  for (const auto& coordinate : named) {
    if (coordinate.value < 0 || coordinate.value >= coordinate.degree) {
      throw InputError(
          fmt::format("{} {} is out of range 0..{}", coordinate.name, coordinate.value, coordinate.degree - 1));
    }
  }
  return coordinates.tp_rank +
         degrees.tp * (coordinates.cp_rank + degrees.cp * (coordinates.dp_rank + degrees.dp * coordinates.stage));
}

ParallelGroup parse_parallel_group(std::string_view text, std::string_view origin) {
  if (text == "tp") return ParallelGroup::kTensor;
  if (text == "cp") return ParallelGroup::kContext;
  if (text == "gradient") return ParallelGroup::kGradient;
  if (text == "embedding") return ParallelGroup::kEmbedding;
  throw InputError(fmt::format("{}: expected tp, cp, gradient or embedding, found \"{}\"", origin, text));
}

std::vector<std::vector<int>> parallel_groups(ParallelGroup kind, const ParallelDegrees& degrees) {
  const int world_size = global_rank({degrees.tp - 1, degrees.cp - 1, degrees.dp - 1, degrees.pp - 1}, degrees) + 1;
  // Each group is keyed by its first member: the rank with the group's varying coordinates at 0.
  std::map<int, std::vector<int>> groups;
  for (int rank = 0; rank < world_size; ++rank) {
    RankCoordinates first = map_rank(rank, degrees);
    switch (kind) {
      case ParallelGroup::kTensor:
        first.tp_rank = 0;
        break;
      case ParallelGroup::kContext:
        first.cp_rank = 0;
        break;
      case ParallelGroup::kGradient:
        first.cp_rank = 0;
        first.dp_rank = 0;
        break;
      case ParallelGroup::kEmbedding:
        if (first.stage != 0 && first.stage != degrees.pp - 1) continue;
        first.stage = 0;
        break;
    }
    groups[global_rank(first, degrees)].push_back(rank);
  }
  std::vector<std::vector<int>> result;
  for (auto& [first, members] : groups) result.push_back(std::move(members));
  return result;
}

}  // namespace kareus::runtime
