// kareus/planner/plan_job.h - `kareus plan`: from a workload to the time-energy frontier of plans.
//
// The main job, end to end on one device model: per-partition measurements (search), exact
// per-instruction composition, the Phillips-Dessouky frontier over the 1F1B DAG, and the
// baselines (docs/kareus.md section 6): megatron (default clock, no overlap), perseus
// (per-instruction clocks, no overlap), nanobatch_perseus (overlap with default collective
// resources launched at partition start, plus per-instruction clocks) and kareus (clocks +
// per-partition CTA count and slot). Every method's plans are judged by the same plan simulator.
// Units: seconds, joules (whole job, one iteration), watts, MHz.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kareus/compose/instruction_options.h"
#include "kareus/device/device.h"
#include "kareus/device/replay_device.h"
#include "kareus/pipeline/iteration_simulator.h"
#include "kareus/plan/plan.h"
#include "kareus/workload/workload.h"

namespace kareus::planner {

using plan::Plan;

inline constexpr std::string_view kSummarySchema = "kareus.summary/1";
/// The methods `kareus plan` compares (docs/kareus.md section 6), in the order they run.
enum class Method {
  kMegatron,          ///< default clock, no overlap
  kPerseus,           ///< per-instruction clocks, no overlap
  kNanobatchPerseus,  ///< nanobatched with the default comm configs, per-instruction clocks
  kKareus,            ///< per-instruction clocks, overlap and per-partition comm configs
};
inline constexpr std::array<Method, 4> kMethods = {Method::kMegatron, Method::kPerseus, Method::kNanobatchPerseus,
                                                   Method::kKareus};

/// "megatron", "perseus", "nanobatch_perseus", "kareus": the names in summaries and plan folders.
[[nodiscard]] std::string_view to_string(Method method);
/// Parses a method name; throws InputError naming --methods and the names.
[[nodiscard]] Method parse_method(std::string_view text);
/// How every instruction of the method runs; nullopt when the method chooses per instruction.
[[nodiscard]] std::optional<device::OverlapMode> overlap_of(Method method);

struct PlanJobOptions {
  std::vector<Method> methods = {kMethods.begin(), kMethods.end()};
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
  std::uint64_t seed = 0;  ///< search seed
  /// Measurements of each config on a key's reported front before composing (1 = none
  /// repeated): real measurements are noisy, and a front picked from single noisy
  /// measurements favours configs that were measured lucky. Compose uses the means.
  int front_repeats = 2;
  /// kareus may run any instruction without nanobatching, or nanobatched with the default comm
  /// configs, where the solver finds that better (false: always its searched compositions).
  bool overlap_per_instruction = true;
  /// Cost each composed option by running its instruction on the execution device (exact on the
  /// emulator and on replayed logs) instead of the composition's representative x count sum.
  /// Off for a live GPU, where it would measure every first/last-layer instance per option.
  bool recost_compositions = true;
  std::function<void(const std::string&)> progress;  ///< one line per step, for stderr
};

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

/// Where the plan job gets its numbers.
struct PlanDevices {
  device::Device& search;     ///< measures partition configs (noisy emulator, a GPU)
  device::Device& execution;  ///< costs every instruction a plan runs (exact emulator, a GPU, replay)
  /// When set, plan from these logged measurements alone: no search and no new measurement;
  /// each key's measurements are every logged config of its representative.
  const device::ReplayDevice* measurements = nullptr;
  /// Recorded in summary.json: what the numbers came from ("emulator", or the log paths).
  std::vector<std::string> sources;
};

struct PlanJobResult {
  std::vector<MethodResult> methods;
  std::vector<KeySearch> searches;
  std::vector<std::pair<Method, Comparison>> comparison;
  compose::PartitionMeasurements measurements;  ///< what the kareus method measured
  std::string device_kind;                      ///< the execution device's kind()
  std::vector<std::string> sources;             ///< PlanDevices::sources
};

/// Checks the options against the workload and GPU before any work: methods, clocks, and that
/// nanobatching methods have --nanobatches 2. Throws InputError naming the flag.
void check_plan_job(const device::GpuSpec& gpu, const workload::Workload& workload, const PlanJobOptions& options);

/// Runs the job. Throws InputError for bad options (check_plan_job), UnmeasuredError naming
/// the key, clock or serial work a replay lacks.
[[nodiscard]] PlanJobResult run_plan_job(const PlanDevices& devices, const workload::Workload& workload,
                                         const PlanJobOptions& options);

/// Measures, through `device`, everything run_plan_job needs to plan `workload` from logs
/// alone: every searchable key's search (as the plan job runs it, front repeats included), and
/// at every clock every instruction's serial and nanobatched (default comm) work and the
/// gradient reductions, each distinct piece `fixed_repeats` times. Pass a RecordingDevice to log it.
void measure_plan_inputs(device::Device& device, const workload::Workload& workload, const PlanJobOptions& options,
                         int fixed_repeats);

/// docs/kareus.md section 6: max throughput vs `megatron`, iso metrics vs `perseus`.
[[nodiscard]] Comparison compare(const MethodResult& method, const MethodResult* megatron, const MethodResult* perseus);

/// Writes DIR/plans/<method>/plan_NN.json and DIR/summary.json (atomically, summary last).
void write_plan_job(const std::filesystem::path& dir, const workload::Workload& workload, const PlanJobResult& result);

}  // namespace kareus::planner
