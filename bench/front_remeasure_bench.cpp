// Noise-robust fronts (issue: plans from real measurements): the hypervolume ratio of the front a
// search reports (the noise-free values of the configs on its measured front, over the exhaustive
// front) before and after re-measuring each front config until it has `repeats` measurements and
// taking the means, with the extra measurements that costs. Every searchable partition of Llama
// 3.2 3B at CP1 TP8 and CP2 TP4 (mbs 8, 4k), 10% budgets, seeds 0..2, default emulator noise.
#include <benchmark/benchmark.h>

#include "kareus/device/emulator.h"
#include "kareus/search/front_remeasurement.h"
#include "kareus/search/search.h"
#include "kareus/search/search_quality.h"
#include "kareus/workload/model.h"

namespace {

using namespace kareus;

void front_remeasure(benchmark::State& state) {
  const int repeats = static_cast<int>(state.range(0));
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const std::vector<int> clocks = device::artifact_clocks(gpu);
  device::EmulatedDevice exact_device = device::exact_emulator(gpu);
  double before = 0, after = 0, searched = 0, added = 0;
  int runs = 0;
  for (auto _ : state) {
    before = after = searched = added = 0;
    runs = 0;
    for (const auto& [cp, tp] : {std::pair{1, 8}, std::pair{2, 4}}) {
      workload::Parallelism parallel;
      parallel.cp = cp;
      parallel.tp = tp;
      const workload::Workload work = workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
      for (const std::string& key : partition::searchable_keys(work)) {
        const partition::Partition part = partition::representative_partition(work, key);
        const partition::SearchSpace space = partition::make_search_space(part, clocks, {});
        const std::vector<search::Evaluation> exact = search::exact_evaluations(exact_device, part, space);
        for (std::uint64_t seed = 0; seed < 3; ++seed) {
          device::EmulatedDevice device(gpu, {true, seed, 5});
          search::SearchOptions options;
          options.seed = seed;
          options.budget = std::max<std::size_t>(1, space.size() / 10);
          search::SearchResult result = search::run_search(device, part, space, options);
          auto front_ratio = [&](const std::vector<search::Evaluation>& evaluations) {
            std::vector<partition::KnobConfig> configs;
            for (const search::Evaluation& point :
                 search::pareto_front(evaluations, gpu.static_power_w, search::Objective::kEffectiveEnergy)) {
              configs.push_back(point.config);
            }
            return search::hypervolume_ratio(configs, exact, space, gpu.static_power_w,
                                             search::Objective::kEffectiveEnergy);
          };
          before += front_ratio(result.evaluations);
          searched += static_cast<double>(result.evaluations.size());
          added += static_cast<double>(
              search::remeasure_front(device, part, repeats, gpu.static_power_w, result.evaluations));
          after += front_ratio(result.evaluations);
          ++runs;
        }
      }
    }
  }
  state.counters["front_ratio_before"] = before / runs;
  state.counters["front_ratio_after"] = after / runs;
  state.counters["extra_measurements_pct"] = 100 * added / searched;
  state.counters["searches"] = runs;
}

BENCHMARK(front_remeasure)->Arg(2)->Arg(3)->Arg(5)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
