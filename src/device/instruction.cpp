#include "kareus/device/instruction.h"

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/partition/partition.h"

namespace kareus::device {
namespace {

using workload::Direction;

void add(InstructionRun& total, const PartitionRun& run) {
  total.time_s += run.time_s;
  total.energy_j += run.energy_j;
}

partition::KnobConfig config_for(const GpuSpec& gpu, const partition::Partition& partition, int freq_mhz,
                                 const CommChoices& choices) {
  if (!partition.collective) return {freq_mhz, 0, ""};
  if (auto found = choices.find(partition.key); found != choices.end() && partition.searchable()) {
    partition::KnobConfig config{freq_mhz, found->second.ctas, found->second.slot};
    // The first and last layers' instances may lack the representative's leading memory-bound
    // run (no next layer's norm in the last layer's backward); its slot began the partition.
    if (!partition.find_slot(config.slot)) config.slot = partition.slots.front().name;
    validate_config(gpu, partition, config);
    return config;
  }
  return {freq_mhz, gpu.default_comm_ctas, partition.slots.front().name};
}

InstructionRun run_overlapped(const GpuSpec& gpu, const workload::Workload& workload, int stage, Direction direction,
                              int freq_mhz, const CommChoices& choices) {
  InstructionRun total;
  auto run_direction = [&](Direction pass) {
    for (const partition::Partition& partition : partition::build_partitions(workload, stage, pass)) {
      add(total, run_partition(gpu, partition, config_for(gpu, partition, freq_mhz, choices)));
    }
  };
  if (direction == Direction::kBackward && workload.parallel.recompute == workload::Recompute::kFull) {
    run_direction(Direction::kForward);
  }
  run_direction(direction);
  const workload::NonpartitionWork work = workload::build_nonpartition_work(workload, stage);
  const auto& ops = direction == Direction::kForward ? work.forward : work.backward;
  for (int nanobatch = 0; nanobatch < workload.parallel.nanobatches; ++nanobatch) {
    add(total, run_serial(gpu, ops, freq_mhz, gpu.default_comm_ctas));
  }
  return total;
}

InstructionRun run_sequential(const GpuSpec& gpu, const workload::Workload& workload, int stage, Direction direction,
                              int freq_mhz) {
  // Megatron without nanobatching: the whole microbatch is one "nanobatch".
  workload::Workload whole = workload;
  whole.parallel.nanobatches = 1;
  const workload::LayerGraph graph = workload::build_layer_graph(whole);
  std::vector<workload::Op> layer_ops;
  if (direction == Direction::kBackward && whole.parallel.recompute == workload::Recompute::kFull) {
    layer_ops = graph.forward;
  }
  const auto& pass = direction == Direction::kForward ? graph.forward : graph.backward;
  layer_ops.insert(layer_ops.end(), pass.begin(), pass.end());
  InstructionRun total;
  const PartitionRun layer = run_serial(gpu, layer_ops, freq_mhz, gpu.default_comm_ctas);
  total.time_s = layer.time_s * workload.stage_layers[stage];
  total.energy_j = layer.energy_j * workload.stage_layers[stage];
  const workload::NonpartitionWork work = workload::build_nonpartition_work(whole, stage);
  add(total, run_serial(gpu, direction == Direction::kForward ? work.forward : work.backward, freq_mhz,
                        gpu.default_comm_ctas));
  return total;
}

}  // namespace

OverlapMode parse_overlap_mode(const std::string& text) {
  if (text == "none") return OverlapMode::kNone;
  if (text == "nanobatch") return OverlapMode::kNanobatch;
  throw InputError(fmt::format("--overlap {}: expected \"none\" (Megatron) or \"nanobatch\"", text));
}

InstructionRun run_instruction(const GpuSpec& gpu, const workload::Workload& workload, int stage, Direction direction,
                               int freq_mhz, OverlapMode overlap, const CommChoices& choices) {
  require_supported_clock(gpu, freq_mhz, "--clock");
  if (overlap == OverlapMode::kNone) return run_sequential(gpu, workload, stage, direction, freq_mhz);
  return run_overlapped(gpu, workload, stage, direction, freq_mhz, choices);
}

InstructionRun run_gradient_reduction(const GpuSpec& gpu, const workload::Workload& workload, int stage, int freq_mhz) {
  const std::optional<workload::Op> reduction = workload::gradient_reduction(workload, stage);
  if (!reduction) return {};
  const PartitionRun run = run_serial(gpu, {*reduction}, freq_mhz, gpu.default_comm_ctas);
  return {run.time_s, run.energy_j};
}

}  // namespace kareus::device
