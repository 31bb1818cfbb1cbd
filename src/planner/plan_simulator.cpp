#include "kareus/planner/plan_simulator.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/device/instruction.h"
#include "kareus/plan/plan_fit.h"

namespace kareus::planner {

using plan::PlannedInstruction;
using plan::StagePlan;

void check_plan_fits(const plan::Plan& plan, const workload::Workload& workload, const device::GpuSpec& gpu,
                     std::string_view origin) {
  plan::check_plan_workload(plan, plan::plan_workload_json(workload, gpu.name), origin);
  plan::check_plan_fits(plan, workload, {{gpu.sm_count, gpu.default_comm_ctas}, gpu.supported_clocks_mhz(), gpu.name},
                        origin);
}

pipeline::IterationRun simulate_plan(device::Device& device, const workload::Workload& workload, const plan::Plan& plan,
                                     std::optional<workload::OverlapMode> fallback) {
  // Each model chunk runs as a stage of its own (embedding, head and sends where Megatron has them).
  const workload::Workload chunks = workload::chunk_stages(workload);
  // chunk's pipeline position, type, clock, overlap, configs
  using Key = std::tuple<int, int, int, workload::OverlapMode, std::string>;
  std::map<Key, pipeline::InstructionCost> cache;
  auto run_at = [&](int stage, const PlannedInstruction& instruction, int freq_mhz, bool default_choices) {
    const int position = workload.virtual_stage(stage, instruction.chunk);
    const workload::OverlapMode overlap = plan::effective_overlap(instruction, fallback);
    partition::CommConfigs choices;
    std::string signature;
    if (overlap == workload::OverlapMode::kNanobatch && !default_choices) {
      for (const auto& [key, config] : instruction.partitions) {
        choices[key] = config;
        signature += fmt::format("{}:{}:{};", key, config.ctas, config.slot);
      }
    }
    const Key key{position, static_cast<int>(instruction.type), freq_mhz, overlap, signature};
    auto [entry, inserted] = cache.try_emplace(key);
    if (inserted) {
      try {
        const device::InstructionRun run =
            device::run_instruction(device, chunks, position, instruction.type, freq_mhz, overlap, choices);
        entry->second = {run.time_s, run.energy_j};
      } catch (...) {
        cache.erase(entry);
        throw;
      }
    }
    return entry->second;
  };
  std::vector<int> previous_clock(plan.stages.size(), 0);
  std::vector<std::size_t> position(plan.stages.size(), 0);
  const double switch_s = device.gpu().clock_switch_latency_ms * 1e-3;
  auto cost = [&](const pipeline::Instruction& instruction) {
    // The simulator asks for each stage's instructions in order.
    const PlannedInstruction& planned = plan.stages[instruction.stage].instructions[position[instruction.stage]++];
    if (planned.type != instruction.type || planned.microbatch != instruction.microbatch ||
        planned.chunk != instruction.chunk) {
      throw Error(
          fmt::format("simulate: stage {} runs its plan out of order (a plan for another vpp or microbatch "
                      "count; check_plan_fits says which)",
                      instruction.stage));
    }
    pipeline::InstructionCost now = run_at(instruction.stage, planned, planned.freq_mhz, false);
    int& previous = previous_clock[instruction.stage];
    if (previous != 0 && previous != planned.freq_mhz) {
      // The first switch_s of the instruction still runs at the old clock. Replayed logs may
      // lack the planned comm configs at the old clock; the default configs stand in then.
      pipeline::InstructionCost old;
      try {
        old = run_at(instruction.stage, planned, previous, false);
      } catch (const device::UnmeasuredError&) {
        old = run_at(instruction.stage, planned, previous, true);
      }
      const double fraction = std::min(1.0, switch_s / old.time_s);
      now = {fraction * old.time_s + (1 - fraction) * now.time_s,
             fraction * old.energy_j + (1 - fraction) * now.energy_j};
    }
    previous = planned.freq_mhz;
    return now;
  };
  std::vector<pipeline::InstructionCost> tail;
  for (int stage = 0; stage < workload.parallel.pp; ++stage) {
    const int last_clock = plan.stages[stage].instructions.back().freq_mhz;
    const device::InstructionRun reduction = device::run_gradient_reduction(device, workload, stage, last_clock);
    tail.push_back({reduction.time_s, reduction.energy_j});
  }
  return pipeline::simulate_interleaved_one_f_one_b(workload.parallel.pp, workload.parallel.vpp,
                                                    workload.parallel.microbatches, cost, device.gpu().static_power_w,
                                                    workload.gpus_per_stage(), tail);
}

plan::Plan uniform_plan(const workload::Workload& workload, int freq_mhz, workload::OverlapMode overlap) {
  plan::Plan plan;
  plan.workload_json = workload::workload_to_json(workload);
  for (int stage = 0; stage < workload.parallel.pp; ++stage) {
    StagePlan stage_plan{stage, {}};
    for (const pipeline::Instruction& instruction : pipeline::interleaved_one_f_one_b(
             stage, workload.parallel.pp, workload.parallel.vpp, workload.parallel.microbatches)) {
      stage_plan.instructions.push_back(
          {instruction.type, instruction.microbatch, freq_mhz, overlap, {}, instruction.chunk});
    }
    plan.stages.push_back(std::move(stage_plan));
  }
  return plan;
}

pipeline::IterationRun simulate_locked_clock(device::Device& device, const workload::Workload& workload, int freq_mhz,
                                             workload::OverlapMode overlap) {
  return simulate_plan(device, workload, uniform_plan(workload, freq_mhz, overlap));
}

}  // namespace kareus::planner
