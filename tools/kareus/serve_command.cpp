// kareus serve: Zeus's pipeline frequency optimizer protocol over a kareus frontier
// (interop/pfo_service.h), until SIGINT or SIGTERM.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <memory>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/common/signal_wait.h"
#include "kareus/interop/pfo_http_server.h"
#include "kareus/interop/pfo_protocol.h"
#include "kareus/interop/pfo_service.h"

namespace kareus::cli {
namespace {

struct ServeOptions {
  std::string frontier;
  std::string method = "kareus";
  std::string results;
  std::uint64_t max_results_bytes = interop::ResultLog::kDefaultMaxBytes;
  interop::PfoServiceLimits service;
  interop::HttpServerOptions http;
};

/// Each connection is a file descriptor: raise the soft limit toward the hard one when
/// --max-connections needs it (running out anyway only pauses accepting).
void make_room_for_connections(std::size_t connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = static_cast<rlim_t>(connections) + 64;
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

void run_serve(const ServeOptions& options) {
  std::vector<interop::ServedPlan> frontier = interop::load_served_frontier(options.frontier, options.method);
  std::unique_ptr<interop::ResultLog> results;
  if (!options.results.empty()) {
    results = std::make_unique<interop::ResultLog>(options.results, options.max_results_bytes);
    if (results->dropped_tail_bytes() > 0) {
      fmt::print(stderr, "kareus serve: --results {}: cut off a torn last line of {} bytes\n", options.results,
                 results->dropped_tail_bytes());
    }
  }
  const std::size_t plans = frontier.size();
  const std::size_t stages = frontier.front().plan.stages.size();
  interop::PfoService service(std::move(frontier), results.get(), options.service);

  // A --results write past the file size limit must fail (EFBIG, answered 507), not kill the server.
  std::signal(SIGXFSZ, SIG_IGN);
  // SIGHUP (the terminal closed, or a supervisor's reload) must not kill the server: it has
  // nothing to reload, so it says so and goes on.
  const SignalWait signals({SIGINT, SIGHUP});  // before the server starts its threads
  interop::PfoHttpServer server(service, options.http);
  const int port = server.bind();
  make_room_for_connections(options.http.max_connections);
  if (!interop::is_loopback_host(options.http.host)) {
    fmt::print(stderr,
               "kareus serve: WARNING: {} is not a loopback address and the server has no authentication: anyone "
               "who reaches port {} can register jobs, change their plans (/deadline) and append to --results\n",
               options.http.host, port);
  }
  fmt::print("kareus serve: listening on http://{}:{} ({} plans, {} stages)\n", options.http.host, port, plans, stages);
  std::fflush(stdout);
  signals.run_until([&] { server.run(); },
                    [&](int signal_number) {
                      if (signal_number == SIGHUP) {
                        fmt::print(stderr, "kareus serve: SIGHUP: nothing to reload, still serving\n");
                        return true;
                      }
                      server.stop();
                      return false;
                    });
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
  command->add_option("--host", options->http.host, "address to listen on (loopback unless --allow-remote)")
      ->capture_default_str();
  command->add_flag("--allow-remote", options->http.allow_remote,
                    "allow a --host that is not loopback (the server has no authentication)");
  command->add_option("--port", options->http.port, "port; 0 = any free port")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command->add_option("--results", options->results, "append posted profiling results to this JSONL file");
  command->add_option("--max-results-bytes", options->max_results_bytes, "cap of the --results file (507 beyond)")
      ->check(CLI::Range(std::uint64_t{1024}, std::uint64_t{1} << 40))
      ->capture_default_str();
  command->add_option("--max-body-bytes", options->http.limits.max_body_bytes, "largest request body (413 beyond)")
      ->check(CLI::Range(std::size_t{64}, interop::kMaxRequestBodyBytes))
      ->capture_default_str();
  command
      ->add_option("--timeout-s", options->http.timeout_s,
                   "a request must arrive whole, and an answer make progress, within this (s)")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  command->add_option("--max-connections", options->http.max_connections, "open connections (more wait to be accepted)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{65536}))
      ->capture_default_str();
  command->add_option("--max-jobs", options->service.max_jobs, "jobs kept (the least recently used is forgotten)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->capture_default_str();
  command
      ->add_option("--max-ranks", options->service.max_ranks,
                   "registered ranks kept over all jobs (the least recently used jobs are forgotten)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24))
      ->capture_default_str();
  command->callback([options] { run_serve(*options); });
}

}  // namespace kareus::cli
