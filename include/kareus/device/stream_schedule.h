// kareus/device/stream_schedule.h - how a partition maps onto a compute and a communication stream.
//
// The CUDA backend runs a partition (docs/kareus.md section 2) as: compute ops in order on the
// compute stream; at the launch slot, an event recorded on the compute stream after the op
// before the slot's first op, which the communication stream waits on before it launches the
// collective; at the end, the compute stream waits on an event recorded after the collective,
// so the partition ends when both streams end. This header states that schedule as data, free
// of CUDA, so it is tested against partition::Partition slots without a GPU.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kareus/partition/partition.h"
#include "kareus/partition/search_space.h"

namespace kareus::device {

enum class StreamStepKind {
  kComputeOp,         ///< launch compute_ops[op_index] on the compute stream
  kLaunchCollective,  ///< record an event on the compute stream; the comm stream waits on it,
                      ///< then runs the collective and records its end event
  kJoin,              ///< the compute stream waits on the collective's end event
};

struct StreamStep {
  StreamStepKind kind = StreamStepKind::kComputeOp;
  std::size_t op_index = 0;  ///< for kComputeOp

  friend bool operator==(const StreamStep&, const StreamStep&) = default;
};

struct StreamSchedule {
  std::vector<StreamStep> steps;
  /// Compute ops enqueued before the launch event is recorded (= the slot's first_op): the
  /// collective starts when op `launch_after_ops` begins. Equal to the op count without a
  /// collective.
  std::size_t launch_after_ops = 0;
  bool has_collective = false;
};

/// The schedule of `partition` under `config` (its slot; clock and CTAs do not change it).
/// Throws InputError if the partition has a collective and `config.slot` is not one of its slots.
[[nodiscard]] StreamSchedule schedule_partition(const partition::Partition& partition,
                                                const partition::KnobConfig& config);

/// "op 0, op 1, launch, op 2, join": for messages and tests.
[[nodiscard]] std::string describe(const StreamSchedule& schedule);

}  // namespace kareus::device
