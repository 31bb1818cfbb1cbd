// kareus partitions: the partitions of one steady-state layer (forward, then backward) with
// their ops, overlapped collective, launch slots and search-space size (docs/kareus.md sections 2-3).
#include <algorithm>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "kareus/partition/search_space.h"
#include "space_flags.h"
#include "workload_flags.h"

namespace kareus::cli {
namespace {

struct PartitionsOptions {
  WorkloadFlags workload;
  GpuFlags gpu;
  SpaceFlags space;
  bool json = false;
};

void run_partitions(const PartitionsOptions& options) {
  const workload::Workload work = options.workload.resolve();
  const device::GpuSpec gpu = options.gpu.resolve();
  const std::vector<int> clocks = options.space.resolve_clocks(gpu);
  const partition::SpaceOptions space_options = options.space.resolve_space();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (Direction direction : {Direction::kForward, Direction::kBackward}) {
    for (const partition::Partition& part : partition::layer_partitions(work, direction)) {
      const partition::SearchSpace space = partition::make_search_space(part, clocks, space_options);
      std::vector<std::string> compute_ops;
      for (const workload::Op& op : part.compute_ops) compute_ops.push_back(op.name);
      nlohmann::ordered_json row = {{"key", part.key}, {"nanobatch", part.nanobatch}, {"compute_ops", compute_ops}};
      row["collective"] = nullptr;
      if (part.collective) {
        const workload::Collective& collective = *part.collective->collective;
        row["collective"] = {{"kind", workload::to_string(collective.kind)},
                             {"group", workload::to_string(collective.group)},
                             {"bytes", static_cast<long long>(collective.bytes)}};
      }
      row["slots"] = part.collective ? space.slots() : std::vector<std::string>{};
      row["space_size"] = space.size();
      rows.push_back(std::move(row));
    }
  }
  if (options.json) {
    fmt::print("{}\n", nlohmann::ordered_json{{"workload", nlohmann::ordered_json::parse(workload_to_json(work))},
                                              {"gpu", gpu.name},
                                              {"clocks_mhz", clocks},
                                              {"partitions", rows}}
                           .dump(2));
    return;
  }
  fmt::print("{} on {}: {} clocks ({}..{} MHz), one layer, forward then backward\n", work.model.name, gpu.name,
             clocks.size(), clocks.front(), clocks.back());
  if (rows.empty()) {
    fmt::print("no collectives at --tp {} --cp {}: nothing to overlap, no partition is searched\n", work.parallel.tp,
               work.parallel.cp);
    return;
  }
  // Columns as wide as their longest entry (sequence parallelism's keys are the longest).
  std::size_t key_width = 3;
  std::size_t collective_width = 10;
  std::vector<std::string> collectives;
  for (const nlohmann::ordered_json& row : rows) {
    const nlohmann::ordered_json& comm = row["collective"];
    collectives.push_back(comm.is_null()
                              ? "-"
                              : fmt::format("{} {} {:.1f} MiB", comm["group"].get<std::string>(),
                                            comm["kind"].get<std::string>(), comm["bytes"].get<double>() / (1 << 20)));
    key_width = std::max(key_width, row["key"].get<std::string>().size());
    collective_width = std::max(collective_width, collectives.back().size());
  }
  fmt::print("{:<{}} {:>2}  {:<{}} {:<36} {:>6}  {}\n", "key", key_width, "nb", "collective", collective_width, "slots",
             "space", "compute ops");
  for (std::size_t index = 0; index < rows.size(); ++index) {
    const nlohmann::ordered_json& row = rows[index];
    const std::string slots = fmt::format("{}", fmt::join(row["slots"].get<std::vector<std::string>>(), " "));
    fmt::print("{:<{}} {:>2}  {:<{}} {:<36} {:>6}  {}\n", row["key"].get<std::string>(), key_width,
               row["nanobatch"].get<int>(), collectives[index], collective_width, slots,
               row["space_size"].get<std::size_t>(),
               fmt::join(row["compute_ops"].get<std::vector<std::string>>(), ","));
  }
}

}  // namespace

void add_partitions_command(CLI::App& app) {
  auto options = std::make_shared<PartitionsOptions>();
  CLI::App* command = app.add_subcommand("partitions", "show the partitions of one layer and the knob space of each");
  add_job_flags(command, options->workload, options->gpu, options->space);
  command->add_flag("--json", options->json, "print JSON instead of a table");
  command->callback([options] { run_partitions(*options); });
}

}  // namespace kareus::cli
