#include "method_options.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/partition/partition.h"
#include "kareus/search/front_remeasurement.h"
#include "kareus/search/search.h"

namespace kareus::planner {
namespace {

/// Adds measurements so that every clock has at least one config of the key: the CTA count
/// and slot of the two fastest points of the found effective-energy front, at each missing
/// clock (the composition is per clock; a search budget leaves some clocks unmeasured).
std::size_t fill_missing_clocks(device::Device& device, const partition::Partition& representative,
                                const std::vector<int>& clocks, double static_power_w,
                                std::vector<search::Evaluation>& evaluations) {
  const std::vector<search::Evaluation> front =
      search::pareto_front(evaluations, static_power_w, search::Objective::kEffectiveEnergy);
  std::size_t added = 0;
  for (int clock : clocks) {
    const bool measured = std::any_of(evaluations.begin(), evaluations.end(),
                                      [clock](const search::Evaluation& one) { return one.config.freq_mhz == clock; });
    if (measured) continue;
    for (std::size_t index = 0; index < std::min<std::size_t>(front.size(), 2); ++index) {
      const partition::KnobConfig config{clock, front[index].config.ctas, front[index].config.slot};
      const device::Measurement measurement = device.measure(representative, config);
      evaluations.push_back({config, measurement.time_s, measurement.energy_j});
      ++added;
    }
  }
  return added;
}

/// Every logged config of `representative` (means of repeats). Throws InputError naming the
/// key, or a clock of `clocks` at which it has no measurement.
std::vector<search::Evaluation> logged_evaluations(const device::ReplayDevice& replay,
                                                   const partition::Partition& representative,
                                                   const std::vector<int>& clocks) {
  std::vector<search::Evaluation> evaluations;
  for (const device::MeasuredConfig& measured : replay.measured_configs(representative)) {
    evaluations.push_back({measured.config, measured.mean.time_s, measured.mean.energy_j});
  }
  if (evaluations.empty()) {
    throw InputError(
        fmt::format("--measurements: no measurement of partition {} in the logs (profile it, e.g. "
                    "`kareus profile --all`)",
                    representative.key));
  }
  for (int clock : clocks) {
    const bool measured = std::any_of(evaluations.begin(), evaluations.end(),
                                      [clock](const search::Evaluation& one) { return one.config.freq_mhz == clock; });
    if (!measured) {
      throw InputError(fmt::format("--measurements: partition {} has no measurement at {} MHz (a clock of --clocks)",
                                   representative.key, clock));
    }
  }
  return evaluations;
}

/// Every searchable key of `direction`'s instruction on `stage` at the GPU's default collective
/// config (NCCL's channel count, launched at the partition's first slot): what
/// Nanobatching+Perseus runs.
partition::CommConfigs default_choices(const device::GpuSpec& gpu, const workload::Workload& workload, int stage,
                                       Direction direction) {
  partition::CommConfigs choices;
  for (const auto& [key, count] : compose::key_instance_counts(workload, stage, direction)) {
    choices[key] = {partition::representative_partition(workload, key).slots.front().name, gpu.default_comm_ctas};
  }
  return choices;
}

/// Appends to `direction`'s instruction of a stage one execution option (its time and energy)
/// and the knobs that produce it, indexed alike.
void add_option(pipeline::StageOptions& options, StageKnobs& knobs, Direction direction, double time_s, double energy_j,
                Knob knob, double static_power_w) {
  auto& list = direction == Direction::kForward ? options.forward : options.backward;
  auto& knob_list = direction == Direction::kForward ? knobs.forward : knobs.backward;
  list.push_back(pipeline::make_execution_option(time_s, energy_j, static_cast<int>(knob_list.size()), static_power_w));
  knob_list.push_back(std::move(knob));
}

/// A method's options with one entry per model chunk in pipeline order, each run as a stage of
/// its own: `fill(chunks, stage, options, knobs)` adds that stage's options and knobs.
template <typename Fill>
MethodOptions per_chunk_stage(const workload::Workload& workload, Fill fill) {
  MethodOptions method;
  const workload::Workload chunks = workload::chunk_stages(workload);
  for (int stage = 0; stage < chunks.parallel.pp; ++stage) {
    pipeline::StageOptions options;
    StageKnobs knobs;
    fill(chunks, stage, options, knobs);
    method.stages.push_back(std::move(options));
    method.knobs.push_back(std::move(knobs));
  }
  return method;
}

}  // namespace

MethodOptions clock_options(device::Device& device, const workload::Workload& workload, const std::vector<int>& clocks,
                            device::OverlapMode overlap) {
  const device::GpuSpec& gpu = device.gpu();
  return per_chunk_stage(workload, [&](const workload::Workload& chunks, int stage, pipeline::StageOptions& options,
                                       StageKnobs& knobs) {
    for (int clock : clocks) {
      for (Direction direction : {Direction::kForward, Direction::kBackward}) {
        // A nanobatched plan names a config for every key it runs (plan_fit.h): the defaults.
        const partition::CommConfigs choices = overlap == device::OverlapMode::kNanobatch
                                                   ? default_choices(gpu, chunks, stage, direction)
                                                   : partition::CommConfigs{};
        const device::InstructionRun run =
            device::run_instruction(device, chunks, stage, direction, clock, overlap, choices);
        add_option(options, knobs, direction, run.time_s, run.energy_j, {clock, overlap, choices}, gpu.static_power_w);
      }
    }
  });
}

compose::PartitionMeasurements measure_partitions(const PlanDevices& devices, const workload::Workload& workload,
                                                  const PlanJobOptions& options, std::vector<KeySearch>& searches) {
  compose::PartitionMeasurements measurements;
  for (const std::string& key : partition::searchable_keys(workload)) {
    const partition::Partition representative = partition::representative_partition(workload, key);
    const partition::SearchSpace space =
        partition::make_search_space(representative, options.clocks_mhz, options.space);
    if (devices.measurements != nullptr) {
      measurements[key] = logged_evaluations(*devices.measurements, representative, options.clocks_mhz);
      searches.push_back({key, space.size(), measurements[key].size(), 0, 0});
      continue;
    }
    device::Device& device = devices.search;
    search::SearchOptions search_options;
    search_options.seed = options.seed;
    search_options.budget = std::clamp<std::size_t>(
        static_cast<std::size_t>(std::ceil(options.search_budget_fraction * static_cast<double>(space.size()))), 1,
        space.size());
    search_options.workload_json = workload::workload_to_json(workload);
    const bool exhaustive = options.search_budget_fraction <= 0 || search_options.budget >= space.size();
    if (options.progress) {
      options.progress(exhaustive ? fmt::format("measuring all {} configs of partition {}", space.size(), key)
                                  : fmt::format("searching partition {}: {} of {} configs", key, search_options.budget,
                                                space.size()));
    }
    search::SearchResult found = exhaustive ? search::run_exhaustive(device, representative, space, search_options)
                                            : search::run_search(device, representative, space, search_options);
    KeySearch record{key, space.size(), found.evaluations.size(), 0, 0};
    record.clock_fill =
        fill_missing_clocks(device, representative, options.clocks_mhz, device.gpu().static_power_w, found.evaluations);
    record.front_remeasurements = search::remeasure_front(device, representative, options.front_repeats,
                                                          device.gpu().static_power_w, found.evaluations);
    searches.push_back(record);
    measurements[key] = std::move(found.evaluations);
  }
  return measurements;
}

MethodOptions composed_options(device::Device& device, const workload::Workload& workload,
                               const compose::PartitionMeasurements& measurements, const PlanJobOptions& options) {
  const device::GpuSpec& gpu = device.gpu();
  int pruned_points = 0;
  MethodOptions method = per_chunk_stage(workload, [&](const workload::Workload& chunks, int stage,
                                                       pipeline::StageOptions& stage_options, StageKnobs& knobs) {
    for (Direction direction : {Direction::kForward, Direction::kBackward}) {
      const compose::InstructionComposition composition = compose::compose_instruction(
          device, chunks, stage, direction, measurements, options.clocks_mhz, options.compose);
      if (composition.options.empty()) {
        const std::string which =
            workload.parallel.vpp == 1
                ? fmt::format("stage {}", stage)
                : fmt::format("stage {} chunk {}", stage % workload.parallel.pp, stage / workload.parallel.pp);
        throw Error(fmt::format("{}: no clock has measurements for every partition key", which));
      }
      pruned_points += composition.pruned_points;
      for (const compose::ComposedOption& option : composition.options) {
        double time_s = option.time_s, energy_j = option.energy_j;
        if (options.recost_compositions) {
          // What the instruction costs on the execution device with these choices: the first
          // and last layers' partitions are not the representatives composition scaled.
          const device::InstructionRun run = device::run_instruction(device, chunks, stage, direction, option.freq_mhz,
                                                                     device::OverlapMode::kNanobatch, option.choices);
          time_s = run.time_s;
          energy_j = run.energy_j;
        }
        add_option(stage_options, knobs, direction, time_s, energy_j,
                   {option.freq_mhz, device::OverlapMode::kNanobatch, option.choices}, gpu.static_power_w);
      }
      if (!options.overlap_per_instruction) continue;
      // The baselines' executions are kareus choices too: without nanobatching, and nanobatched
      // with the default comm configs, at every clock. The solver takes whichever is better
      // per instruction, so kareus never loses to Perseus or Nanobatching+Perseus.
      const partition::CommConfigs defaults = default_choices(gpu, chunks, stage, direction);
      for (int clock : options.clocks_mhz) {
        for (const auto& [overlap, choices] : {std::pair{device::OverlapMode::kNone, partition::CommConfigs{}},
                                               std::pair{device::OverlapMode::kNanobatch, defaults}}) {
          const device::InstructionRun run =
              device::run_instruction(device, chunks, stage, direction, clock, overlap, choices);
          add_option(stage_options, knobs, direction, run.time_s, run.energy_j, {clock, overlap, choices},
                     gpu.static_power_w);
        }
      }
    }
  });
  method.pruned_points = pruned_points;
  return method;
}

}  // namespace kareus::planner
