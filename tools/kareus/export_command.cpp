// kareus export: plans -> the Kareus artifact's schedule files (interop/artifact_schedule.h).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/common/output_folder.h"
#include "kareus/interop/artifact_schedule.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct ExportOptions {
  WorkloadFlags workload;
  std::string plan;
  std::string frontier;
  std::string format;
  std::string out;
};

void run_export(const ExportOptions& options) {
  if (options.format != "artifact") {
    throw InputError(fmt::format("--format must be 'artifact', found '{}'", options.format));
  }
  if (options.plan.empty() == options.frontier.empty()) {
    throw InputError("give either --plan FILE or --frontier DIR (a folder of plan_N.json files)");
  }
  OutputFolder out(options.out, "--out", "kareus export");
  out.check_input_outside(options.frontier.empty() ? options.plan : options.frontier,
                          options.frontier.empty() ? "--plan" : "--frontier");
  std::vector<interop::ExportedPlan> plans;
  if (!options.frontier.empty()) {
    plans = interop::plans_in_directory(options.frontier);
  } else {
    // plan_NN.json keeps its number; any other name is point 0.
    const std::string stem = std::filesystem::path(options.plan).stem().string();
    int number = 0;
    if (stem.starts_with("plan_") && stem.size() > 5 && stem.size() <= 10 &&
        stem.find_first_not_of("0123456789", 5) == std::string::npos) {
      number = std::stoi(stem.substr(5));
    }
    plans.push_back({options.plan, number});
  }
  // The plans carry their workload (the first one's is the export's; each plan is checked against
  // it); workload flags given explicitly must agree.
  const std::string first = plans.front().plan.string();
  const workload::Workload workload = options.workload.resolve_for_plan(plan::read_plan(first), first);
  const auto written = interop::export_artifact_files(plans, workload, out.staging());
  for (const auto& path : out.commit(written, options.out)) fmt::print("{}\n", path.string());
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* command = app.add_subcommand(
      "export", "write plans as the Kareus artifact's freqs_pipeline_NNNNN.py / scheds_pipeline_NNNNN.py files");
  add_workload_flags(command, options->workload);  // defaults: the plan's own workload
  command->add_option("--plan", options->plan, "one plan file (kareus.plan/1)");
  command->add_option("--frontier", options->frontier, "every plan_N.json of this folder (e.g. OUT/plans/kareus)");
  command->add_option("--format", options->format, "output format: artifact")->required();
  command->add_option("--out", options->out, "output folder")->required();
  command->callback([options] { run_export(*options); });
}

}  // namespace kareus::cli
