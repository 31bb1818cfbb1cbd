#include "space_flags.h"

#include <CLI/CLI.hpp>

namespace kareus::cli {

std::vector<int> SpaceFlags::resolve_clocks(const device::GpuSpec& gpu) const {
  return device::parse_clock_list(gpu, clocks);
}

partition::SpaceOptions SpaceFlags::resolve_space() const {
  return {partition::parse_slot_policy(slots), partition::parse_cta_range(tp_ctas, "--tp-ctas"),
          partition::parse_cta_range(cp_ctas, "--cp-ctas")};
}

void add_job_flags(CLI::App* command, WorkloadFlags& workload, GpuFlags& gpu, SpaceFlags& flags) {
  add_job_flags(command, workload, gpu);
  command->add_option("--clocks", flags.clocks, "clocks: all, artifact (18 from the max, 30 MHz apart) or MIN:MAX:STEP")
      ->capture_default_str();
  command->add_option("--slots", flags.slots, "launch slots: all or artifact")->capture_default_str();
  command
      ->add_option("--tp-ctas", flags.tp_ctas,
                   "TP collective CTA counts MIN:MAX[:STEP] (all-reduces; all-gathers and reduce-scatters with "
                   "--sequence-parallel)")
      ->capture_default_str();
  command->add_option("--cp-ctas", flags.cp_ctas, "CP all-gather/reduce-scatter CTA counts MIN:MAX[:STEP]")
      ->capture_default_str();
}

}  // namespace kareus::cli
