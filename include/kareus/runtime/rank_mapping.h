// kareus/runtime/rank_mapping.h - which pipeline stage a training process runs.
//
// The runtime end of the data flow: a job launched with TP x CP x PP x DP processes
// must find its stage in the plan. Megatron-LM's default rank order is used (tensor
// parallel fastest, then context parallel, then data parallel, then pipeline), so
// stage = rank / (tp * cp * dp). Ranks and degrees are plain process counts.
#pragma once

#include <string_view>
#include <vector>

namespace kareus::runtime {

/// Parallelism degrees of a job (each >= 1).
struct ParallelDegrees {
  int tp = 1;
  int cp = 1;
  int pp = 1;
  int dp = 1;

  friend bool operator==(const ParallelDegrees&, const ParallelDegrees&) = default;
};

/// Where one global rank sits in every parallel group.
struct RankCoordinates {
  int tp_rank = 0;
  int cp_rank = 0;
  int dp_rank = 0;
  int stage = 0;  ///< the pipeline (PP) rank, which indexes the plan's stages

  friend bool operator==(const RankCoordinates&, const RankCoordinates&) = default;
};

/// Maps a global rank to its coordinates in Megatron's tp-cp-dp-pp order. Throws InputError
/// naming the degree when a degree is < 1, or the rank and world size when the rank is out of
/// [0, tp*cp*pp*dp).
[[nodiscard]] RankCoordinates map_rank(int global_rank, const ParallelDegrees& degrees);

/// The global rank at `coordinates` (the inverse of map_rank). Throws InputError naming a
/// coordinate outside [0, its degree).
[[nodiscard]] int global_rank(const RankCoordinates& coordinates, const ParallelDegrees& degrees);

/// The process groups a training job makes, each the ranks that differ only in:
enum class ParallelGroup {
  kTensor,     ///< tp_rank (TP groups: the collectives of the plan's partitions)
  kContext,    ///< cp_rank (CP groups)
  kGradient,   ///< dp_rank and cp_rank (gradients summed over CP, averaged over DP: Megatron's)
  kEmbedding,  ///< stage 0 and stage pp-1 (the tied embedding's two copies; one rank when pp is 1)
};

/// Parses "tp", "cp", "gradient", "embedding"; throws InputError naming `origin`.
[[nodiscard]] ParallelGroup parse_parallel_group(std::string_view text, std::string_view origin);

/// Every group of `kind`, each listing its ranks ascending, the groups in ascending order of
/// their first rank (the order every rank must create them in: group creation is collective).
/// Throws InputError as map_rank does for bad degrees.
[[nodiscard]] std::vector<std::vector<int>> parallel_groups(ParallelGroup kind, const ParallelDegrees& degrees);

}  // namespace kareus::runtime
