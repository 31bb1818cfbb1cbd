// What bounding JSON input costs: the nesting-depth scan parse_json runs before nlohmann's parser,
// against the parse itself, on a large plan (16 stages x 256 microbatches, four partitions per
// instruction, 3.4 MB). Results: bench/RESULTS.md ("Hostile input").
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "kareus/common/file_io.h"
#include "kareus/pipeline/schedule.h"
#include "kareus/plan/plan.h"

namespace {

using namespace kareus;

const std::string& large_plan_text() {
  static const std::string text = [] {
    plan::Plan result;
    result.workload_json = R"({"model": "bench"})";
    for (int stage = 0; stage < 16; ++stage) {
      plan::StagePlan stage_plan{stage, {}};
      for (const auto& instruction : pipeline::one_f_one_b(stage, 16, 256)) {
        plan::PlannedInstruction planned{
            instruction.type, instruction.microbatch, 1410, workload::OverlapMode::kNanobatch, {}};
        for (const char* key : {"fwd_attn_ag", "fwd_mlp_rs", "bwd_attn_ag", "bwd_mlp_rs"}) {
          planned.partitions[key] = {"linear_0", 8};
        }
        stage_plan.instructions.push_back(planned);
      }
      result.stages.push_back(stage_plan);
    }
    return plan::plan_to_json(result);
  }();
  return text;
}

void BM_DepthScan(benchmark::State& state) {
  const std::string& text = large_plan_text();
  for (auto _ : state) check_json_depth(text, "plan.json");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_DepthScan)->Unit(benchmark::kMillisecond);

void BM_NlohmannParse(benchmark::State& state) {
  const std::string& text = large_plan_text();
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(text));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_NlohmannParse)->Unit(benchmark::kMillisecond);

void BM_ParseJsonBounded(benchmark::State& state) {
  const std::string& text = large_plan_text();
  for (auto _ : state) benchmark::DoNotOptimize(parse_json(text, "plan.json"));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ParseJsonBounded)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
