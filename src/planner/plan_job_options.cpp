#include "kareus/planner/plan_job_options.h"

#include <algorithm>
#include <cmath>

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
  if (options.within_times_s.empty()) return;
  if (std::ranges::find(options.methods, Method::kKareus) == options.methods.end()) {
    throw InputError("--within: only kareus plans within a time, and --methods leaves kareus out");
  }
  if (options.within_times_s.size() > kMaxWithinTimes) {
    throw InputError(
        fmt::format("--within given {} times, at most {}", options.within_times_s.size(), kMaxWithinTimes));
  }
  for (const double time_s : options.within_times_s) {
    if (!std::isfinite(time_s) || time_s <= 0) {
      throw InputError(fmt::format("--within must be finite and > 0 s, found {}", time_s));
    }
  }
}

}  // namespace kareus::planner
