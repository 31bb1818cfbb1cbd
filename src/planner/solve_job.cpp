#include "kareus/planner/solve_job.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/plan/perseus_csv.h"
#include "kareus/planner/solved_plan.h"
#include "kareus/planner/solver_unit.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {
namespace {

using pipeline::ExecutionOption;

void check_request(const SolveRequest& request) {
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
  if (!(request.unit_time_s >= plan::kMinUnitTimeS) || !std::isfinite(request.unit_time_s)) {
    throw InputError(
        fmt::format("--unit-time must be >= {:g} seconds, found {}", plan::kMinUnitTimeS, request.unit_time_s));
  }
  if (!(request.static_power_w >= 0) || !std::isfinite(request.static_power_w)) {
    throw InputError(fmt::format("--static-power must be >= 0 watts, found {}", request.static_power_w));
  }
  if (request.max_points < 0) throw InputError(fmt::format("--max-points must be >= 0, found {}", request.max_points));
  if (request.deadlines_s.size() > kMaxDeadlines) {
    throw InputError(fmt::format("--deadline given {} times, at most {}", request.deadlines_s.size(), kMaxDeadlines));
  }
  for (const double deadline_s : request.deadlines_s) {
    if (!(deadline_s > 0) || !std::isfinite(deadline_s)) {
      throw InputError(fmt::format("--deadline must be > 0 seconds, found {}", deadline_s));
    }
  }
}

/// The 1F1B configuration of the profile: each row's clock is its option's knob.
pipeline::OneFOneBConfig one_f_one_b_config(const plan::PerseusProfile& profile, const SolveRequest& request) {
  auto to_options = [](const std::vector<plan::ProfileOption>& rows) {
    std::vector<ExecutionOption> options;
    for (const plan::ProfileOption& row : rows) options.push_back({row.time_s, row.energy_j, 0, row.freq_mhz, 0});
    return options;
  };
  pipeline::OneFOneBConfig config;
  config.microbatches = request.microbatches;
  config.unit_time_s = request.unit_time_s;
  config.static_power_w = request.static_power_w;
  for (const plan::StageProfile& stage : profile.stages)
    config.stages.push_back({to_options(stage.forward), to_options(stage.backward)});
  return config;
}

/// Refuses a unit that would take hours or tens of GB.
void check_solve_size(const pipeline::PipelineDag& dag, double unit_time_s) {
  const double range_s = makespan_range_s(dag);
  const double work = solve_work(range_s, unit_time_s, dag.operations.size());
  if (work > 5e7) {
    throw InputError(
        fmt::format("--unit-time {} s over a makespan range of {:.6g} s and {} operations needs {:.3g} "
                    "operation-iterations (limit 5e7); use a larger --unit-time",
                    unit_time_s, range_s, dag.operations.size(), work));
  }
}

/// Removes OUT/frontier.json and the plan files of an earlier solve; makes OUT/plans.
void clear_outputs(const std::filesystem::path& out) {
  const std::filesystem::path plans_dir = out / "plans";
  std::error_code ignored;
  std::filesystem::remove(out / "frontier.json", ignored);
  std::filesystem::create_directories(plans_dir, ignored);
  if (std::filesystem::is_directory(plans_dir, ignored)) {
    for (const auto& entry : std::filesystem::directory_iterator(plans_dir, ignored)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("plan_", 0) == 0 && entry.path().extension() == ".json")
        std::filesystem::remove(entry.path(), ignored);
    }
  }
  ensure_writable_directory(plans_dir, "--out");
}

std::string workload_json(const SolveRequest& request) {
  nlohmann::ordered_json workload;
  workload["source"] = "perseus_csv";
  workload["profile"] = request.profile.string();
  workload["stages"] = request.stages;
  workload["microbatches"] = request.microbatches;
  workload["unit_time_s"] = request.unit_time_s;  // as given: the plan's source, not the solver's unit
  workload["static_power_w"] = request.static_power_w;
  return workload.dump();
}

// The frontier points written: all of them when max_points <= 0, else sample_frontier's (the
// asked deadlines' points kept).
std::vector<int> sample(const pipeline::PhillipsDessoukyResult& result, int max_points,
                        const std::vector<double>& deadlines_s) {
  if (max_points <= 0) return result.frontier;
  std::vector<int> kept;
  for (const int position : sample_frontier(result, max_points, deadlines_s)) kept.push_back(result.frontier[position]);
  return kept;
}

/// Writes the plans of the sampled frontier points and returns the points; a Perseus
/// profile's knob is the instruction's clock.
std::vector<plan::FrontierPoint> write_plans(const SolveRequest& request, const pipeline::PipelineDag& dag,
                                             const pipeline::PhillipsDessoukyResult& result,
                                             const std::vector<pipeline::BoundPoint>& bound) {
  const std::string workload = workload_json(request);
  const ApplyKnob clock = [](const KnobChoice& choice, plan::PlannedInstruction& instruction) {
    instruction.freq_mhz = choice.knob;
  };
  std::vector<plan::FrontierPoint> points;
  int number = 0;
  for (const int index : sample(result, request.max_points, request.deadlines_s)) {
    const pipeline::IterationResult& iteration = result.iterations[index];
    const std::string relative = fmt::format("plans/plan_{:04d}.json", number++);
    plan::Plan solved = plan_from_options(dag, result.options_of(index), workload, clock);
    solved.predicted_time_s = iteration.time_s;
    solved.predicted_energy_j = iteration.energy_j;
    plan::write_plan(request.out / relative, solved);
    points.push_back({iteration.time_s, iteration.energy_j, relative,
                      request.bound ? pipeline::lower_bound_at(bound, iteration.time_s) : 0.0});
  }
  return points;
}

}  // namespace

std::string solve_report_to_json(const SolveSummary& summary, double unit_time_s, double static_power_w) {
  nlohmann::ordered_json document;
  document["schema"] = kSolveSchema;
  document["stop_reason"] = pipeline::to_string(summary.stop_reason);
  document["iterations"] = summary.iterations;
  document["unit_time_s"] = unit_time_s;
  document["static_power_w"] = static_power_w;
  document["solver_s"] = summary.solver_s;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const plan::FrontierPoint& point : summary.points) {
    nlohmann::ordered_json entry = {{"time_s", point.time_s}, {"energy_j", point.energy_j}};
    if (summary.bound) entry["lower_bound_energy_j"] = point.lower_bound_energy_j;
    points.push_back(std::move(entry));
  }
  document["points"] = std::move(points);
  return document.dump(2) + "\n";
}

SolveSummary solve_perseus_profile(const SolveRequest& request) {
  check_request(request);
  const plan::PerseusProfile profile = plan::read_perseus_csv(request.profile, request.stages);
  ensure_writable_directory(request.out, "--out");
  pipeline::OneFOneBConfig config = one_f_one_b_config(profile, request);
  check_solve_size(pipeline::build_one_f_one_b_dag(config), request.unit_time_s);
  const pipeline::PipelineDag dag = build_solver_dag(config, request.refine_unit);

  pipeline::PhillipsDessoukyOptions options;
  options.progress = request.progress;
  options.polish_deadlines_s = request.deadlines_s;
  const auto started = std::chrono::steady_clock::now();
  const std::clock_t cpu_started = std::clock();
  const pipeline::PhillipsDessoukyResult result = pipeline::PhillipsDessouky(dag, options).run();
  SolveSummary summary;
  summary.solver_cpu_s = static_cast<double>(std::clock() - cpu_started) / CLOCKS_PER_SEC;
  summary.solver_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  summary.bound = request.bound;
  summary.stop_reason = result.stop_reason;
  summary.iterations = static_cast<int>(result.iterations.size());
  summary.unit_time_s = config.unit_time_s;

  clear_outputs(request.out);
  std::vector<pipeline::BoundPoint> bound;
  if (request.bound) {
    config.quantum_rule = pipeline::QuantumRule::kCheapest;
    bound = pipeline::relaxation_lower_bound(pipeline::build_one_f_one_b_dag(config));
  }
  summary.points = write_plans(request, dag, result, bound);
  write_file_atomic(request.out / "solve.json",
                    solve_report_to_json(summary, summary.unit_time_s, request.static_power_w));
  write_file_atomic(request.out / "frontier.json", plan::frontier_to_json(summary.points));
  return summary;
}

}  // namespace kareus::planner
