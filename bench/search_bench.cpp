// Overhead of the per-partition search itself (surrogate fits + EHVI acquisition), per batch,
// on the largest artifact space: fwd_qkv_ag of llama3.2-3b CP2 TP4 (18 clocks x 20 CTA
// counts x 3 slots = 1,080 configs) with a budget of 10% (108). Measurements on the emulator
// take ~2.5 us each, so the time between batches is the search's own. Target: < 1 s per batch.
#include <time.h>

#include <algorithm>
#include <chrono>

#include <benchmark/benchmark.h>

#include "kareus/device/emulator.h"
#include "kareus/search/search.h"
#include "kareus/workload/model.h"

namespace {

using namespace kareus;

// CPU time of this thread: the search is single-threaded with one device, and the machine is
// shared, so wall time overstates it.
double thread_cpu_s() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

void search_overhead(benchmark::State& state, search::Strategy strategy) {
  workload::Parallelism parallel;
  parallel.cp = 2;
  parallel.tp = 4;
  const workload::Workload work = workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const partition::Partition part = partition::representative_partition(work, "fwd_qkv_ag");
  partition::SpaceOptions space_options;
  space_options.slots = partition::SlotPolicy::kArtifact;
  const partition::SearchSpace space = partition::make_search_space(part, device::artifact_clocks(gpu), space_options);
  search::SearchOptions options;
  options.budget = static_cast<std::size_t>(state.range(0));
  options.strategy = strategy;
  double worst_batch_s = 0;
  double worst_batch_cpu_s = 0;
  double total_batches = 0;
  double evaluations = 0;
  for (auto _ : state) {
    device::EmulatedDevice device(gpu, {true, 0});
    auto last = std::chrono::steady_clock::now();
    double last_cpu_s = thread_cpu_s();
    bool first = true;
    options.progress = [&](std::size_t, std::size_t) {
      const auto now = std::chrono::steady_clock::now();
      const double now_cpu_s = thread_cpu_s();
      // The first report follows the initial design, which needs no model.
      if (!first) {
        worst_batch_s = std::max(worst_batch_s, std::chrono::duration<double>(now - last).count());
        worst_batch_cpu_s = std::max(worst_batch_cpu_s, now_cpu_s - last_cpu_s);
      }
      first = false;
      last = now;
      last_cpu_s = now_cpu_s;
    };
    const search::SearchResult result = search::run_search(device, part, space, options);
    total_batches += static_cast<double>(result.batches);
    evaluations += static_cast<double>(result.evaluations.size());
    benchmark::DoNotOptimize(result.evaluations.data());
  }
  state.counters["space"] = static_cast<double>(space.size());
  state.counters["batches"] = total_batches / static_cast<double>(state.iterations());
  state.counters["evaluations"] = evaluations / static_cast<double>(state.iterations());
  state.counters["worst_batch_wall_s"] = worst_batch_s;
  state.counters["worst_batch_cpu_s"] = worst_batch_cpu_s;
}

void BM_KareusSearch(benchmark::State& state) { search_overhead(state, search::Strategy::kKareus); }
void BM_ArtifactSearch(benchmark::State& state) { search_overhead(state, search::Strategy::kArtifact); }

}  // namespace

BENCHMARK(BM_KareusSearch)->Arg(108)->Arg(216)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ArtifactSearch)->Arg(108)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_MAIN();
