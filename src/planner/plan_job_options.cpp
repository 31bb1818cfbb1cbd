#include "kareus/planner/plan_job_options.h"

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::planner {

void check_plan_job(const device::GpuSpec& gpu, const workload::Workload& workload, const PlanJobOptions& options) {
  for (Method method : options.methods) {
    if (overlap_of(method) != device::OverlapMode::kNone && workload.parallel.nanobatches != 2) {
      throw InputError(
          fmt::format("--methods {} needs --nanobatches 2, found {} (with 1, run --methods "
                      "megatron,perseus)",
                      to_string(method), workload.parallel.nanobatches));
    }
  }
  if (options.clocks_mhz.empty()) throw InputError("--clocks: no clock to plan with");
  for (int clock : options.clocks_mhz) device::require_supported_clock(gpu, clock, "--clocks");
}

}  // namespace kareus::planner
