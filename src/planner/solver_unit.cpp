#include "kareus/planner/solver_unit.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kareus/pipeline/operation.h"
#include "kareus/pipeline/phillips_dessouky.h"

namespace kareus::planner {
namespace {

/// Whether some instruction's options fall into fewer quantized times than min(its distinct
/// option times, kWantedQuanta).
bool options_collapse(const pipeline::OneFOneBConfig& config, double unit_time_s) {
  constexpr std::size_t kWantedQuanta = 8;
  auto collapses = [&](const std::vector<pipeline::ExecutionOption>& options) {
    std::vector<double> times;
    std::vector<std::int64_t> quanta;
    for (const pipeline::ExecutionOption& option : options) {
      times.push_back(option.time_s);
      quanta.push_back(pipeline::quantize_time(option.time_s, unit_time_s));
    }
    std::sort(times.begin(), times.end());
    std::sort(quanta.begin(), quanta.end());
    const auto distinct_times = static_cast<std::size_t>(std::unique(times.begin(), times.end()) - times.begin());
    const auto distinct_quanta = static_cast<std::size_t>(std::unique(quanta.begin(), quanta.end()) - quanta.begin());
    return distinct_quanta < std::min(distinct_times, kWantedQuanta);
  };
  return std::any_of(config.stages.begin(), config.stages.end(), [&](const pipeline::StageOptions& stage) {
    return collapses(stage.forward) || collapses(stage.backward);
  });
}

}  // namespace

/// The makespan range between the all-slowest and all-fastest plans, seconds.
double makespan_range_s(const pipeline::PipelineDag& dag) {
  std::vector<int> slowest, fastest(dag.operations.size(), 0);
  for (const pipeline::Operation& operation : dag.operations) {
    slowest.push_back(static_cast<int>(dag.specs[operation.spec].options().size()) - 1);
  }
  return pipeline::evaluate_plan(dag, slowest, dag.stages).time_s -
         pipeline::evaluate_plan(dag, fastest, dag.stages).time_s;
}

/// One iteration per unit of makespan in the range; each keeps one option per operation.
double solve_work(double range_s, double unit_time_s, std::size_t operations) {
  return (range_s / unit_time_s + 1) * static_cast<double>(operations);
}

double solver_unit_time_s(const pipeline::OneFOneBConfig& config, double range_s, std::size_t operations) {
  double unit_time_s = config.unit_time_s;
  for (int halvings = 0; halvings < kMaxUnitHalvings && options_collapse(config, unit_time_s); ++halvings) {
    const double finer = unit_time_s / 2;
    if (range_s / finer > kMaxRefinedUnits || solve_work(range_s, finer, operations) > kMaxRefinedWork) {
      break;
    }
    unit_time_s = finer;
  }
  return unit_time_s;
}

pipeline::PipelineDag build_solver_dag(pipeline::OneFOneBConfig& config, bool refine_unit) {
  pipeline::PipelineDag dag = pipeline::build_one_f_one_b_dag(config);
  if (!refine_unit) return dag;
  const double unit_time_s = solver_unit_time_s(config, makespan_range_s(dag), dag.operations.size());
  if (unit_time_s == config.unit_time_s) return dag;
  config.unit_time_s = unit_time_s;
  return pipeline::build_one_f_one_b_dag(config);
}

}  // namespace kareus::planner
