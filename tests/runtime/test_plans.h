// Plans for the runtime tests: 1F1B over S stages and M microbatches, with a clock and comm
// configs that differ per stage, type and microbatch so a wrong lookup shows.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "common/scratch.h"
#include "kareus/common/file_io.h"
#include "kareus/pipeline/schedule.h"
#include "kareus/plan/plan.h"
#include "kareus/runtime/clock_backend.h"

namespace kareus::runtime::testing {

/// Clock of an instruction: a grid value of the recorder's default list (1980 - 15 k).
inline int planned_clock_mhz(int stage, Direction type, int microbatch) {
  return 1980 - 15 * (stage * 20 + (type == Direction::kBackward ? 10 : 0) + microbatch % 3);
}

inline int planned_ctas(int stage, Direction type, int microbatch) {
  return 4 + stage * 8 + (type == Direction::kBackward ? 2 : 0) + microbatch;
}

/// Forwards to a recorder the test keeps after the owner of this backend is gone.
struct ForwardingBackend final : ClockBackend {
  std::shared_ptr<RecorderClockBackend> target;
  explicit ForwardingBackend(std::shared_ptr<RecorderClockBackend> to) : target(std::move(to)) {}
  void set_locked_clock(int freq_mhz) override { target->set_locked_clock(freq_mhz); }
  void reset() override { target->reset(); }
  int read_clock_mhz() override { return target->read_clock_mhz(); }
  std::vector<int> supported_clocks_mhz() override { return target->supported_clocks_mhz(); }
  std::optional<std::uint64_t> read_energy_mj() override { return target->read_energy_mj(); }
  std::string describe() const override { return "forwarding"; }
};

inline plan::Plan make_plan(int stages, int microbatches) {
  plan::Plan result;
  result.predicted_time_s = 2.5;
  result.predicted_energy_j = 9000;
  for (int stage = 0; stage < stages; ++stage) {
    plan::StagePlan stage_plan{stage, {}};
    for (const auto& instruction : pipeline::one_f_one_b(stage, stages, microbatches)) {
      plan::PlannedInstruction planned{instruction.type,
                                       instruction.microbatch,
                                       planned_clock_mhz(stage, instruction.type, instruction.microbatch),
                                       workload::OverlapMode::kNanobatch,
                                       {}};
      const int ctas = planned_ctas(stage, instruction.type, instruction.microbatch);
      if (instruction.type == Direction::kForward) {
        planned.partitions["fwd_attn"] = {"linear_0", ctas};
      } else {
        // A backward with activation recomputation carries its recompute forward's keys too.
        planned.partitions["bwd_attn"] = {"linear_1", ctas};
        planned.partitions["fwd_attn"] = {"mlp_0", ctas + 100};
      }
      stage_plan.instructions.push_back(planned);
    }
    result.stages.push_back(stage_plan);
  }
  return result;
}

inline std::filesystem::path write_plan_file(const std::string& name, const plan::Plan& plan) {
  const auto directory = test_common::scratch_path("kareus_runtime_tests");
  std::filesystem::create_directories(directory);
  const auto path = directory / name;
  plan::write_plan(path, plan);
  return path;
}

}  // namespace kareus::runtime::testing
