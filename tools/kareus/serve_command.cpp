// kareus serve: Zeus's pipeline frequency optimizer protocol over a kareus frontier
// (interop/pfo_service.h), until SIGINT or SIGTERM.
#include <csignal>
#include <cstdio>
#include <memory>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/common/signal_wait.h"
#include "kareus/interop/pfo_http_server.h"
#include "kareus/interop/pfo_service.h"

namespace kareus::cli {
namespace {

struct ServeOptions {
  std::string frontier;
  std::string method = "kareus";
  std::string results;
  interop::HttpServerOptions http;
};

void run_serve(const ServeOptions& options) {
  std::vector<interop::ServedPlan> frontier = interop::load_served_frontier(options.frontier, options.method);
  std::unique_ptr<interop::ResultLog> results;
  if (!options.results.empty()) results = std::make_unique<interop::ResultLog>(options.results);
  const std::size_t plans = frontier.size();
  const std::size_t stages = frontier.front().plan.stages.size();
  interop::PfoService service(std::move(frontier), results.get());

  const SignalWait signals({SIGINT});  // before the server starts its threads
  interop::PfoHttpServer server(service, options.http);
  const int port = server.bind();
  fmt::print("kareus serve: listening on http://{}:{} ({} plans, {} stages)\n", options.http.host, port, plans, stages);
  std::fflush(stdout);
  signals.run([&] { server.run(); }, [&](int) { server.stop(); });
  fmt::print("kareus serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* command = app.add_subcommand(
      "serve", "serve a frontier's clocks over Zeus's pipeline frequency optimizer protocol (plus comm schedules)");
  command
      ->add_option("--frontier", options->frontier,
                   "OUT of `kareus plan` (or its summary.json, or OUT/plans/METHOD), a kareus.frontier/1 "
                   "file, or a folder with frontier.json or plan_N.json files")
      ->required();
  command->add_option("--method", options->method, "the summary's method to serve")->capture_default_str();
  command->add_option("--host", options->http.host, "address to listen on (default loopback)")->capture_default_str();
  command->add_option("--port", options->http.port, "port; 0 = any free port")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command->add_option("--results", options->results, "append posted profiling results to this JSONL file");
  command->add_option("--max-body-bytes", options->http.max_body_bytes, "largest request body")
      ->check(CLI::Range(std::size_t{64}, std::size_t{1} << 24))
      ->capture_default_str();
  command->add_option("--timeout-s", options->http.read_timeout_s, "read and write timeout per request (s)")
      ->check(CLI::Range(1, 600))
      ->capture_default_str();
  command->add_option("--threads", options->http.threads, "worker threads (one per open connection)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->callback([options] {
    options->http.write_timeout_s = options->http.read_timeout_s;
    run_serve(*options);
  });
}

}  // namespace kareus::cli
