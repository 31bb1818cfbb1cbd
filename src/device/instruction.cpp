#include "kareus/device/instruction.h"

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/partition/comm_fit.h"
#include "kareus/partition/partition.h"

namespace kareus::device {
namespace {

void add(InstructionRun& total, const Measurement& run) {
  total.time_s += run.time_s;
  total.energy_j += run.energy_j;
}

partition::KnobConfig config_for(const GpuSpec& gpu, const partition::Partition& partition, int freq_mhz,
                                 const partition::CommConfigs& choices) {
  const std::optional<partition::CommConfig> comm =
      partition::comm_config_for(partition, choices, gpu.default_comm_ctas);
  if (!comm) return {freq_mhz, 0, ""};
  partition::KnobConfig config{freq_mhz, comm->ctas, comm->slot};
  validate_config(gpu, partition, config);
  return config;
}

/// The nonpartition ops of `direction` on `stage`, per nanobatch (or per microbatch when the
/// workload has one nanobatch), as serial work.
SerialWork nonpartition_work(const GpuSpec& gpu, const workload::Workload& workload, int stage, Direction direction) {
  const workload::NonpartitionWork work = workload::build_nonpartition_work(workload, stage);
  return {fmt::format("serial:nonpartition_{}:stage{}:{}", to_string(direction), stage,
                      workload.parallel.nanobatches == 1 ? "microbatch" : "nanobatch"),
          direction == Direction::kForward ? work.forward : work.backward, gpu.default_comm_ctas};
}

/// Which partitions of a nanobatched instruction to run.
enum class PartitionSet { kAll, kFixedOnly };

/// The instruction's partitions (all, or only those without a searchable collective) with
/// `choices`, then the nonpartition work of every nanobatch.
InstructionRun run_nanobatched(Device& device, const workload::Workload& workload, int stage, Direction direction,
                               int freq_mhz, const partition::CommConfigs& choices, PartitionSet set) {
  const GpuSpec& gpu = device.gpu();
  InstructionRun total;
  for (Direction pass : partition::instruction_passes(workload, direction)) {
    for (const partition::Partition& partition : partition::build_partitions(workload, stage, pass)) {
      if (set == PartitionSet::kFixedOnly && partition.searchable()) continue;
      add(total, device.measure(partition, config_for(gpu, partition, freq_mhz, choices)));
    }
  }
  const Measurement nonpartition = device.measure_serial(nonpartition_work(gpu, workload, stage, direction), freq_mhz);
  for (int nanobatch = 0; nanobatch < workload.parallel.nanobatches; ++nanobatch) add(total, nonpartition);
  return total;
}

InstructionRun run_sequential(Device& device, const workload::Workload& workload, int stage, Direction direction,
                              int freq_mhz) {
  const GpuSpec& gpu = device.gpu();
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
  const SerialWork layer_work{fmt::format("serial:layer_{}", to_string(direction)), std::move(layer_ops),
                              gpu.default_comm_ctas};
  const Measurement layer = device.measure_serial(layer_work, freq_mhz);
  total.time_s = layer.time_s * workload.stage_layers[stage];
  total.energy_j = layer.energy_j * workload.stage_layers[stage];
  add(total, device.measure_serial(nonpartition_work(gpu, whole, stage, direction), freq_mhz));
  return total;
}

}  // namespace

InstructionRun run_instruction(Device& device, const workload::Workload& workload, int stage, Direction direction,
                               int freq_mhz, OverlapMode overlap, const partition::CommConfigs& choices) {
  require_supported_clock(device.gpu(), freq_mhz, "--clock");
  if (overlap == OverlapMode::kNone) return run_sequential(device, workload, stage, direction, freq_mhz);
  return run_nanobatched(device, workload, stage, direction, freq_mhz, choices, PartitionSet::kAll);
}

InstructionRun run_fixed_work(Device& device, const workload::Workload& workload, int stage, Direction direction,
                              int freq_mhz) {
  require_supported_clock(device.gpu(), freq_mhz, "--clock");
  return run_nanobatched(device, workload, stage, direction, freq_mhz, {}, PartitionSet::kFixedOnly);
}

InstructionRun run_gradient_reduction(Device& device, const workload::Workload& workload, int stage, int freq_mhz) {
  const std::optional<workload::Op> reduction = workload::gradient_reduction(workload, stage);
  if (!reduction) return {};
  const Measurement run = device.measure_serial(
      {fmt::format("serial:gradient_reduction:stage{}", stage), {*reduction}, device.gpu().default_comm_ctas},
      freq_mhz);
  return {run.time_s, run.energy_j};
}

}  // namespace kareus::device
