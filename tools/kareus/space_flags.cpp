#include "space_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "kareus/common/error.h"

namespace kareus::cli {

std::vector<int> resolve_clock_flag(const device::GpuSpec& gpu, const std::vector<std::string>& values,
                                    std::string_view flag) {
  if (values.size() == 1 && values[0] == "all") return gpu.supported_clocks_mhz();
  if (values.size() == 1 && values[0] == "artifact") return device::artifact_clocks(gpu);
  int range[3] = {0, 0, 0};
  const bool numbers = values.size() == 3 && CLI::detail::lexical_cast(values[0], range[0]) &&
                       CLI::detail::lexical_cast(values[1], range[1]) && CLI::detail::lexical_cast(values[2], range[2]);
  if (!numbers) {
    throw InputError(fmt::format("{} {}: expected \"all\", \"artifact\" or MIN:MAX:STEP in MHz, e.g. 900:1410:30", flag,
                                 fmt::join(values, ":")));
  }
  return device::clocks_in_range(gpu, range[0], range[1], range[2], flag);
}

void add_clocks_option(CLI::App* command, std::vector<std::string>& values) {
  command->add_option("--clocks", values, "clocks: all, artifact (18 from the max, 30 MHz apart) or MIN:MAX:STEP")
      ->delimiter(':')
      ->capture_default_str();
}

void add_cta_range_option(CLI::App* command, const std::string& flag, std::vector<int>& values,
                          const std::string& help) {
  command->add_option(flag, values, help + " MIN:MAX[:STEP]")->delimiter(':')->capture_default_str();
}

std::vector<int> SpaceFlags::resolve_clocks(const device::GpuSpec& gpu) const {
  return resolve_clock_flag(gpu, clocks, "--clocks");
}

partition::SpaceOptions SpaceFlags::resolve_space() const {
  return {partition::parse_slot_policy(slots), partition::cta_range(tp_ctas, "--tp-ctas"),
          partition::cta_range(cp_ctas, "--cp-ctas")};
}

void add_job_flags(CLI::App* command, WorkloadFlags& workload, GpuFlags& gpu, SpaceFlags& flags) {
  add_job_flags(command, workload, gpu);
  add_clocks_option(command, flags.clocks);
  command->add_option("--slots", flags.slots, "launch slots: all or artifact")->capture_default_str();
  add_cta_range_option(command, "--tp-ctas", flags.tp_ctas,
                       "TP collective CTA counts (all-reduces; all-gathers and reduce-scatters with "
                       "--sequence-parallel),");
  add_cta_range_option(command, "--cp-ctas", flags.cp_ctas, "CP all-gather/reduce-scatter CTA counts,");
}

}  // namespace kareus::cli
