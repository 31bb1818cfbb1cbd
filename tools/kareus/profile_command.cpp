// kareus profile: measure partitions (or kernels) of a workload on the emulator or a real GPU,
// one JSONL record per measurement (device/measurement_log.h).
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/device/cuda_device.h"
#include "kareus/device/emulator.h"
#include "kareus/device/profile.h"
#include "kareus/planner/plan_job.h"
#include "kareus/search/search.h"
#include "kareus/workload/op_graph.h"
#include "space_flags.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct ProfileOptions {
  WorkloadFlags workload;
  GpuFlags gpu;
  std::string backend = "emulator";
  std::vector<std::string> partitions;
  bool all = false;
  bool kernels = false;
  std::vector<std::string> clocks{"artifact"};
  std::vector<int> kernel_ctas{4, 32, 4};
  std::size_t budget = 16;
  double search_budget = 0.1;
  int front_repeats = 2;
  int fixed_repeats = 5;
  std::string strategy = "search";
  std::uint64_t seed = 0;
  std::string out;
  device::CudaDeviceOptions cuda;
  std::string collective = "auto";
  bool clock_switch = false;
};

/// --all: a header, then everything `kareus plan --measurements` needs (planner::measure_plan_inputs).
void profile_plan_inputs(const ProfileOptions& options, const device::GpuSpec& gpu, const workload::Workload& workload,
                         const std::vector<int>& clocks, device::Device& measured, const device::ProfileSink& sink) {
  if (options.out.empty()) throw InputError("--all needs --out FILE (a log for `kareus plan --measurements`)");
  const SpaceFlags space;  // the plan's default knob space
  planner::PlanJobOptions job;
  job.clocks_mhz = clocks;
  job.space = space.resolve_space();
  job.search_budget_fraction = options.search_budget;
  job.seed = options.seed;
  job.front_repeats = options.front_repeats;
  job.progress = [](const std::string& line) { fmt::print(stderr, "kareus profile: {}\n", line); };
  device::ProfileHeader header;
  header.workload_json = sink.workload_json;
  header.gpu = gpu.name;
  header.backend = std::string(measured.kind());
  header.device_name = sink.device_name;
  header.clocks_mhz = clocks;
  header.space_json = fmt::format(R"({{"slots": "{}", "tp_ctas": "{}", "cp_ctas": "{}"}})", space.slots,
                                  fmt::join(space.tp_ctas, ":"), fmt::join(space.cp_ctas, ":"));
  header.search_json = fmt::format(R"({{"budget_fraction": {}, "seed": {}, "front_repeats": {}, "fixed_repeats": {}}})",
                                   options.search_budget, options.seed, options.front_repeats, options.fixed_repeats);
  header.date = device::utc_now_iso8601();
  device::append_profile_header(options.out, header);
  device::RecordingDevice recording(measured, sink, 0);
  planner::measure_plan_inputs(recording, workload, job, options.fixed_repeats);
  fmt::print(stderr, "kareus profile: {} measurements in {}\n", recording.records().size(), options.out);
}

/// What to measure: sweeps of fixed jobs (--kernels, --partition with --strategy random) or the
/// keys to search (--partition); neither for --all and --clock-switch alone.
struct ProfileWork {
  std::vector<device::ProfileJob> jobs;
  std::vector<std::string> searched_keys;
};

ProfileWork profile_work(const ProfileOptions& options, const workload::Workload& workload,
                         const std::vector<int>& clocks) {
  ProfileWork work;
  if (options.kernels) {
    const std::vector<int> ctas = partition::cta_range(options.kernel_ctas, "--kernel-ctas").values();
    work.jobs = device::plan_kernel_sweep(workload, clocks, ctas);
  } else if (!options.partitions.empty()) {
    if (options.strategy == "random") {
      work.jobs = device::plan_partition_sweep(workload, options.partitions, clocks, options.budget, options.seed);
    } else {
      work.searched_keys = options.partitions;
    }
  } else if (!options.clock_switch && !options.all) {
    throw InputError("say what to measure: --partition KEY, --all, --kernels or --clock-switch");
  }
  return work;
}

/// Records go to --out (progress on stderr) or, without it, to stdout.
device::ProfileSink profile_sink(const ProfileOptions& options, const workload::Workload& workload) {
  device::ProfileSink sink;
  sink.out = options.out;
  sink.warn = [](const std::string& message) { fmt::print(stderr, "kareus profile: warning: {}\n", message); };
  sink.workload_json = workload::workload_to_json(workload);
  const bool to_stdout = options.out.empty();
  sink.progress = [to_stdout](const device::MeasurementRecord& record, std::size_t done, std::size_t total) {
    if (to_stdout) {
      fmt::print("{}\n", device::to_json_line(record));
    } else {
      fmt::print(stderr, "[{}/{}] {} {} MHz {} CTAs {}: {:.6f} s {:.4f} J{}\n", done, total, record.partition.key,
                 record.config.freq_mhz, record.config.ctas, record.config.slot, record.time_s, record.energy_j,
                 record.details.stable ? "" : " (unstable)");
    }
  };
  return sink;
}

/// The clock-switch latency from the lowest to the highest clock and back, one JSON line each.
void print_clock_switches(device::CudaDevice& cuda, const std::vector<int>& clocks) {
  for (auto [from, to] : {std::pair{clocks.front(), clocks.back()}, std::pair{clocks.back(), clocks.front()}}) {
    const device::ClockSwitchResult result = cuda.measure_clock_switch(from, to);
    fmt::print(
        "{{\"clock_switch\": {{\"from_mhz\": {}, \"to_mhz\": {}, \"call_s\": {:.6f}, \"settle_s\": {:.6f}, "
        "\"observed_mhz\": {}}}}}\n",
        result.from_mhz, result.to_mhz, result.call_s, result.settle_s, result.observed_mhz);
  }
}

/// The search picks each next config from what it measured; every measurement is logged.
void search_keys(const ProfileOptions& options, const workload::Workload& workload, const std::vector<int>& clocks,
                 const std::vector<std::string>& keys, device::Device& measured, const device::ProfileSink& sink) {
  for (const std::string& key : keys) {
    const partition::Partition representative = partition::representative_partition(workload, key);
    const partition::SearchSpace space = partition::make_search_space(representative, clocks, {});
    search::SearchOptions search_options;
    search_options.budget = std::min(options.budget, space.size());
    search_options.seed = options.seed;
    device::RecordingDevice recording(measured, sink, search_options.budget);
    (void)search::run_search(recording, representative, space, search_options);
  }
}

void run_profile_command(const ProfileOptions& options) {
  if (options.backend != "cuda" && options.backend != "emulator") {
    throw InputError(fmt::format("--backend {}: expected cuda or emulator", options.backend));
  }
  const device::GpuSpec gpu = options.gpu.resolve();
  const workload::Workload workload = options.workload.resolve();
  const std::vector<int> clocks = resolve_clock_flag(gpu, options.clocks, "--clocks");
  if (options.strategy != "search" && options.strategy != "random") {
    throw InputError(fmt::format("--strategy {}: expected search or random", options.strategy));
  }
  const ProfileWork work = profile_work(options, workload, clocks);
  // Checked before measuring: a directory here used to fail only at the first record (exit 1).
  if (!options.out.empty()) check_writable_file(options.out, "--out");
  device::ProfileSink sink = profile_sink(options, workload);
  std::unique_ptr<device::Device> measured;
  device::CudaDevice* cuda = nullptr;
  if (options.backend == "cuda") {
    device::CudaDeviceOptions cuda_options = options.cuda;
    cuda_options.collective = device::parse_collective_backend(options.collective);
    auto cuda_device = std::make_unique<device::CudaDevice>(gpu, workload, cuda_options);
    cuda = cuda_device.get();
    sink.device_name = cuda->device_name();
    sink.details = [cuda] { return cuda->last_details(); };
    measured = std::move(cuda_device);
  } else {
    measured = std::make_unique<device::EmulatedDevice>(
        gpu, device::EmulatorOptions{true, options.seed, options.cuda.window_s});
  }
  if (options.clock_switch) {
    if (cuda == nullptr) throw InputError("--clock-switch needs --backend cuda");
    print_clock_switches(*cuda, clocks);
  }
  if (options.all) {
    profile_plan_inputs(options, gpu, workload, clocks, *measured, sink);
    return;
  }
  (void)device::run_profile(*measured, work.jobs, sink);
  search_keys(options, workload, clocks, work.searched_keys, *measured, sink);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto options = std::make_shared<ProfileOptions>();
  CLI::App* command = app.add_subcommand("profile", "measure partitions or kernels on a GPU (cuda) or the emulator");
  add_job_flags(command, options->workload, options->gpu);
  command->add_option("--backend", options->backend, "cuda or emulator")->capture_default_str();
  command->add_option("--partition", options->partitions, "partition key to measure (repeatable)");
  command->add_flag("--all", options->all,
                    "measure everything `kareus plan --measurements` needs: every partition's search (as the plan "
                    "runs it) and all fixed and serial work at every clock, after a header line");
  command->add_option("--search-budget", options->search_budget, "with --all: search budget, a fraction of each space")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--front-repeats", options->front_repeats, "with --all: measurements of each front config")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  command->add_option("--fixed-repeats", options->fixed_repeats, "with --all: measurements of each fixed/serial work")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  command->add_flag("--kernels", options->kernels, "measure every kernel and collective of one layer (for calibrate)");
  add_clocks_option(command, options->clocks);
  add_cta_range_option(command, "--kernel-ctas", options->kernel_ctas, "CTA counts of collectives with --kernels,");
  command->add_option("--strategy", options->strategy, "search (GP + EHVI, adaptive) or random configs per partition")
      ->capture_default_str();
  command->add_option("--budget", options->budget, "configs measured per partition")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", options->seed, "sampling (and emulator noise) seed")->capture_default_str();
  command->add_option("--out", options->out, "JSONL file to append records to (default: print them)");
  command->add_option("--gpu-index", options->cuda.gpu_index, "CUDA/NVML index of the GPU")->capture_default_str();
  command->add_option("--collective", options->collective, "auto, nccl or proxy (one-GPU proxy kernel)")
      ->capture_default_str();
  command->add_option("--window", options->cuda.window_s, "energy window per measurement (s)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--cooldown", options->cuda.cooldown_s, "cooldown before each window (s)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--warmup", options->cuda.warmup_s, "warm-up before each window (s)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--clock-switch", options->clock_switch, "measure the clock-switch latency (cuda)");
  command->callback([options] { run_profile_command(*options); });
}

}  // namespace kareus::cli
