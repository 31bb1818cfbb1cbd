// kareus search: the per-partition multi-objective search (search.h) on the emulator, with the
// hypervolume ratio against the exhaustive ground truth.
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/device/emulator.h"
#include "kareus/search/search.h"
#include "kareus/search/search_report.h"
#include "space_flags.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct SearchCommandOptions {
  WorkloadFlags workload;
  GpuFlags gpu;
  std::string partition;
  SpaceFlags space;
  long long budget = 0;  // 0: not given, 10% of the space
  bool budget_given = false;
  std::uint64_t seed = 0;
  std::string strategy = "kareus";
  std::size_t batch = 0;  // 0: max(2, devices)
  std::size_t initial = 0;
  double refinement = 0.25;
  double min_gain = 1e-5;
  std::size_t devices = 1;
  bool exhaustive = false;
  bool no_noise = false;
  std::string log;
  bool json = false;
};

void run_search_command(const SearchCommandOptions& options) {
  const workload::Workload work = options.workload.resolve();
  const device::GpuSpec gpu = options.gpu.resolve();
  const partition::Partition part = partition::representative_partition(work, options.partition);
  const partition::SearchSpace space =
      partition::make_search_space(part, options.space.resolve_clocks(gpu), options.space.resolve_space());
  search::SearchOptions search_options;
  search_options.budget = search::search_budget(
      space.size(), options.budget_given ? std::optional<long long>(options.budget) : std::nullopt);
  // Each emulated device is an object and a worker: 2^31 of them would never start (docs/limits.md).
  constexpr std::size_t kMaxDevices = 256;
  if (options.devices < 1 || options.devices > kMaxDevices) {
    throw InputError(fmt::format("--devices {} must be in [1, {}]", options.devices, kMaxDevices));
  }
  search_options.seed = options.seed;
  search_options.strategy = search::parse_strategy(options.strategy);
  search_options.batch_size = options.batch > 0 ? options.batch : std::max<std::size_t>(2, options.devices);
  search_options.initial_design = options.initial;
  search_options.refinement_fraction = options.refinement;
  search_options.min_relative_gain = options.min_gain;
  if (!options.log.empty()) search_options.log_path = options.log;
  search_options.workload_json = workload::workload_to_json(work);
  search_options.warn = [](const std::string& message) { fmt::print(stderr, "kareus search: warning: {}\n", message); };

  std::vector<std::unique_ptr<device::EmulatedDevice>> emulators;
  std::vector<device::Device*> devices;
  for (std::size_t index = 0; index < options.devices; ++index) {
    emulators.push_back(
        std::make_unique<device::EmulatedDevice>(gpu, device::EmulatorOptions{!options.no_noise, options.seed}));
    devices.push_back(emulators.back().get());
  }
  const search::SearchResult result = options.exhaustive ? search::run_exhaustive(devices, part, space, search_options)
                                                         : search::run_search(devices, part, space, search_options);
  device::EmulatedDevice exact = device::exact_emulator(gpu);
  const search::SearchQuality quality = search::rate_search(exact, part, space, result);
  if (options.json) {
    const search::SearchReportContext context{search_options.workload_json,
                                              gpu.name,
                                              part.key,
                                              options.exhaustive ? "exhaustive" : options.strategy,
                                              options.seed,
                                              space.size(),
                                              options.exhaustive ? space.size() : search_options.budget,
                                              gpu.static_power_w};
    fmt::print("{}\n", search::search_report_json(context, result, quality));
    return;
  }
  fmt::print("{} of {} on {}: {} of {} configs measured ({} from the log), stopped: {}\n", part.key, work.model.name,
             gpu.name, result.evaluations.size(), space.size(), result.from_log, search::to_string(result.stop_reason));
  fmt::print(
      "hypervolume ratio vs exhaustive (noise-free values), evaluated configs: energy {:.4f}, effective "
      "energy {:.4f}; measured fronts: {:.4f}, {:.4f}\n",
      quality.evaluated.energy, quality.evaluated.effective_energy, quality.front.energy,
      quality.front.effective_energy);
  fmt::print("(t, E) front:\n{:>10} {:>10} {:>8} {:>5}  {}\n", "time_ms", "energy_j", "freq_mhz", "ctas", "slot");
  for (const search::Evaluation& point : result.energy_front) {
    fmt::print("{:>10.3f} {:>10.4f} {:>8} {:>5}  {}\n", point.time_s * 1e3, point.energy_j, point.config.freq_mhz,
               point.config.ctas, point.config.slot);
  }
}

}  // namespace

void add_search_command(CLI::App& app) {
  auto options = std::make_shared<SearchCommandOptions>();
  CLI::App* command = app.add_subcommand("search", "search one partition's knob space for its time-energy fronts");
  command->add_option("--partition", options->partition, "partition key, e.g. fwd_attn (see kareus partitions)")
      ->required();
  add_job_flags(command, options->workload, options->gpu, options->space);
  command->add_option("--budget", options->budget, "measurements (default: 10% of the space)")
      ->each([options](const std::string&) { options->budget_given = true; });
  command->add_option("--seed", options->seed, "seed of the search and the emulator's noise")->capture_default_str();
  command->add_option("--strategy", options->strategy, "kareus (GP + EHVI) or artifact (the baseline)")
      ->capture_default_str();
  command->add_option("--batch", options->batch, "configs chosen per batch (0: max(2, --devices))")
      ->capture_default_str();
  command->add_option("--initial", options->initial, "configs in the initial design (0: about 25% of the budget)")
      ->capture_default_str();
  command->add_option("--refinement", options->refinement, "share of the budget kept for the refinement pass")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command
      ->add_option("--min-gain", options->min_gain,
                   "stop when the best expected hypervolume gain (relative) is below this")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--devices", options->devices, "emulated devices measuring a batch in parallel")
      ->capture_default_str();
  command->add_flag("--exhaustive", options->exhaustive, "measure every config (ground truth)");
  command->add_flag("--no-noise", options->no_noise, "noise-free emulator measurements");
  command->add_option("--log", options->log, "append-only JSONL evaluation log; an existing one is resumed");
  command->add_flag("--json", options->json, "print JSON");
  command->callback([options] { run_search_command(*options); });
}

}  // namespace kareus::cli
