#include "kareus/runtime/runtime.h"

#include <atomic>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"

namespace kareus::runtime {
namespace {

std::shared_ptr<const plan::Plan> load_plan(const RuntimeOptions& options) {
  auto loaded = std::make_shared<const plan::Plan>(plan::read_plan(options.plan_path));
  // The runtime knows the job's parallel degrees, not its model: the plan must be for them.
  const ParallelDegrees& degrees = options.degrees;
  plan::check_plan_workload(
      *loaded,
      fmt::format(R"({{"tp": {}, "cp": {}, "pp": {}, "dp": {}}})", degrees.tp, degrees.cp, degrees.pp, degrees.dp),
      options.plan_path.string());
  return loaded;
}

// The default report of a failed clock change: a line on stderr, the first 10 and then every
// 1000th, so a persistent refusal cannot flood a long job's log.
std::function<void(const std::string&)> stderr_reporter() {
  auto count = std::make_shared<std::atomic<std::size_t>>(0);
  return [count](const std::string& message) {
    const std::size_t seen = ++*count;
    if (seen <= 10 || seen % 1000 == 0) fmt::print(stderr, "kareus runtime: {} ({} so far)\n", message, seen);
  };
}

// The GPU's part of the plan check: the clocks the backend's GPU supports (NVML's list, kareusd's,
// the recorder's). The SM count is not known here, so CTAs are bounded by kMaxCtas.
plan::PlanLimits backend_limits(ClockBackend& backend) {
  plan::PlanLimits limits;
  limits.clocks_mhz = backend.supported_clocks_mhz();
  limits.gpu = fmt::format("the GPU behind {}", backend.describe());
  return limits;
}

std::shared_ptr<const plan::Plan> checked(std::shared_ptr<const plan::Plan> plan, const plan::PlanLimits& limits,
                                          std::string_view origin) {
  if (plan) plan::check_plan_fits(*plan, limits, origin);
  return plan;
}

ClockFailurePolicy clock_policy(const RuntimeOptions& options) {
  return {options.strict_clocks, options.on_clock_failure ? options.on_clock_failure : stderr_reporter()};
}

}  // namespace

Runtime::Runtime(const RuntimeOptions& options)
    : Runtime(load_plan(options), map_rank(options.rank, options.degrees).stage,
              make_clock_backend(options.clock_backend, options.gpu_index), options.install_signal_handlers,
              clock_policy(options), options.plan_path.string()) {}

Runtime::Runtime(std::shared_ptr<const plan::Plan> plan, int stage, std::unique_ptr<ClockBackend> backend,
                 bool install_signal_handlers, ClockFailurePolicy clock_policy)
    : Runtime(std::move(plan), stage, std::move(backend), install_signal_handlers, std::move(clock_policy), "plan") {}

Runtime::Runtime(std::shared_ptr<const plan::Plan> plan, int stage, std::unique_ptr<ClockBackend> backend,
                 bool install_signal_handlers, ClockFailurePolicy clock_policy, std::string_view origin)
    : limits_(backend ? backend_limits(*backend) : plan::PlanLimits{}),
      cursor_(checked(std::move(plan), limits_, origin), stage),
      controller_(std::move(backend), FrequencyController::kDefaultTimelineCapacity, std::move(clock_policy)) {
  if (install_signal_handlers) {
    signal_guard_ = std::make_unique<SignalResetGuard>([this] { controller_.reset_now(); });
  }
}

Runtime::~Runtime() { signal_guard_.reset(); }

void Runtime::on_step_begin() { cursor_.on_step_begin(); }

void Runtime::on_instruction_begin(Direction type, std::optional<int> microbatch, int chunk) {
  // Zeus-style callers name only the type: take the next microbatch of that type.
  if (!microbatch) microbatch = cursor_.started_of_type(type);
  const plan::PlannedInstruction& planned = cursor_.on_instruction_begin(type, *microbatch, chunk);
  controller_.request_clock(planned.freq_mhz);
}

void Runtime::on_instruction_end() { cursor_.on_instruction_end(); }

void Runtime::on_step_end() { cursor_.on_step_end(); }

const partition::CommConfig& Runtime::comm_config(std::string_view partition_key) const {
  return cursor_.comm_config(partition_key);
}

void Runtime::switch_plan(std::shared_ptr<const plan::Plan> plan) { switch_plan(std::move(plan), "switch_plan"); }

void Runtime::switch_plan(std::shared_ptr<const plan::Plan> plan, std::string_view origin) {
  if (plan && plan->stages.size() != cursor_.plan().stages.size()) {
    throw InputError(fmt::format("{}: the new plan has {} stages, the running one {}", origin, plan->stages.size(),
                                 cursor_.plan().stages.size()));
  }
  // Another workload's plan (other microbatches, sequence, model...) would fail midway through a step.
  if (plan) {
    nlohmann::json running = nlohmann::json::parse(cursor_.plan().workload_json);
    running["microbatches"] = plan::microbatch_count(cursor_.plan());
    plan::check_plan_workload(*plan, running.dump(), origin);
    plan::check_plan_fits(*plan, limits_, origin);
  }
  cursor_.switch_plan(std::move(plan));
}

void Runtime::switch_plan(const std::filesystem::path& plan_path) {
  switch_plan(std::make_shared<const plan::Plan>(plan::read_plan(plan_path)), plan_path.string());
}

Runtime::DeadlineSwitch Runtime::switch_for_deadline(const std::filesystem::path& frontier_path, double deadline_s) {
  if (cursor_.in_step()) {
    throw InputError(fmt::format("stage {}: switch_for_deadline called mid-step; switch between steps", stage()));
  }
  const std::vector<FrontierPoint> frontier = plan::read_frontier(frontier_path);
  const DeadlineChoice choice = choose_for_deadline(frontier, deadline_s);
  switch_plan(std::filesystem::path(frontier[choice.index].plan));  // checked against the running workload
  return {frontier[choice.index], choice.meets_deadline};
}

}  // namespace kareus::runtime
