// kareus/partition/partition.h - the partitioned overlap execution model (docs/kareus.md section 2).
//
// Second stage of the data flow. A Partition is a contiguous run of compute ops of one
// nanobatch plus at most one collective of the other nanobatch, run on a communication
// stream so it overlaps the compute. The builder is generic over the op graph: flatten the
// stage's ops, split at every collective into segments (ops_k, c_k), and emit
// P(NB0, ops_k, c_{k-1} of NB1) then P(NB1, ops_k, c_k of NB0). Keys (fwd_attn, bwd_qkv_rs,
// ...) are named from the ops a segment holds and the collectives around it, never looked up.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kareus/workload/op_graph.h"
#include "kareus/workload/workload.h"

namespace kareus::partition {

/// A launch slot: the collective starts when compute op `first_op` begins (i.e. when the op
/// before it ends). Memory-bound runs form one slot, each linear / attention its own.
struct Slot {
  std::string name;  ///< "norm_0", "linear_1", "attn_0", "rope_0", "activation_0", ...
  std::size_t first_op = 0;
};

struct Partition {
  std::string key;  ///< "fwd_attn", ...; "fwd_trail"/"bwd_trail" for the leftover tail
  Direction direction = Direction::kForward;
  int layer = 0;      ///< layer of the stage the partition's collective belongs to
  int nanobatch = 0;  ///< nanobatch whose compute runs; the collective is the other one's
  std::vector<workload::Op> compute_ops;
  std::optional<workload::Op> collective;
  std::vector<Slot> slots;  ///< every slot of compute_ops, in order

  /// A partition whose knobs are searched: it has a collective and is not a trail.
  [[nodiscard]] bool searchable() const;
  /// Index into `slots` of the slot called `name`, or nullopt.
  [[nodiscard]] std::optional<std::size_t> find_slot(std::string_view name) const;
};

/// Every partition of one instruction of `stage` in execution order: all layers of the stage,
/// both nanobatches, in `direction`. Requires nanobatches == 2.
[[nodiscard]] std::vector<Partition> build_partitions(const workload::Workload& workload, int stage,
                                                      Direction direction);

/// The partitions of one steady-state layer (its predecessor layer exists), in execution
/// order: the representative of each key. CP=1 forward gives fwd_attn x2, fwd_mlp x2.
[[nodiscard]] std::vector<Partition> layer_partitions(const workload::Workload& workload, Direction direction);

/// Searchable keys, forward then backward, each once, in execution order.
[[nodiscard]] std::vector<std::string> searchable_keys(const workload::Workload& workload);

/// The representative partition of `key` (NB0's if both nanobatches share the key).
/// Throws InputError naming `--partition` and the keys of this workload.
[[nodiscard]] Partition representative_partition(const workload::Workload& workload, const std::string& key);

}  // namespace kareus::partition
