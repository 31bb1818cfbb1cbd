// kareusd: the privileged GPU clock daemon (see include/kareus/runtime/daemon.h).
//   kareusd --config /etc/kareusd/kareusd.json           serve until SIGTERM/SIGINT (SIGHUP: reload)
//   kareusd --socket PATH --send '{"op": "get", "gpu": 0}' [--send ...]  as a client: print each reply
#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "kareus/common/error.h"
#include "kareus/common/memory_reserve.h"
#include "kareus/common/signal_wait.h"
#include "kareus/runtime/daemon.h"
#include "kareus/runtime/daemon_protocol.h"
#include "kareus/runtime/kareusd_client.h"

namespace {

int serve(const std::string& config_path) {
  using namespace kareus::runtime;
  const DaemonConfig config = read_daemon_config(config_path);
  // Signals are taken by one thread with sigwait, so the server needs no handler at all.
  const kareus::SignalWait signals({SIGINT, SIGHUP});
  DaemonServer server(config, make_daemon_gpus(config),
                      [](std::string_view message) { fmt::print(stderr, "kareusd: {}\n", message); });
  signals.run_until([&] { server.run(); },
                    [&](int signal_number) {
                      if (signal_number == SIGHUP) {
                        // Reload: a config that does not parse leaves the running one in place.
                        try {
                          server.reload(read_daemon_config(config_path));
                        } catch (const std::exception& error) {
                          fmt::print(stderr, "kareusd: SIGHUP: not reloaded, the running config stays: {}\n",
                                     error.what());
                        }
                        return true;
                      }
                      fmt::print(stderr, "kareusd: signal {}, shutting down\n", signal_number);
                      server.stop();
                      return false;
                    });
  return 0;
}

// Sends every request over one connection (one lease) and prints each reply; exit 1 if any failed.
int send(const std::string& socket_path, const std::vector<std::string>& lines) {
  kareus::runtime::KareusdConnection connection(socket_path);
  bool all_ok = true;
  for (const std::string& line : lines) {
    const std::string reply = connection.exchange(line);
    fmt::print("{}\n", reply);
    std::fflush(stdout);
    all_ok = kareus::runtime::parse_daemon_reply(reply).ok && all_ok;
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  kareus::reserve_memory_for_unwinding();  // out of memory: a message and exit 1, never a core
  CLI::App app{"kareusd: lets allowed users lock GPU clocks over a Unix socket (run as root)"};
  std::string config_path;
  std::string socket_path;
  std::vector<std::string> requests;
  app.add_option("--config", config_path, "JSON config (socket_path, socket_group, allowed_uids, allowed_gids, ...)");
  app.add_option("--socket", socket_path, "client mode: the daemon's socket");
  app.add_option("--send", requests, "client mode: JSON request lines, sent in order over one connection")
      ->needs("--socket");
  app.set_version_flag("--version", "kareusd 0.1.0");
  try {
    app.parse(argc, argv);
    if (!requests.empty()) return send(socket_path, requests);
    if (config_path.empty()) throw kareus::InputError("--config is required (or --socket with --send)");
    return serve(config_path);
  } catch (const CLI::Success& success) {
    return app.exit(success);
  } catch (const CLI::ParseError& error) {
    app.exit(error);
    return 2;
  } catch (const kareus::InputError& error) {
    fmt::print(stderr, "kareusd: error: {}\n", error.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // Printed without allocating: the memory is still short. Clocks were reset on the way out.
    std::fputs("kareusd: error: out of memory (see ulimit -v)\n", stderr);
    return 1;
  } catch (const std::exception& error) {
    fmt::print(stderr, "kareusd: error: {}\n", error.what());
    return 1;
  }
}
