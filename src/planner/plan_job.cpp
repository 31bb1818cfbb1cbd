#include "kareus/planner/plan_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/common/pareto.h"
#include "kareus/device/caching_device.h"
#include "kareus/partition/partition.h"
#include "kareus/pipeline/phillips_dessouky.h"
#include "kareus/planner/comparison.h"
#include "kareus/planner/plan_simulator.h"
#include "kareus/planner/solved_plan.h"
#include "kareus/planner/solver_unit.h"
#include "kareus/search/search.h"
#include "method_options.h"
#include "plans_within.h"

namespace kareus::planner {

using plan::PlannedInstruction;
namespace {

/// The plan of a solved iteration: each instruction's knob (an index into its stage's knobs)
/// turned into its clock, overlap and comm configs.
Plan make_plan(const pipeline::PipelineDag& dag, std::span<const int> option_indices, const MethodOptions& method,
               const std::string& workload_json) {
  return plan_from_options(
      dag, option_indices, workload_json, [&method, &dag](const KnobChoice& choice, PlannedInstruction& instruction) {
        const StageKnobs& knobs = method.knobs[choice.chunk * dag.stages + choice.stage];
        const Knob& knob = (choice.type == Direction::kForward ? knobs.forward : knobs.backward)[choice.knob];
        instruction.freq_mhz = knob.freq_mhz;
        instruction.overlap = knob.overlap;
        for (const auto& [key, config] : knob.choices) instruction.partitions[key] = {config.slot, config.ctas};
      });
}

MethodPoint evaluate(device::Device& device, const workload::Workload& workload, Plan plan) {
  MethodPoint point;
  point.run = simulate_plan(device, workload, plan);
  point.time_s = point.run.time_s;
  point.energy_j = point.run.energy_j;
  point.predicted_time_s = plan.predicted_time_s;
  point.predicted_energy_j = plan.predicted_energy_j;
  point.plan = std::move(plan);
  return point;
}

std::vector<MethodPoint> pareto_points(std::vector<MethodPoint> points) {
  return pareto_filter(
      std::move(points), [](const MethodPoint& point) { return point.time_s; },
      [](const MethodPoint& point) { return point.energy_j; });
}

/// The largest over stages of the sum over a stage's chunks of `pick`(forward) + `pick`(backward):
/// one microbatch's work on the busiest rank.
template <typename Pick>
double busiest_stage_s(const workload::Workload& workload, const MethodOptions& method, Pick pick) {
  double busiest_s = 0;
  for (int stage = 0; stage < workload.parallel.pp; ++stage) {
    double stage_s = 0;
    for (int chunk = 0; chunk < workload.parallel.vpp; ++chunk) {
      const pipeline::StageOptions& options = method.stages[workload.virtual_stage(stage, chunk)];
      stage_s += pick(options.forward) + pick(options.backward);
    }
    busiest_s = std::max(busiest_s, stage_s);
  }
  return busiest_s;
}

double slowest_time_s(const std::vector<pipeline::ExecutionOption>& options) {
  double time = 0;
  for (const pipeline::ExecutionOption& option : options) time = std::max(time, option.time_s);
  return time;
}

double fastest_time_s(const std::vector<pipeline::ExecutionOption>& options) {
  double time = INFINITY;
  for (const pipeline::ExecutionOption& option : options) time = std::min(time, option.time_s);
  return time;
}

/// 1 ms, or coarser so that slowest-to-fastest takes at most kMaxSolverSteps units: the
/// slowest makespan is bounded by (microbatches + stages - 1) x the busiest stage's F + B
/// (over its chunks).
double automatic_unit_time_s(const workload::Workload& workload, const MethodOptions& method) {
  constexpr double kMaxSolverSteps = 20000;
  const double makespan_s =
      (workload.parallel.microbatches + workload.parallel.pp - 1) * busiest_stage_s(workload, method, slowest_time_s);
  return std::max(0.001, makespan_s / kMaxSolverSteps);
}

/// A lower bound of the makespan: every instruction at its fastest option, no pipeline waits
/// beyond the busiest stage's own work.
double minimum_makespan_s(const workload::Workload& workload, const MethodOptions& method) {
  return workload.parallel.microbatches * busiest_stage_s(workload, method, fastest_time_s);
}

/// A method's frontier being solved: the solver runs on its own thread (the methods'
/// solves are independent and each is single-threaded), reading `dag`.
struct MethodSolve {
  Method name = Method::kPerseus;
  MethodOptions method;
  double unit_time_s = 0;
  std::unique_ptr<pipeline::PipelineDag> dag;                               // stays put while the solver reads it
  std::future<std::pair<pipeline::PhillipsDessoukyResult, double>> solved;  // and its wall seconds
};

/// The solver's progress every 2,000 iterations: how far the makespan has come down, and an
/// ETA from that pace. `options.progress` must take lines from several threads.
std::function<void(const pipeline::IterationResult&)> solver_progress(Method name, const PlanJobOptions& options,
                                                                      std::int64_t floor_quant_time) {
  const auto started = std::chrono::steady_clock::now();
  std::int64_t first_quant_time = -1;
  return [&options, name, started, floor_quant_time,
          first_quant_time](const pipeline::IterationResult& iteration) mutable {
    if (first_quant_time < 0) first_quant_time = iteration.quant_time;
    if (iteration.iteration == 0 || iteration.iteration % 2000 != 0) return;
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const double done = static_cast<double>(first_quant_time - iteration.quant_time);
    const double left = static_cast<double>(std::max<std::int64_t>(iteration.quant_time - floor_quant_time, 0));
    options.progress(fmt::format("{}: solver iteration {}, makespan {:.3f} s, ETA {:.0f} s", to_string(name),
                                 iteration.iteration, iteration.time_s, done > 0 ? elapsed_s * left / done : 0.0));
  };
}

/// Builds the method's (interleaved) 1F1B DAG (asking the device for the DP gradient reduction) and starts
/// its solve on another thread.
MethodSolve start_solve(Method name, device::Device& device, const workload::Workload& workload, MethodOptions method,
                        const PlanJobOptions& options) {
  const device::GpuSpec& gpu = device.gpu();
  pipeline::OneFOneBConfig config;
  config.microbatches = workload.parallel.microbatches;
  config.unit_time_s = options.unit_time_s > 0 ? options.unit_time_s : automatic_unit_time_s(workload, method);
  config.static_power_w = gpu.static_power_w;
  config.stages = method.stages;  // one per model chunk, in pipeline order
  config.chunks = workload.parallel.vpp;
  if (workload.parallel.dp > 1) {
    // The DP gradient all-reduce ends every stage's iteration (all its chunks' gradients); the
    // solver gets the largest stage's (embeddings make the first and last stages larger), at
    // the default clock.
    device::InstructionRun largest;
    for (int stage = 0; stage < workload.parallel.pp; ++stage) {
      const device::InstructionRun run = device::run_gradient_reduction(device, workload, stage, gpu.clock_default_mhz);
      if (run.time_s > largest.time_s) largest = run;
    }
    config.gradient_reduce = std::vector<pipeline::ExecutionOption>{
        pipeline::make_execution_option(largest.time_s, largest.energy_j, 0, gpu.static_power_w)};
  }
  MethodSolve solve;
  solve.name = name;
  solve.dag = std::make_unique<pipeline::PipelineDag>(build_solver_dag(config, !options.exact_unit));
  solve.unit_time_s = config.unit_time_s;
  pipeline::PhillipsDessoukyOptions solver_options;
  solver_options.gpus = workload.parallel.pp;
  if (options.progress) {
    solver_options.progress = solver_progress(
        name, options, pipeline::quantize_time(minimum_makespan_s(workload, method), config.unit_time_s));
  }
  solve.method = std::move(method);
  solve.solved = std::async(std::launch::async, [dag = solve.dag.get(), solver_options = std::move(solver_options)] {
    const auto started = std::chrono::steady_clock::now();
    pipeline::PhillipsDessoukyResult solved = pipeline::PhillipsDessouky(*dag, solver_options).run();
    return std::make_pair(std::move(solved),
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  });
  return solve;
}

/// Waits for the method's solve and simulates an evenly spread sample of its frontier (the
/// fastest and slowest always), and its plans within each of `within_times_s` (plans_within.h).
MethodResult finish_method(MethodSolve& solve, device::Device& device, const workload::Workload& workload,
                           const PlanJobOptions& options, const std::string& workload_json,
                           const std::vector<double>& within_times_s) {
  const auto [solved, solver_s] = solve.solved.get();
  MethodResult result;
  result.method = solve.name;
  result.solver_s = solver_s;
  result.solver_iterations = static_cast<int>(solved.iterations.size());
  result.pruned_points = solve.method.pruned_points;
  result.unit_time_s = solve.unit_time_s;
  const double scale = workload.gpus_per_stage();  // solver energies are for one GPU per stage
  for (int index : solved.frontier) {
    result.predicted_curve.emplace_back(solved.iterations[index].time_s, solved.iterations[index].energy_j * scale);
  }
  const int gpus = workload.parallel.pp;
  const RunPlan run = [&](std::span<const int> option_indices) {
    const pipeline::PlanEvaluation predicted = pipeline::evaluate_plan(*solve.dag, option_indices, gpus);
    Plan plan = make_plan(*solve.dag, option_indices, solve.method, workload_json);
    plan.predicted_time_s = predicted.time_s;
    plan.predicted_energy_j = predicted.energy_j * scale;
    return evaluate(device, workload, std::move(plan));
  };
  std::vector<MethodPoint> points;
  for (int position : sample_frontier(solved, std::max(options.max_plans, 2), {})) {
    points.push_back(run(solved.options_of(solved.frontier[position])));
  }
  if (!within_times_s.empty()) {
    options.progress(fmt::format("{}: plans within {} times (the baselines' achieved, and --within)",
                                 to_string(solve.name), within_times_s.size()));
    for (MethodPoint& point : plans_within(*solve.dag, solved, gpus, within_times_s, run)) {
      points.push_back(std::move(point));
    }
  }
  result.frontier = pareto_points(std::move(points));
  return result;
}

/// Megatron has no choice to make: its plan is the default clock everywhere. No solver
/// predicts it, so its "prediction" is its simulation (tests of predicted vs achieved leave it
/// out).
MethodResult megatron_result(device::Device& device, const workload::Workload& workload,
                             const std::string& workload_json) {
  MethodResult megatron;
  megatron.method = Method::kMegatron;
  Plan plan = uniform_plan(workload, device.gpu().clock_default_mhz, device::OverlapMode::kNone);
  plan.workload_json = workload_json;  // with the GPU, as every plan of the job
  megatron.frontier.push_back(evaluate(device, workload, std::move(plan)));
  MethodPoint& point = megatron.frontier.back();
  point.plan.predicted_time_s = point.predicted_time_s = point.time_s;
  point.plan.predicted_energy_j = point.predicted_energy_j = point.energy_j;
  megatron.predicted_curve.emplace_back(point.time_s, point.energy_j);
  return megatron;
}

/// Every baseline plan is a kareus plan (all instructions sequential, or nanobatched with
/// default configs; Megatron's when its clock is one of --clocks). Phillips-Dessouky walks one
/// path from the slowest plan, so where that path passes above a baseline's point, the
/// baseline's plan is kareus's best there. Megatron's matters where the solver's plans lose to
/// clock-switch latency it does not model (instructions of a few hundred us). `methods`' last
/// entry is kareus's.
void add_baseline_plans(std::vector<MethodResult>& methods, const std::vector<int>& clocks_mhz, int default_clock_mhz) {
  MethodResult& kareus = methods.back();
  const bool megatron_clock_allowed = std::ranges::find(clocks_mhz, default_clock_mhz) != clocks_mhz.end();
  for (const MethodResult& baseline : methods) {
    if (baseline.method == Method::kKareus) continue;
    if (baseline.method == Method::kMegatron && !megatron_clock_allowed) continue;
    for (MethodPoint point : baseline.frontier) {
      point.origin = baseline.method;
      kareus.frontier.push_back(std::move(point));
    }
  }
  kareus.frontier = pareto_points(std::move(kareus.frontier));
}

}  // namespace

PlanJobResult run_plan_job(const PlanDevices& devices, const workload::Workload& workload,
                           const PlanJobOptions& given) {
  device::Device& device = devices.execution;
  check_plan_job(device.gpu(), workload, given);
  // The solves report from their own threads: one line at a time.
  std::mutex progress_mutex;
  PlanJobOptions options = given;
  options.progress = [&progress_mutex, &given](const std::string& line) {
    if (!given.progress) return;
    const std::lock_guard<std::mutex> lock(progress_mutex);
    given.progress(line);
  };
  PlanJobResult result;
  result.device_kind = std::string(device.kind());
  result.within_times_s = options.within_times_s;
  result.sources = devices.sources;
  // First every solve is started (the device work each needs runs here, one method at a
  // time, while the solves already started run on the other cores); then, in --methods
  // order, each method's sampled plans are simulated.
  std::vector<MethodSolve> solves;
  for (const Method name : options.methods) {
    if (name == Method::kMegatron) continue;
    MethodOptions method;
    if (name == Method::kKareus) {
      result.measurements = measure_partitions(devices, workload, options, result.searches);
      options.progress("kareus: composing per-instruction options");
      method = composed_options(device, workload, result.measurements, options);
    } else {
      options.progress(
          fmt::format("{}: per-instruction options at {} clocks", to_string(name), options.clocks_mhz.size()));
      method = clock_options(device, workload, options.clocks_mhz, *overlap_of(name));
    }
    options.progress(fmt::format("{}: solving the pipeline frontier", to_string(name)));
    solves.push_back(start_solve(name, device, workload, std::move(method), options));
  }
  const std::string workload_json = plan::plan_workload_json(workload, device.gpu().name);  // what every plan records
  auto solve = solves.begin();
  for (const Method name : options.methods) {
    if (name == Method::kMegatron) {
      options.progress("megatron: default clock, no overlap");
      result.methods.push_back(megatron_result(device, workload, workload_json));
      continue;
    }
    std::vector<double> within_times_s;
    if (name == Method::kKareus) {
      within_times_s = options.within_times_s;
      for (const MethodResult& baseline : result.methods) {
        for (const MethodPoint& point : baseline.frontier) within_times_s.push_back(point.time_s);
      }
    }
    result.methods.push_back(finish_method(*solve++, device, workload, options, workload_json, within_times_s));
    if (name == Method::kKareus && options.overlap_per_instruction) {
      add_baseline_plans(result.methods, options.clocks_mhz, device.gpu().clock_default_mhz);
    }
    options.progress(fmt::format("{}: {} solver iterations in {:.2f} s", to_string(name),
                                 result.methods.back().solver_iterations, result.methods.back().solver_s));
  }
  const MethodResult* megatron = find_method(result.methods, Method::kMegatron);
  const MethodResult* perseus = find_method(result.methods, Method::kPerseus);
  for (const MethodResult& method : result.methods) {
    result.comparison.emplace_back(method.method, compare(method, megatron, perseus));
  }
  return result;
}

void measure_plan_inputs(device::Device& device, const workload::Workload& workload, const PlanJobOptions& options,
                         int fixed_repeats) {
  check_plan_job(device.gpu(), workload, options);
  std::vector<KeySearch> searches;
  (void)measure_partitions({device, device, nullptr, {}}, workload, options, searches);
  // Everything else the methods run, each distinct piece once per repeat: what
  // run_instruction (of each model chunk) and run_gradient_reduction (of each stage) ask a
  // replay device for.
  device::CachingDevice distinct(device, fixed_repeats);
  const workload::Workload chunks = workload::chunk_stages(workload);
  for (int clock : options.clocks_mhz) {
    if (options.progress) options.progress(fmt::format("fixed and serial work at {} MHz", clock));
    for (int position = 0; position < chunks.parallel.pp; ++position) {
      for (Direction direction : {Direction::kForward, Direction::kBackward}) {
        for (device::OverlapMode overlap : {device::OverlapMode::kNone, device::OverlapMode::kNanobatch}) {
          if (overlap == device::OverlapMode::kNanobatch && workload.parallel.nanobatches != 2) continue;
          (void)device::run_instruction(distinct, chunks, position, direction, clock, overlap);
        }
      }
      // Stage `position`'s (chunk 0 of each stage comes first in pipeline order).
      if (position < workload.parallel.pp) (void)device::run_gradient_reduction(distinct, workload, position, clock);
    }
  }
}

}  // namespace kareus::planner
