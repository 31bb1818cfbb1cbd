// kareus/runtime/runtime.h - what a training process links to follow a plan.
//
// Runtime ties one rank's PlanCursor (which instruction runs, its comm configs) to a
// FrequencyController (the instruction's clock, applied asynchronously on the GPU this process
// drives). The training loop calls on_step_begin / on_instruction_begin(type, microbatch) /
// on_instruction_end / on_step_end and asks comm_config(partition_key) for each overlapped
// collective; switch_plan moves to another frontier point between steps. The C API
// (kareus_runtime.h) and the Python module wrap this class. Clocks in MHz.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/plan/plan.h"
#include "kareus/plan/plan_fit.h"
#include "kareus/runtime/deadline.h"
#include "kareus/runtime/frequency_controller.h"
#include "kareus/runtime/plan_cursor.h"
#include "kareus/runtime/rank_mapping.h"

namespace kareus::runtime {

struct RuntimeOptions {
  std::filesystem::path plan_path;
  int rank = 0;                            ///< global rank
  ParallelDegrees degrees;                 ///< tp, cp, pp, dp; pp must equal the plan's stage count
  int gpu_index = 0;                       ///< the GPU this process drives (its local device index)
  std::string clock_backend = "recorder";  ///< see make_clock_backend
  bool install_signal_handlers = false;    ///< reset clocks on SIGINT/SIGTERM (one runtime per process)
  /// A refused or failed clock change: false (default) reports it and training goes on at the
  /// previous clock; true makes it an Error from the next call.
  bool strict_clocks = false;
  /// Where failed and skipped clock changes are reported (worker thread); empty: stderr, the
  /// first 10 and then every 1000th.
  std::function<void(const std::string& message)> on_clock_failure;
};

class Runtime {
 public:
  /// Reads the plan, maps the rank to its stage and starts the clock backend. Throws InputError
  /// for a bad plan, rank, degrees (pp must equal the plan's stage count) or backend spec, and
  /// Error when the backend cannot start. Every plan, here and in switch_plan, must fit
  /// (plan::check_plan_fits): its clocks are clocks the backend's GPU supports; its comm configs
  /// fit the workload its block records (keys, slots, CTAs in 1..partition::kMaxCtas: the
  /// runtime does not know the GPU's SM count; kareus.plan.ExecutionPlan checks against it).
  explicit Runtime(const RuntimeOptions& options);
  /// For tests and embedders: an already-loaded plan and backend.
  Runtime(std::shared_ptr<const plan::Plan> plan, int stage, std::unique_ptr<ClockBackend> backend,
          bool install_signal_handlers = false, ClockFailurePolicy clock_policy = {});
  ~Runtime();

  void on_step_begin();
  /// Starts the instruction and requests its clock. `microbatch` nullopt means "the next
  /// microbatch of this type" (Zeus-style callers that only name the type); `chunk` is the model
  /// chunk (virtual pipeline stage) of an interleaved plan, 0 without interleaving.
  void on_instruction_begin(Direction type, std::optional<int> microbatch, int chunk = 0);
  void on_instruction_end();
  void on_step_end();
  [[nodiscard]] const partition::CommConfig& comm_config(std::string_view partition_key) const;

  /// Switches plans between steps. InputError mid-step, or for a plan with another stage count or
  /// of another workload (its workload block differs from the running plan's: e.g. 4
  /// microbatches in an 8-microbatch job), which would otherwise fail midway through a step.
  void switch_plan(std::shared_ptr<const plan::Plan> plan);
  void switch_plan(const std::filesystem::path& plan_path);

  /// Between steps: reads a kareus.frontier/1 file, picks the least-energy point meeting
  /// `deadline_s` (else the fastest, meets_deadline = false; see choose_for_deadline) and switches
  /// to its plan. Throws InputError mid-step or for a bad frontier, deadline or plan.
  struct DeadlineSwitch {
    FrontierPoint point;
    bool meets_deadline = false;
  };
  DeadlineSwitch switch_for_deadline(const std::filesystem::path& frontier_path, double deadline_s);

  /// Waits until every requested clock is applied.
  void flush() { controller_.flush(); }
  [[nodiscard]] std::vector<ClockSample> timeline() const { return controller_.timeline(); }
  /// Clock changes that failed (previous clock kept) and that the backend skipped (rate limit).
  [[nodiscard]] std::size_t failed_clock_changes() const { return controller_.failed_changes(); }
  [[nodiscard]] std::size_t skipped_clock_changes() const { return controller_.skipped_changes(); }
  [[nodiscard]] const PlanCursor& cursor() const { return cursor_; }
  [[nodiscard]] int stage() const { return cursor_.stage(); }

 private:
  Runtime(std::shared_ptr<const plan::Plan> plan, int stage, std::unique_ptr<ClockBackend> backend,
          bool install_signal_handlers, ClockFailurePolicy clock_policy, std::string_view origin);
  void switch_plan(std::shared_ptr<const plan::Plan> plan, std::string_view origin);

  plan::PlanLimits limits_;  ///< the backend's clocks; set before cursor_ checks the first plan
  PlanCursor cursor_;
  FrequencyController controller_;
  std::unique_ptr<SignalResetGuard> signal_guard_;
};

}  // namespace kareus::runtime
