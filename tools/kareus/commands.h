// The kareus subcommands. Each file tools/kareus/<name>_command.cpp holds the options
// struct of one subcommand and its add_<name>_command, which binds the flags and sets the
// callback; the callback calls the libraries and prints. Errors are thrown as
// kareus::InputError (exit 2) or kareus::Error (exit 1) and mapped in main.cpp.
#pragma once

namespace CLI {
class App;
}

namespace kareus::cli {

void add_solve_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_gpus_command(CLI::App& app);
void add_partitions_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_search_command(CLI::App& app);
// Interop: the artifact's schedule files and Zeus's PFO protocol.
void add_export_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace kareus::cli
