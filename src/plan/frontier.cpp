#include "kareus/plan/frontier.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/evenly_spread.h"
#include "kareus/common/file_io.h"
#include "kareus/plan/perseus_csv.h"
#include "kareus/workload/workload.h"

namespace kareus::plan {
namespace {

using pipeline::ExecutionOption;

std::vector<ExecutionOption> to_options(const std::vector<ProfileOption>& rows) {
  std::vector<ExecutionOption> options;
  for (const ProfileOption& row : rows) options.push_back({row.time_s, row.energy_j, 0, row.freq_mhz, 0});
  return options;
}

// At most `max_points` indices of `frontier`, evenly spread, the first and last always kept
// (all of them when max_points <= 0).
std::vector<int> sample(const std::vector<int>& frontier, int max_points) {
  if (max_points <= 0) return frontier;
  std::vector<int> kept;
  for (const std::size_t position : evenly_spread_positions(frontier.size(), static_cast<std::size_t>(max_points))) {
    kept.push_back(frontier[position]);
  }
  return kept;
}

}  // namespace

Plan plan_from_iteration(const pipeline::PipelineDag& dag, const pipeline::IterationResult& iteration,
                         std::string workload_json) {
  Plan plan;
  plan.workload_json = std::move(workload_json);
  plan.predicted_time_s = iteration.time_s;
  plan.predicted_energy_j = iteration.energy_j;
  plan.stages.resize(dag.stages);
  for (int stage = 0; stage < dag.stages; ++stage) plan.stages[stage].stage = stage;
  // Instructions were added stage by stage in 1F1B order, so file order = execution order.
  for (std::size_t op = 0; op < dag.operations.size(); ++op) {
    const pipeline::Operation& operation = dag.operations[op];
    if (operation.kind != pipeline::OperationKind::kInstruction) continue;
    const ExecutionOption& chosen = dag.specs[operation.spec].options()[iteration.option_indices[op]];
    plan.stages[operation.instruction.stage].instructions.push_back(
        {operation.instruction.type, operation.instruction.microbatch, chosen.knob, std::nullopt, {}});
  }
  return plan;
}

std::string frontier_to_json(const SolveSummary& summary) {
  nlohmann::ordered_json document;
  document["schema"] = kFrontierSchema;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const FrontierPoint& point : summary.points) {
    points.push_back({{"time_s", point.time_s}, {"energy_j", point.energy_j}, {"plan", point.plan}});
  }
  document["points"] = std::move(points);
  return document.dump(2) + "\n";
}

std::string solve_report_to_json(const SolveSummary& summary, double unit_time_s, double static_power_w) {
  nlohmann::ordered_json document;
  document["schema"] = kSolveSchema;
  document["stop_reason"] = pipeline::to_string(summary.stop_reason);
  document["iterations"] = summary.iterations;
  document["unit_time_s"] = unit_time_s;
  document["static_power_w"] = static_power_w;
  document["solver_s"] = summary.solver_s;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const FrontierPoint& point : summary.points) {
    nlohmann::ordered_json entry = {{"time_s", point.time_s}, {"energy_j", point.energy_j}};
    if (summary.bound) entry["lower_bound_energy_j"] = point.lower_bound_energy_j;
    points.push_back(std::move(entry));
  }
  document["points"] = std::move(points);
  return document.dump(2) + "\n";
}

SolveSummary solve_perseus_profile(const SolveRequest& request) {
  if (request.stages < 1 || request.stages > workload::kMaxPipelineStages) {
    throw InputError(
        fmt::format("--stages must be in [1, {}], found {}", workload::kMaxPipelineStages, request.stages));
  }
  if (request.microbatches < 1 || request.microbatches > workload::kMaxMicrobatches) {
    throw InputError(
        fmt::format("--microbatches must be in [1, {}], found {}", workload::kMaxMicrobatches, request.microbatches));
  }
  // With times <= kMaxInstructionTimeS, a unit >= kMinUnitTimeS keeps every quantized time
  // (and their sum over the pipeline) inside 64 bits.
  if (!(request.unit_time_s >= kMinUnitTimeS) || !std::isfinite(request.unit_time_s)) {
    throw InputError(fmt::format("--unit-time must be >= {:g} seconds, found {}", kMinUnitTimeS, request.unit_time_s));
  }
  if (!(request.static_power_w >= 0) || !std::isfinite(request.static_power_w)) {
    throw InputError(fmt::format("--static-power must be >= 0 watts, found {}", request.static_power_w));
  }
  if (request.max_points < 0) throw InputError(fmt::format("--max-points must be >= 0, found {}", request.max_points));
  const PerseusProfile profile = read_perseus_csv(request.profile, request.stages);
  ensure_writable_directory(request.out, "--out");

  pipeline::OneFOneBConfig config;
  config.microbatches = request.microbatches;
  config.unit_time_s = request.unit_time_s;
  config.static_power_w = request.static_power_w;
  for (const StageProfile& stage : profile.stages)
    config.stages.push_back({to_options(stage.forward), to_options(stage.backward)});
  const pipeline::PipelineDag dag = pipeline::build_one_f_one_b_dag(config);

  // One iteration per unit of makespan between the all-slowest and all-fastest plans; each
  // keeps one option per operation. Refuse a unit that would take hours or tens of GB.
  std::vector<int> slowest, fastest(dag.operations.size(), 0);
  for (const pipeline::Operation& operation : dag.operations) {
    slowest.push_back(static_cast<int>(dag.specs[operation.spec].options().size()) - 1);
  }
  const double range_s = pipeline::evaluate_plan(dag, slowest, dag.stages).time_s -
                         pipeline::evaluate_plan(dag, fastest, dag.stages).time_s;
  const double work = (range_s / request.unit_time_s + 1) * static_cast<double>(dag.operations.size());
  if (work > 5e7) {
    throw InputError(
        fmt::format("--unit-time {} s over a makespan range of {:.6g} s and {} operations needs {:.3g} "
                    "operation-iterations (limit 5e7); use a larger --unit-time",
                    request.unit_time_s, range_s, dag.operations.size(), work));
  }

  pipeline::PhillipsDessoukyOptions options;
  options.progress = request.progress;
  const auto started = std::chrono::steady_clock::now();
  const std::clock_t cpu_started = std::clock();
  const pipeline::PhillipsDessoukyResult result = pipeline::PhillipsDessouky(dag, options).run();
  const double solver_cpu_s = static_cast<double>(std::clock() - cpu_started) / CLOCKS_PER_SEC;
  const double solver_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const std::filesystem::path frontier_path = request.out / "frontier.json";
  const std::filesystem::path plans_dir = request.out / "plans";
  std::error_code ignored;
  std::filesystem::remove(frontier_path, ignored);
  std::filesystem::create_directories(plans_dir, ignored);
  if (std::filesystem::is_directory(plans_dir, ignored)) {
    for (const auto& entry : std::filesystem::directory_iterator(plans_dir, ignored)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("plan_", 0) == 0 && entry.path().extension() == ".json")
        std::filesystem::remove(entry.path(), ignored);
    }
  }
  ensure_writable_directory(plans_dir, "--out");

  nlohmann::ordered_json workload;
  workload["source"] = "perseus_csv";
  workload["profile"] = request.profile.string();
  workload["stages"] = request.stages;
  workload["microbatches"] = request.microbatches;
  workload["unit_time_s"] = request.unit_time_s;
  workload["static_power_w"] = request.static_power_w;
  const std::string workload_json = workload.dump();

  std::vector<pipeline::BoundPoint> bound;
  if (request.bound) {
    config.quantum_rule = pipeline::QuantumRule::kCheapest;
    bound = pipeline::relaxation_lower_bound(pipeline::build_one_f_one_b_dag(config));
  }

  SolveSummary summary;
  summary.bound = request.bound;
  summary.stop_reason = result.stop_reason;
  summary.iterations = static_cast<int>(result.iterations.size());
  summary.solver_s = solver_s;
  summary.solver_cpu_s = solver_cpu_s;
  int number = 0;
  for (const int index : sample(result.frontier, request.max_points)) {
    const pipeline::IterationResult& iteration = result.iterations[index];
    const std::string relative = fmt::format("plans/plan_{:04d}.json", number++);
    write_plan(request.out / relative, plan_from_iteration(dag, iteration, workload_json));
    summary.points.push_back({iteration.time_s, iteration.energy_j, relative,
                              request.bound ? pipeline::lower_bound_at(bound, iteration.time_s) : 0.0});
  }
  write_file_atomic(request.out / "solve.json",
                    solve_report_to_json(summary, request.unit_time_s, request.static_power_w));
  write_file_atomic(frontier_path, frontier_to_json(summary));
  return summary;
}

}  // namespace kareus::plan
