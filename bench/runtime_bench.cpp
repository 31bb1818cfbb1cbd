// What the runtime costs the training thread: one 1F1B step through the plan cursor (with a
// comm-config lookup per instruction), and the Runtime path that also queues the clock change to
// the controller thread (recorder backend, a different clock every instruction: the worst case).
// Results: docs/runtime.md.
#include <benchmark/benchmark.h>

#include "kareus/pipeline/schedule.h"
#include "kareus/runtime/plan_cursor.h"
#include "kareus/runtime/runtime.h"

namespace {

using namespace kareus;

std::shared_ptr<const plan::Plan> bench_plan(int stages, int microbatches) {
  plan::Plan result;
  for (int stage = 0; stage < stages; ++stage) {
    plan::StagePlan stage_plan{stage, {}};
    int index = 0;
    for (const auto& instruction : pipeline::one_f_one_b(stage, stages, microbatches)) {
      plan::PlannedInstruction planned{
          instruction.type, instruction.microbatch, 1980 - 15 * (index++ % 2), workload::OverlapMode::kNanobatch, {}};
      for (const char* key : {"fwd_attn_ag", "fwd_mlp_rs", "bwd_attn_ag", "bwd_mlp_rs"}) {
        planned.partitions[key] = {"linear_0", 8};
      }
      stage_plan.instructions.push_back(planned);
    }
    result.stages.push_back(stage_plan);
  }
  return std::make_shared<const plan::Plan>(std::move(result));
}

void BM_PlanCursorStep(benchmark::State& state) {
  const int microbatches = static_cast<int>(state.range(0));
  auto plan = bench_plan(4, microbatches);
  runtime::PlanCursor cursor(plan, 0);
  const auto order = pipeline::one_f_one_b(0, 4, microbatches);
  for (auto _ : state) {
    cursor.on_step_begin();
    for (const auto& instruction : order) {
      benchmark::DoNotOptimize(cursor.on_instruction_begin(instruction.type, instruction.microbatch));
      benchmark::DoNotOptimize(cursor.comm_config("fwd_mlp_rs").ctas);
      cursor.on_instruction_end();
    }
    cursor.on_step_end();
  }
  state.counters["instructions"] =
      benchmark::Counter(static_cast<double>(order.size()) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PlanCursorStep)->Arg(8)->Arg(64);

void BM_RuntimeStepWithClockChanges(benchmark::State& state) {
  const int microbatches = static_cast<int>(state.range(0));
  runtime::Runtime runtime(bench_plan(4, microbatches), 0, std::make_unique<runtime::RecorderClockBackend>());
  const auto order = pipeline::one_f_one_b(0, 4, microbatches);
  for (auto _ : state) {
    runtime.on_step_begin();
    for (const auto& instruction : order) {
      runtime.on_instruction_begin(instruction.type, instruction.microbatch);
      runtime.on_instruction_end();
    }
    runtime.on_step_end();
    state.PauseTiming();
    runtime.flush();  // the controller keeps up between steps; not the training thread's cost
    state.ResumeTiming();
  }
  state.counters["instructions"] =
      benchmark::Counter(static_cast<double>(order.size()) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RuntimeStepWithClockChanges)->Arg(8);

}  // namespace
BENCHMARK_MAIN();
