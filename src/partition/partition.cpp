#include "kareus/partition/partition.h"

#include <algorithm>
#include <cassert>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::partition {
namespace {

using workload::Op;
using workload::OpKind;
using workload::OpRole;

struct TaggedOp {
  Op op;
  int layer;
};

/// Ops between two collectives, and the collective that ends them (none for the tail).
struct Segment {
  std::vector<Op> ops;
  std::optional<Op> collective;
  int layer = 0;     ///< layer of the collective (of the last op for the tail)
  int position = 0;  ///< index of the collective among its layer's collectives
};

std::vector<TaggedOp> flatten(const workload::LayerGraph& graph, int layers, Direction direction) {
  std::vector<TaggedOp> ops;
  const std::vector<Op>& layer_ops = direction == Direction::kForward ? graph.forward : graph.backward;
  for (int step = 0; step < layers; ++step) {
    const int layer = direction == Direction::kForward ? step : layers - 1 - step;
    for (const Op& op : layer_ops) ops.push_back({op, layer});
  }
  return ops;
}

std::vector<Segment> split_at_collectives(const std::vector<TaggedOp>& ops) {
  std::vector<Segment> segments(1);
  int position = 0;
  int previous_layer = ops.empty() ? 0 : ops.front().layer;
  for (const TaggedOp& tagged : ops) {
    Segment& open = segments.back();
    if (!tagged.op.is_collective()) {
      open.ops.push_back(tagged.op);
      open.layer = tagged.layer;
      continue;
    }
    if (tagged.layer != previous_layer) position = 0;
    previous_layer = tagged.layer;
    open.collective = tagged.op;
    open.layer = tagged.layer;
    open.position = position++;
    segments.emplace_back();
  }
  return segments;
}

/// Names a segment from the principal ops it holds: "attn" (QKV + attention + O-proj), else
/// the parts "qkv", "a", "o" in that order; "mlp" (FC1 + FC2), else "fc1" or "fc2"; joined by
/// '_' if both, the block that runs first first. A segment of memory-bound ops alone (between
/// sequence parallelism's collectives) is named after the norm it holds: "attn_norm" (the
/// layer's input norm), "mlp_norm"; else "rope" if it holds RoPE (CP's collectives around
/// attention cut it off); else "misc". Without sequence parallelism FC1 and FC2 are
/// never apart and every segment holds a linear, so these keys are those of earlier releases.
std::string segment_name(const std::vector<Op>& ops) {
  bool qkv = false, attention = false, out_proj = false, fc1 = false, fc2 = false, attention_first = true;
  bool input_norm = false, mlp_norm = false, rope = false;
  for (const Op& op : ops) {
    if (op.role == OpRole::kFc1 || op.role == OpRole::kFc2) {
      if (!qkv && !attention && !out_proj) attention_first = false;
    }
    qkv |= op.role == OpRole::kQkv;
    attention |= op.role == OpRole::kAttention;
    out_proj |= op.role == OpRole::kOutProj;
    fc1 |= op.role == OpRole::kFc1;
    fc2 |= op.role == OpRole::kFc2;
    input_norm |= op.role == OpRole::kInputNorm;
    mlp_norm |= op.role == OpRole::kMlpNorm;
    rope |= op.role == OpRole::kRope;
  }
  std::string attention_name = qkv && attention && out_proj
                                   ? "attn"
                                   : std::string(qkv ? "qkv" : "") + (attention ? "a" : "") + (out_proj ? "o" : "");
  const std::string mlp_name = fc1 && fc2 ? "mlp" : fc1 ? "fc1" : fc2 ? "fc2" : "";
  if (attention_name.empty() && mlp_name.empty()) {
    if (input_norm != mlp_norm) return input_norm ? "attn_norm" : "mlp_norm";
    return rope ? "rope" : "misc";
  }
  if (mlp_name.empty()) return attention_name;
  if (attention_name.empty()) return mlp_name;
  return attention_first ? attention_name + "_" + mlp_name : mlp_name + "_" + attention_name;
}

struct KeyPair {
  std::string nanobatch0;
  std::string nanobatch1;
};

/// Keys per collective position within a layer, from a steady-state layer (the middle of
/// three), where every segment has a predecessor collective.
std::vector<KeyPair> steady_state_keys(const workload::LayerGraph& graph, Direction direction) {
  const std::vector<Segment> segments = split_at_collectives(flatten(graph, 3, direction));
  const std::string prefix = direction == Direction::kForward ? "fwd_" : "bwd_";
  std::vector<KeyPair> keys;
  for (std::size_t index = 1; index < segments.size(); ++index) {
    const Segment& segment = segments[index];
    if (!segment.collective || segment.layer != 1) continue;
    const auto this_kind = segment.collective->collective->kind;
    const auto previous_kind = segments[index - 1].collective->collective->kind;
    const std::string base = prefix + segment_name(segment.ops);
    if (this_kind == previous_kind) {
      keys.push_back({base, base});
    } else {
      keys.push_back({base + "_" + std::string(workload::short_name(previous_kind)),
                      base + "_" + std::string(workload::short_name(this_kind))});
    }
  }
  // A key names one partition of the layer: configs are looked up by key alone.
  std::set<std::string> earlier;
  for (const KeyPair& pair : keys) {
    if (earlier.contains(pair.nanobatch0) || earlier.contains(pair.nanobatch1)) {
      throw std::logic_error(fmt::format("partition key {} names two partitions of a layer", pair.nanobatch0));
    }
    earlier.insert(pair.nanobatch0);
    earlier.insert(pair.nanobatch1);
  }
  return keys;
}

std::vector<Slot> slots_of(const std::vector<Op>& ops) {
  // A memory-bound run is named after its most telling op: rope > norm > activation >
  // elementwise (Qwen3's q/k norm runs beside RoPE, and that run is the artifact's rope_0).
  auto rank = [](OpKind kind) {
    switch (kind) {
      case OpKind::kRope:
        return 4;
      case OpKind::kNorm:
        return 3;
      case OpKind::kActivation:
        return 2;
      default:
        return 1;
    }
  };
  std::vector<Slot> slots;
  std::vector<std::pair<std::string, int>> counts;
  auto next_name = [&counts](const std::string& base) {
    for (auto& [name, count] : counts) {
      if (name == base) return base + "_" + std::to_string(count++);
    }
    counts.emplace_back(base, 1);
    return base + "_0";
  };
  for (std::size_t index = 0; index < ops.size();) {
    const Op& op = ops[index];
    if (op.is_memory_bound()) {
      std::size_t end = index;
      OpKind best = op.kind;
      while (end < ops.size() && ops[end].is_memory_bound()) {
        if (rank(ops[end].kind) > rank(best)) best = ops[end].kind;
        ++end;
      }
      slots.push_back({next_name(std::string(workload::to_string(best))), index});
      index = end;
      continue;
    }
    const std::string base = op.kind == OpKind::kGemm        ? "linear"
                             : op.kind == OpKind::kAttention ? "attn"
                                                             : std::string(to_string(op.kind));
    slots.push_back({next_name(base), index});
    ++index;
  }
  return slots;
}

Partition make_partition(std::string key, Direction direction, int layer, int nanobatch, std::vector<Op> ops,
                         std::optional<Op> collective) {
  Partition partition;
  partition.key = std::move(key);
  partition.direction = direction;
  partition.layer = layer;
  partition.nanobatch = nanobatch;
  partition.slots = slots_of(ops);
  partition.compute_ops = std::move(ops);
  partition.collective = std::move(collective);
  return partition;
}

void require_two_nanobatches(const workload::Workload& workload) {
  if (workload.parallel.nanobatches != 2) {
    throw InputError(fmt::format("--nanobatches {}: the partitioned overlap model needs 2 nanobatches",
                                 workload.parallel.nanobatches));
  }
}

}  // namespace

bool Partition::searchable() const { return collective.has_value() && !key.ends_with("_trail"); }

std::optional<std::size_t> Partition::find_slot(std::string_view name) const {
  for (std::size_t index = 0; index < slots.size(); ++index) {
    if (slots[index].name == name) return index;
  }
  return std::nullopt;
}

std::vector<Partition> build_partitions(const workload::Workload& workload, int stage, Direction direction) {
  require_two_nanobatches(workload);
  assert(stage >= 0 && stage < workload.parallel.pp);
  const workload::LayerGraph graph = workload::build_layer_graph(workload);
  const std::vector<KeyPair> keys = steady_state_keys(graph, direction);
  const std::vector<Segment> segments = split_at_collectives(flatten(graph, workload.stage_layers[stage], direction));
  const std::string trail_key = direction == Direction::kForward ? "fwd_trail" : "bwd_trail";

  std::vector<Partition> partitions;
  std::optional<Op> pending;  // the other nanobatch's collective produced by the previous partition
  for (const Segment& segment : segments) {
    const bool tail = !segment.collective.has_value();
    const KeyPair pair = tail || keys.empty() ? KeyPair{trail_key, trail_key} : keys[segment.position];
    partitions.push_back(make_partition(pair.nanobatch0, direction, segment.layer, 0, segment.ops, pending));
    partitions.push_back(make_partition(pair.nanobatch1, direction, segment.layer, 1, segment.ops, segment.collective));
    pending = segment.collective;
  }
  return partitions;
}

std::vector<Partition> layer_partitions(const workload::Workload& workload, Direction direction) {
  require_two_nanobatches(workload);
  const workload::LayerGraph graph = workload::build_layer_graph(workload);
  const std::vector<KeyPair> keys = steady_state_keys(graph, direction);
  const std::vector<Segment> segments = split_at_collectives(flatten(graph, 3, direction));
  std::vector<Partition> partitions;
  for (std::size_t index = 1; index < segments.size(); ++index) {
    const Segment& segment = segments[index];
    if (!segment.collective || segment.layer != 1) continue;
    const KeyPair& pair = keys[segment.position];
    partitions.push_back(make_partition(pair.nanobatch0, direction, 1, 0, segment.ops, segments[index - 1].collective));
    partitions.push_back(make_partition(pair.nanobatch1, direction, 1, 1, segment.ops, segment.collective));
  }
  return partitions;
}

std::vector<std::string> searchable_keys(const workload::Workload& workload) {
  std::vector<std::string> keys;
  for (Direction direction : {Direction::kForward, Direction::kBackward}) {
    for (const Partition& partition : layer_partitions(workload, direction)) {
      if (std::find(keys.begin(), keys.end(), partition.key) == keys.end()) keys.push_back(partition.key);
    }
  }
  return keys;
}

Partition representative_partition(const workload::Workload& workload, const std::string& key) {
  for (Direction direction : {Direction::kForward, Direction::kBackward}) {
    for (const Partition& partition : layer_partitions(workload, direction)) {
      if (partition.key == key) return partition;
    }
  }
  throw InputError(fmt::format("--partition {}: not a searchable partition of this workload (keys: {})", key,
                               fmt::join(searchable_keys(workload), ", ")));
}

}  // namespace kareus::partition
