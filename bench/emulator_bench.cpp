// Emulator speed: partition evaluations per second (target >= 50,000 per core) and a whole
// iteration of llama3.3-70b at TP 8, PP 8, 64 microbatches (target < 1 s, < 500 MB).
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include "kareus/device/emulator.h"
#include "kareus/partition/partition.h"
#include "kareus/planner/plan_simulator.h"
#include "kareus/workload/model.h"

namespace {

using namespace kareus;

void BM_PartitionMeasure(benchmark::State& state) {
  workload::Parallelism parallel;
  const workload::Workload workload = workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
  const partition::Partition partition = partition::representative_partition(workload, "fwd_attn");
  device::EmulatedDevice device(device::load_gpu("a100-40gb"), {});
  const std::vector<int> clocks = device.gpu().supported_clocks_mhz();
  std::size_t index = 0;
  for (auto _ : state) {
    const partition::KnobConfig config{clocks[index % clocks.size()], 3 + static_cast<int>(index % 10) * 3,
                                       partition.slots[index % 4].name};
    benchmark::DoNotOptimize(device.measure(partition, config));
    ++index;
  }
  state.counters["evaluations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PartitionMeasure);

void BM_SimulateLlama70B(benchmark::State& state) {
  workload::Parallelism parallel;
  parallel.tp = 8;
  parallel.pp = 8;
  parallel.microbatches = 64;
  const workload::Workload workload = workload::make_workload(workload::load_model("llama3.3-70b"), parallel);
  device::EmulatedDevice exact = device::exact_emulator(device::load_gpu("a100-40gb"));
  for (auto _ : state) {
    benchmark::DoNotOptimize(planner::simulate_locked_clock(exact, workload, 1410, workload::OverlapMode::kNanobatch));
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["max_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024;
}
BENCHMARK(BM_SimulateLlama70B)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
