// kareus/planner/plan_job_result.h - what a plan job found: each method's frontier of plans,
// what the kareus method measured per partition key, and the comparison with the baselines.
//
// Units: seconds, joules (whole job, one iteration).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kareus/compose/instruction_options.h"
#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/plan/plan.h"
#include "kareus/planner/method.h"

namespace kareus::planner {

using plan::Plan;

struct MethodPoint {
  double time_s = 0;    ///< achieved (plan simulator)
  double energy_j = 0;  ///< achieved, whole job
  double predicted_time_s = 0;
  double predicted_energy_j = 0;
  Plan plan;
  pipeline::IterationRun run;    ///< what the plan simulator ran
  std::optional<Method> origin;  ///< the method whose solve found the plan, when not this one
};

struct MethodResult {
  Method method = Method::kMegatron;
  std::vector<MethodPoint> frontier;  ///< Pareto-optimal in achieved (time, energy), time ascending
  std::vector<std::pair<double, double>> predicted_curve;  ///< the solver's whole frontier (time_s, energy_j)
  int solver_iterations = 0;
  double solver_s = 0;
  double unit_time_s = 0;  ///< the solver's time unit
  int pruned_points = 0;   ///< composition pruning (kareus)
};

/// The metrics of docs/metrics.md, in percent; nullopt where the baseline has no plan to compare with.
struct Comparison {
  std::optional<double> max_throughput_time_reduction_pct;
  std::optional<double> max_throughput_energy_reduction_pct;
  std::optional<double> iso_time_energy_reduction_pct;
  std::optional<double> iso_energy_time_reduction_pct;
};

/// What the kareus method measured for one partition key.
struct KeySearch {
  std::string key;
  std::size_t space_size = 0;
  std::size_t evaluations = 0;           ///< chosen by the search
  std::size_t clock_fill = 0;            ///< extra measurements so every clock has a config to compose
  std::size_t front_remeasurements = 0;  ///< repeats of the configs on the front (front_repeats)
};

struct PlanJobResult {
  std::vector<MethodResult> methods;
  std::vector<KeySearch> searches;
  std::vector<std::pair<Method, Comparison>> comparison;
  compose::PartitionMeasurements measurements;  ///< what the kareus method measured
  std::string device_kind;                      ///< the execution device's kind()
  std::vector<std::string> sources;             ///< PlanDevices::sources
  std::vector<double> within_times_s;           ///< PlanJobOptions::within_times_s, as asked
};

/// The result of the method `name` among `methods`, or nullptr when the job did not run it.
inline const MethodResult* find_method(const std::vector<MethodResult>& methods, Method name) {
  for (const MethodResult& method : methods) {
    if (method.method == name) return &method;
  }
  return nullptr;
}

}  // namespace kareus::planner
