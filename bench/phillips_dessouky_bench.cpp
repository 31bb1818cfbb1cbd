// Benchmarks PhillipsDessouky on generated Perseus profiles (bench/make_profile.py): the
// artifact's shape (2 stages x 8 microbatches) and a large one (8 stages x 64 microbatches),
// 15 clocks per instruction, unit 1 ms, static power 85 W. Results: bench/RESULTS.md.
#include <algorithm>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/plan/perseus_csv.h"

namespace {

using namespace kareus;

pipeline::PipelineDag make_dag(const std::string& file, int stages, int microbatches, double unit_time_s,
                               pipeline::QuantumRule rule = pipeline::QuantumRule::kFastest) {
  const plan::PerseusProfile profile = plan::read_perseus_csv(std::string(KAREUS_BENCH_DATA_DIR) + "/" + file, stages);
  pipeline::OneFOneBConfig config;
  config.microbatches = microbatches;
  config.unit_time_s = unit_time_s;
  config.static_power_w = 85;
  config.quantum_rule = rule;
  for (const plan::StageProfile& stage : profile.stages) {
    pipeline::StageOptions options;
    for (const plan::ProfileOption& row : stage.forward)
      options.forward.push_back({row.time_s, row.energy_j, 0, row.freq_mhz, 0});
    for (const plan::ProfileOption& row : stage.backward)
      options.backward.push_back({row.time_s, row.energy_j, 0, row.freq_mhz, 0});
    config.stages.push_back(options);
  }
  return pipeline::build_one_f_one_b_dag(config);
}

void solve(benchmark::State& state, const std::string& file, int stages, int microbatches, double unit_time_s = 0.001) {
  const pipeline::PipelineDag dag = make_dag(file, stages, microbatches, unit_time_s);
  std::size_t iterations = 0;
  std::size_t frontier = 0;
  for (auto _ : state) {
    const pipeline::PhillipsDessoukyResult result = pipeline::PhillipsDessouky(dag, {}).run();
    iterations = result.iterations.size();
    frontier = result.frontier.size();
    benchmark::DoNotOptimize(result.frontier.data());
  }
  // Quality, outside the timed loop: distance of each frontier point above the certified
  // lower bound (relaxation_lower_bound) at its time.
  const pipeline::PhillipsDessoukyResult result = pipeline::PhillipsDessouky(dag, {}).run();
  const std::vector<pipeline::BoundPoint> bound = pipeline::relaxation_lower_bound(
      make_dag(file, stages, microbatches, unit_time_s, pipeline::QuantumRule::kCheapest));
  double max_gap = 0;
  double sum_gap = 0;
  for (const int index : result.frontier) {
    const pipeline::IterationResult& point = result.iterations[index];
    const double gap = point.energy_j / pipeline::lower_bound_at(bound, point.time_s) - 1;
    max_gap = std::max(max_gap, gap);
    sum_gap += gap;
  }
  // The same at every time of the bound's grid between our fastest and least-energy points:
  // our best energy at time <= T against the bound at T (the staircase between our points).
  double max_staircase_gap = 0;
  const double first_s = result.iterations[result.frontier.front()].time_s;
  const double last_s = result.iterations[result.frontier.back()].time_s;
  for (const pipeline::BoundPoint& point : bound) {
    if (point.time_s < first_s || point.time_s > last_s) continue;
    double ours = 0;
    for (const int index : result.frontier) {
      if (result.iterations[index].time_s <= point.time_s) ours = result.iterations[index].energy_j;
    }
    max_staircase_gap = std::max(max_staircase_gap, ours / pipeline::lower_bound_at(bound, point.time_s) - 1);
  }
  state.counters["max_gap_to_bound_pct"] = 100 * max_gap;
  state.counters["max_staircase_gap_pct"] = 100 * max_staircase_gap;
  state.counters["mean_gap_to_bound_pct"] = 100 * sum_gap / static_cast<double>(result.frontier.size());
  state.counters["reverted_iterations"] = result.reverted_iterations;
  state.counters["operations"] = static_cast<double>(dag.operations.size());
  state.counters["pd_iterations"] = static_cast<double>(iterations);
  state.counters["frontier_points"] = static_cast<double>(frontier);
  state.counters["us_per_pd_iteration"] =
      benchmark::Counter(static_cast<double>(iterations) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_PhillipsDessouky_2x8(benchmark::State& state) { solve(state, "a100_2stages.csv", 2, 8); }
// The convex profile at 5 ms: the walks' case (most frontier points come from them).
void BM_PhillipsDessouky_Convex2x8At5ms(benchmark::State& state) { solve(state, "convex_2stages.csv", 2, 8, 0.005); }
void BM_PhillipsDessouky_8x64(benchmark::State& state) { solve(state, "a100_8stages.csv", 8, 64); }

BENCHMARK(BM_PhillipsDessouky_2x8)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PhillipsDessouky_Convex2x8At5ms)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PhillipsDessouky_8x64)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
