// kareus/plan/plan_job.h - `kareus plan`: from a workload to the time-energy frontier of plans.
//
// The main job, end to end on one device model: per-partition measurements (search), exact
// per-instruction composition, the Phillips-Dessouky frontier over the 1F1B DAG, and the
// baselines (REFERENCE.md section 6): megatron (default clock, no overlap), perseus
// (per-instruction clocks, no overlap), nanobatch_perseus (overlap with default collective
// resources launched at partition start, plus per-instruction clocks) and kareus (clocks +
// per-partition CTA count and slot). Every method's plans are judged by the same plan simulator.
// Units: seconds, joules (whole job, one iteration), watts, MHz.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kareus/compose/instruction_options.h"
#include "kareus/device/gpu_spec.h"
#include "kareus/plan/plan.h"
#include "kareus/workload/workload.h"

namespace kareus::plan {

inline constexpr std::string_view kSummarySchema = "kareus.summary/1";
inline const std::vector<std::string> kMethods = {"megatron", "perseus", "nanobatch_perseus", "kareus"};

struct PlanJobOptions {
  std::vector<std::string> methods = kMethods;
  std::vector<int> clocks_mhz;  ///< instruction clocks every method may use
  partition::SpaceOptions space;
  /// Solver time unit; 0 = automatic: 1 ms, or coarser so a solve takes at most ~20,000 steps
  /// (long iterations, e.g. 70B at PP 8, would otherwise need 100,000s of max-flows).
  double unit_time_s = 0;
  int max_plans = 10;  ///< frontier plans per method written and simulated (evenly spread in time)
  compose::ComposeOptions compose;
  /// Per-partition search budget as a fraction of each key's space (the artifact's spaces are
  /// searched with 10%); 0 = measure every config (exhaustive).
  double search_budget_fraction = 0.1;
  std::uint64_t seed = 0;                            ///< search and measurement noise
  bool noise = true;                                 ///< emulator measurement noise
  std::function<void(const std::string&)> progress;  ///< one line per step, for stderr
};

struct MethodPoint {
  double time_s = 0;    ///< achieved (plan simulator)
  double energy_j = 0;  ///< achieved, whole job
  double predicted_time_s = 0;
  double predicted_energy_j = 0;
  Plan plan;
};

struct MethodResult {
  std::string name;
  std::vector<MethodPoint> frontier;  ///< Pareto-optimal in achieved (time, energy), time ascending
  std::vector<std::pair<double, double>> predicted_curve;  ///< the solver's whole frontier (time_s, energy_j)
  int solver_iterations = 0;
  double solver_s = 0;
  double unit_time_s = 0;  ///< the solver's time unit
  int pruned_points = 0;   ///< composition pruning (kareus)
};

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
  std::size_t evaluations = 0;  ///< chosen by the search
  std::size_t clock_fill = 0;   ///< extra measurements so every clock has a config to compose
};

struct PlanJobResult {
  std::vector<MethodResult> methods;
  std::vector<KeySearch> searches;
  std::vector<std::pair<std::string, Comparison>> comparison;
  compose::PartitionMeasurements measurements;  ///< what the kareus method measured
};

/// Runs the job. Throws InputError for an unknown method or an empty clock list.
[[nodiscard]] PlanJobResult run_plan_job(const device::GpuSpec& gpu, const workload::Workload& workload,
                                         const PlanJobOptions& options);

/// REFERENCE.md section 6: max throughput vs `megatron`, iso metrics vs `perseus`.
[[nodiscard]] Comparison compare(const MethodResult& method, const MethodResult* megatron, const MethodResult* perseus);

/// Writes DIR/plans/<method>/plan_NN.json and DIR/summary.json (atomically, summary last).
void write_plan_job(const std::filesystem::path& dir, const workload::Workload& workload, const PlanJobResult& result);

}  // namespace kareus::plan
