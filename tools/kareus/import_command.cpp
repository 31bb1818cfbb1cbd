// kareus import: the Kareus artifact's schedule files -> plans (interop/artifact_schedule.h).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/common/output_folder.h"
#include "kareus/interop/artifact_schedule.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct ImportOptions {
  WorkloadFlags workload;
  GpuFlags gpu;
  std::string format;
  std::string in;
  std::string out;
};

void run_import(const ImportOptions& options) {
  if (options.format != "artifact") {
    throw InputError(fmt::format("--format must be 'artifact', found '{}'", options.format));
  }
  const workload::Workload workload = options.workload.resolve();
  const device::GpuSpec gpu = options.gpu.resolve();
  OutputFolder out(options.out, "--out", "kareus import");
  out.check_input_outside(options.in, "dir");
  const auto written = interop::import_artifact_files(options.in, workload, gpu.name, out.staging());
  for (const auto& path : out.commit(written, options.out)) fmt::print("{}\n", path.string());
}

}  // namespace

void add_import_command(CLI::App& app) {
  auto options = std::make_shared<ImportOptions>();
  CLI::App* command = app.add_subcommand(
      "import", "read the Kareus artifact's schedule files back into plans (for the workload of the flags)");
  add_job_flags(command, options->workload, options->gpu);  // the files name neither the workload nor the GPU
  command->add_option("--format", options->format, "input format: artifact")->required();
  command->add_option("dir", options->in, "folder of freqs_pipeline_NNNNN.py (and scheds_pipeline_NNNNN.py) files")
      ->required();
  command->add_option("--out", options->out, "output folder: plan_NNNNN.json and frontier.json")->required();
  command->callback([options] { run_import(*options); });
}

}  // namespace kareus::cli
