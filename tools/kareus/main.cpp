// kareus: energy-optimal execution plans for large-model training.
#include <cstdio>
#include <exception>
#include <new>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/common/memory_reserve.h"
#include "kareus/common/version.h"

int main(int argc, char** argv) {
  kareus::reserve_memory_for_unwinding();  // out of memory: a message and exit 1, never a core
  CLI::App app{"kareus: cut the energy of large-model training (clocks x overlap), on the emulator or real GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("kareus {}", kareus::kKareusVersion));
  // In the order --help lists them: the planner's commands, then the solver's and interop's.
  namespace cli = kareus::cli;
  for (void (*add_command)(CLI::App&) :
       {cli::add_models_command, cli::add_gpus_command, cli::add_partitions_command, cli::add_simulate_command,
        cli::add_plan_command, cli::add_profile_command, cli::add_calibrate_command, cli::add_search_command,
        cli::add_solve_command, cli::add_export_command, cli::add_import_command, cli::add_serve_command}) {
    add_command(app);
  }

  const char* command = argc > 1 ? argv[1] : "kareus";
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& success) {
    return app.exit(success);
  } catch (const CLI::ParseError& error) {
    app.exit(error);
    return 2;  // every bad flag is the user's mistake
  } catch (const kareus::InputError& error) {
    fmt::print(stderr, "kareus {}: error: {}\n", command, error.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // Printed without allocating: the memory is still short.
    std::fputs(
        "kareus: error: out of memory (the input needs more memory than this process may use: see "
        "ulimit -v and docs/limits.md)\n",
        stderr);
    return 1;
  } catch (const std::exception& error) {
    fmt::print(stderr, "kareus {}: error: {}\n", command, error.what());
    return 1;
  }
  return 0;
}
