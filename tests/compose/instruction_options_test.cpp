#include "kareus/compose/instruction_options.h"

#include <cmath>

#include <gtest/gtest.h>

#include "../common/workloads.h"
#include "kareus/device/emulator.h"
#include "kareus/partition/partition.h"
#include "kareus/workload/model.h"

namespace kareus::compose {
namespace {

using test_common::llama_3b_15_13;

/// Every config of every searchable key at `clocks`, noise-free (exhaustive ground truth).
PartitionMeasurements exhaustive(const device::GpuSpec& gpu, const workload::Workload& workload,
                                 const std::vector<int>& clocks) {
  PartitionMeasurements measurements;
  partition::SpaceOptions space_options;
  space_options.tp_ctas = {6, 30, 6};
  space_options.cp_ctas = {2, 20, 6};
  for (const std::string& key : partition::searchable_keys(workload)) {
    const partition::Partition partition = partition::representative_partition(workload, key);
    const partition::SearchSpace space = partition::make_search_space(partition, clocks, space_options);
    for (std::size_t index = 0; index < space.size(); ++index) {
      const device::Measurement run = device::exact_emulator(gpu).measure(partition, space.at(index));
      measurements[key].push_back({space.at(index), run.time_s, run.energy_j});
    }
  }
  return measurements;
}

/// The A100 test workload (CP 1, TP 8) on the exact emulator, every config measured at `clocks`.
struct MeasuredA100 {
  explicit MeasuredA100(std::vector<int> at) : clocks(std::move(at)), measurements(exhaustive(gpu, workload, clocks)) {}
  [[nodiscard]] InstructionComposition compose(Direction direction, const ComposeOptions& options,
                                               const std::vector<int>& at = {}) {
    return compose_instruction(exact, workload, 0, direction, measurements, at.empty() ? clocks : at, options);
  }

  device::GpuSpec gpu = device::load_gpu("a100-40gb");
  device::EmulatedDevice exact = device::exact_emulator(gpu);
  workload::Workload workload = llama_3b_15_13(1, 8);
  std::vector<int> clocks;
  PartitionMeasurements measurements;
};

TEST(ComposeInstruction, CountsEveryKeyInstanceOfTheStage) {
  const workload::Workload workload = llama_3b_15_13(1, 8);
  // 15 layers x 2 nanobatches per key; layer 0's first partition has no collective.
  const auto forward = key_instance_counts(workload, 0, Direction::kForward);
  EXPECT_EQ(forward.at("fwd_attn"), 29);
  EXPECT_EQ(forward.at("fwd_mlp"), 30);
  const auto backward = key_instance_counts(workload, 1, Direction::kBackward);  // recompute + backward
  EXPECT_EQ(backward.at("fwd_attn"), 25);
  EXPECT_EQ(backward.at("bwd_mlp"), 25);
  EXPECT_EQ(backward.at("bwd_attn"), 26);
}

TEST(ComposeInstruction, PredictionMatchesTheSimulatedInstruction) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  device::EmulatedDevice exact = device::exact_emulator(gpu);
  for (const auto& [cp, tp] : {std::pair{1, 8}, std::pair{2, 4}}) {
    const workload::Workload workload = llama_3b_15_13(cp, tp);
    const std::vector<int> clocks = {1110, 1410};
    const PartitionMeasurements measurements = exhaustive(gpu, workload, clocks);
    for (Direction direction : {Direction::kForward, Direction::kBackward}) {
      for (int stage : {0, 1}) {
        SCOPED_TRACE(testing::Message() << "cp" << cp << " stage " << stage << " dir " << static_cast<int>(direction));
        const InstructionComposition composition =
            compose_instruction(exact, workload, stage, direction, measurements, clocks, {0});
        ASSERT_GT(composition.options.size(), 2u);
        EXPECT_EQ(composition.pruned_points, 0);
        for (std::size_t index = 0; index < composition.options.size(); index += 3) {
          const ComposedOption& option = composition.options[index];
          const device::InstructionRun run = device::run_instruction(exact, workload, stage, direction, option.freq_mhz,
                                                                     device::OverlapMode::kNanobatch, option.choices);
          // Not bit-exact: layer 0's NB1 partition lacks the previous layer's residual add that
          // the representative (a steady-state layer's) carries, ~0.1% of an instruction.
          EXPECT_NEAR(option.time_s / run.time_s, 1, 0.005);
          EXPECT_NEAR(option.energy_j / run.energy_j, 1, 0.005);
        }
      }
    }
  }
}

TEST(ComposeInstruction, ExactParetoSumMatchesBruteForceOverAllChoices) {
  // CP1: two forward keys; brute force every (fwd_attn, fwd_mlp) config pair at one clock.
  MeasuredA100 a100({1260});
  auto& [gpu, exact, workload, clocks, measurements] = a100;
  const InstructionComposition composition = a100.compose(Direction::kForward, {0});
  const auto counts = key_instance_counts(workload, 0, Direction::kForward);
  // The fixed work of the instruction, measured on its own (not taken from an option).
  const device::InstructionRun fixed = device::run_fixed_work(exact, workload, 0, Direction::kForward, 1260);
  const double base_time = fixed.time_s;
  const double base_energy = fixed.energy_j;
  // Every brute-force pair is weakly dominated in (t, E_eff) by some composed option.
  const double static_w = gpu.static_power_w;
  double fastest = INFINITY;
  for (const search::Evaluation& attn : measurements.at("fwd_attn")) {
    for (const search::Evaluation& mlp : measurements.at("fwd_mlp")) {
      const double time = base_time + counts.at("fwd_attn") * attn.time_s + counts.at("fwd_mlp") * mlp.time_s;
      fastest = std::min(fastest, time);
      const double energy = base_energy + counts.at("fwd_attn") * attn.energy_j + counts.at("fwd_mlp") * mlp.energy_j;
      bool dominated = false;
      for (const ComposedOption& option : composition.options) {
        dominated |= option.time_s <= time * (1 + 1e-12) &&
                     option.energy_j - static_w * option.time_s <= (energy - static_w * time) + 1e-9 * energy;
      }
      ASSERT_TRUE(dominated) << attn.config.ctas << attn.config.slot << " " << mlp.config.ctas << mlp.config.slot;
    }
  }
  // The fastest composed option is the fastest pair; fronts are strictly improving in E_eff.
  EXPECT_NEAR(composition.options.front().time_s, fastest, 1e-12 * fastest);
  for (std::size_t index = 1; index < composition.options.size(); ++index) {
    const auto effective = [&](const ComposedOption& option) {
      return option.energy_j - gpu.static_power_w * option.time_s;
    };
    EXPECT_GT(composition.options[index].time_s, composition.options[index - 1].time_s);
    EXPECT_LT(effective(composition.options[index]), effective(composition.options[index - 1]));
  }
}

TEST(ComposeInstruction, PruningBoundsOptionsPerClockAndCountsWhatItDropped) {
  MeasuredA100 a100({1410});
  const InstructionComposition unpruned = a100.compose(Direction::kBackward, {0});
  const InstructionComposition pruned = a100.compose(Direction::kBackward, {4});
  ASSERT_GT(unpruned.options.size(), 4u);
  EXPECT_LE(pruned.options.size(), 4u);
  EXPECT_GT(pruned.pruned_points, 0);
  EXPECT_NEAR(pruned.options.front().time_s, unpruned.options.front().time_s, 1e-9);
}

TEST(ComposeInstruction, ClockWithoutMeasurementsIsSkippedAndReported) {
  MeasuredA100 a100({1410});
  const InstructionComposition composition = a100.compose(Direction::kForward, {}, {1200, 1410});
  EXPECT_EQ(composition.skipped_clocks_mhz, std::vector<int>{1200});
  for (const ComposedOption& option : composition.options) EXPECT_EQ(option.freq_mhz, 1410);
}

}  // namespace
}  // namespace kareus::compose
