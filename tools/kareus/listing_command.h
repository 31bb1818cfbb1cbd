// A listing subcommand (`kareus models`, `kareus gpus`): a table, or JSON with --json.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace kareus::cli {

inline void add_listing_command(CLI::App& app, const std::string& name, const std::string& description,
                                std::function<void(bool json)> print) {
  auto json = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(name, description);
  command->add_flag("--json", *json, "print JSON instead of a table");
  command->callback([json, print = std::move(print)] { print(*json); });
}

}  // namespace kareus::cli
