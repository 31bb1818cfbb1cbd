#include "kareus/search/search.h"

#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/device/emulator.h"
#include "kareus/search/search_quality.h"
#include "kareus/workload/model.h"

namespace kareus::search {
namespace {

struct Fixture {
  workload::Workload work;
  device::GpuSpec gpu;
  partition::Partition part;
  partition::SearchSpace space;
};

Fixture fixture(const std::string& key, int cp, int tp,
                partition::SlotPolicy slots = partition::SlotPolicy::kArtifact) {
  workload::Parallelism parallel;
  parallel.cp = cp;
  parallel.tp = tp;
  const workload::Workload work = workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
  device::GpuSpec gpu = device::load_gpu("a100-40gb");
  partition::Partition part = partition::representative_partition(work, key);
  partition::SpaceOptions options;
  options.slots = slots;
  partition::SearchSpace space = partition::make_search_space(part, device::artifact_clocks(gpu), options);
  return {work, std::move(gpu), std::move(part), std::move(space)};
}

// Every config of the fixture's space on the exact emulator.
std::vector<Evaluation> exact_values(const Fixture& f) {
  device::EmulatedDevice exact = device::exact_emulator(f.gpu);
  return exact_evaluations(exact, f.part, f.space);
}

// Hypervolume ratio of everything the search evaluated (`front_only`: of its measured front).
double ratio(const Fixture& f, const SearchResult& result, Objective objective, bool front_only = false) {
  std::vector<partition::KnobConfig> found;
  const std::vector<Evaluation>& points =
      !front_only ? result.evaluations
                  : (objective == Objective::kEnergy ? result.energy_front : result.effective_energy_front);
  for (const Evaluation& point : points) found.push_back(point.config);
  return hypervolume_ratio(found, exact_values(f), f.space, f.gpu.static_power_w, objective);
}

TEST(Search, SameSeedGivesTheSameEvaluationsAndFronts) {
  const Fixture f = fixture("fwd_mlp", 1, 8);
  ASSERT_EQ(f.space.size(), 540u);
  SearchOptions options;
  options.budget = 54;
  options.seed = 5;
  device::EmulatedDevice first_device(f.gpu, {true, 5});
  device::EmulatedDevice second_device(f.gpu, {true, 5});
  const SearchResult first = run_search(first_device, f.part, f.space, options);
  const SearchResult second = run_search(second_device, f.part, f.space, options);
  ASSERT_EQ(first.evaluations.size(), 54u);
  ASSERT_EQ(second.evaluations.size(), first.evaluations.size());
  for (std::size_t index = 0; index < first.evaluations.size(); ++index) {
    EXPECT_EQ(first.evaluations[index].config, second.evaluations[index].config);
    EXPECT_EQ(first.evaluations[index].time_s, second.evaluations[index].time_s);
    EXPECT_EQ(first.evaluations[index].energy_j, second.evaluations[index].energy_j);
  }
  ASSERT_EQ(first.energy_front.size(), second.energy_front.size());
  EXPECT_EQ(first.stop_reason, second.stop_reason);
  // No config is measured twice.
  for (std::size_t a = 0; a < first.evaluations.size(); ++a) {
    for (std::size_t b = 0; b < a; ++b) EXPECT_FALSE(first.evaluations[a].config == first.evaluations[b].config);
  }
}

TEST(Search, ParallelDevicesGiveTheSameResultAsOne) {
  const Fixture f = fixture("fwd_mlp", 1, 8);
  SearchOptions options;
  options.budget = 30;
  options.seed = 2;
  device::EmulatedDevice one(f.gpu, {true, 2});
  const SearchResult serial = run_search(one, f.part, f.space, options);
  device::EmulatedDevice a(f.gpu, {true, 2}), b(f.gpu, {true, 2}), c(f.gpu, {true, 2});
  device::Device* devices[] = {&a, &b, &c};
  const SearchResult parallel = run_search(devices, f.part, f.space, options);
  ASSERT_EQ(serial.evaluations.size(), parallel.evaluations.size());
  for (std::size_t index = 0; index < serial.evaluations.size(); ++index) {
    EXPECT_EQ(serial.evaluations[index].config, parallel.evaluations[index].config);
    EXPECT_EQ(serial.evaluations[index].energy_j, parallel.evaluations[index].energy_j);
  }
}

TEST(Search, TenPercentBudgetFindsNearlyTheExhaustiveFront) {
  // fwd_attn (720 configs) and a CP partition (fwd_qkv_ag, 1,080 configs), default noise.
  for (const auto& [key, cp, tp] : {std::tuple{"fwd_attn", 1, 8}, std::tuple{"fwd_qkv_ag", 2, 4}}) {
    SCOPED_TRACE(key);
    const Fixture f = fixture(key, cp, tp);
    SearchOptions options;
    options.budget = (f.space.size() + 5) / 10;
    device::EmulatedDevice device(f.gpu, {true, 0});
    const SearchResult result = run_search(device, f.part, f.space, options);
    EXPECT_LE(result.evaluations.size(), options.budget);
    EXPECT_GE(ratio(f, result, Objective::kEnergy), 0.98);
    EXPECT_GE(ratio(f, result, Objective::kEffectiveEnergy), 0.98);
    // What the measured fronts report loses a little to noise, never much.
    EXPECT_GE(ratio(f, result, Objective::kEnergy, true), 0.95);
    EXPECT_GE(ratio(f, result, Objective::kEffectiveEnergy, true), 0.95);
  }
}

TEST(Search, PastTheRefitLimitHyperparametersAreRefittedWhenTheDataGrowByAQuarter) {
  // fwd_attn (720 configs), budget 72: an 18-config initial design, then 27 batches of 2, each
  // choosing at n = 18, 20, ..., 70 measurements. With the limit at 24 the batches at n = 18,
  // 20, 22, 24 refit, then those at n = 30 (>= 24 + 6), 38 (>= 30 + 7), 48 (>= 38 + 9) and
  // 60 (>= 48 + 12): 8 fits. With the limit at the budget every batch refits: 27.
  const Fixture f = fixture("fwd_attn", 1, 8);
  for (const auto& [limit, fits] : {std::pair<std::size_t, std::size_t>{24, 8}, {72, 27}}) {
    SCOPED_TRACE(limit);
    SearchOptions options;
    options.budget = 72;
    options.min_relative_gain = 0;
    options.refit_every_batch_up_to = limit;
    device::EmulatedDevice device(f.gpu, {true, 0});
    const SearchResult result = run_search(device, f.part, f.space, options);
    ASSERT_EQ(result.evaluations.size(), 72u);
    EXPECT_EQ(result.batches, 1u + 27u);
    EXPECT_EQ(result.surrogate_fits, fits);
    EXPECT_GE(ratio(f, result, Objective::kEnergy), 0.98);
    EXPECT_GE(ratio(f, result, Objective::kEffectiveEnergy), 0.98);
  }
}

TEST(Search, ExhaustiveMeasuresEverythingAndIsItsOwnGroundTruth) {
  const Fixture f = fixture("fwd_ao_ar", 2, 4);
  ASSERT_EQ(f.space.size(), 180u);
  device::EmulatedDevice device(f.gpu, {false, 0});
  const SearchResult result = run_exhaustive(device, f.part, f.space, {});
  EXPECT_EQ(result.evaluations.size(), f.space.size());
  EXPECT_EQ(result.stop_reason, StopReason::kSpaceExhausted);
  EXPECT_DOUBLE_EQ(ratio(f, result, Objective::kEnergy), 1.0);
  EXPECT_DOUBLE_EQ(ratio(f, result, Objective::kEffectiveEnergy), 1.0);
  // Ratio of a single front point is well below 1.
  EXPECT_LT(hypervolume_ratio({result.energy_front.front().config}, exact_values(f), f.space, f.gpu.static_power_w,
                              Objective::kEnergy),
            0.999);
}

TEST(Search, FullBudgetEndsWithTheSpaceExhausted) {
  Fixture f = fixture("fwd_ao_ar", 2, 4);
  f.space = partition::SearchSpace({1350, 1380, 1410}, {3, 6, 9, 12, 15, 18, 21, 24, 27, 30}, {"attn_0"});
  SearchOptions options;
  options.budget = f.space.size();
  options.min_relative_gain = 0;
  device::EmulatedDevice device(f.gpu, {true, 0});
  const SearchResult result = run_search(device, f.part, f.space, options);
  EXPECT_EQ(result.evaluations.size(), f.space.size());
  EXPECT_EQ(result.stop_reason, StopReason::kSpaceExhausted);
}

TEST(Search, ArtifactStrategySpendsExactlyItsBudget) {
  const Fixture f = fixture("fwd_mlp", 1, 8);
  SearchOptions options;
  options.budget = 54;
  options.strategy = Strategy::kArtifact;
  device::EmulatedDevice device(f.gpu, {true, 0});
  const SearchResult result = run_search(device, f.part, f.space, options);
  EXPECT_EQ(result.evaluations.size(), 54u);
  EXPECT_EQ(result.batches, 5u);  // random design + 4 quota batches
  EXPECT_GE(ratio(f, result, Objective::kEnergy), 0.9);
}

TEST(Search, BudgetOutsideTheSpaceIsAnInputError) {
  const Fixture f = fixture("fwd_ao_ar", 2, 4);
  device::EmulatedDevice device(f.gpu, {true, 0});
  for (std::size_t budget : {std::size_t{0}, f.space.size() + 1}) {
    SearchOptions options;
    options.budget = budget;
    try {
      (void)run_search(device, f.part, f.space, options);
      ADD_FAILURE() << "budget " << budget << " accepted";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find("--budget"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("180"), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW((void)parse_strategy("bayes"), InputError);
  SearchOptions one;
  one.budget = 1;
  EXPECT_THROW((void)run_search(std::span<device::Device* const>{}, f.part, f.space, one), InputError);
}

TEST(Search, FeaturesSpanTheUnitCube) {
  const Fixture f = fixture("fwd_attn", 1, 8);
  EXPECT_EQ(config_features(f.space, 0), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(config_features(f.space, f.space.size() - 1), (std::vector<double>{1, 1, 1}));
}

}  // namespace
}  // namespace kareus::search
