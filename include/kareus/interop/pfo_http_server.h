// kareus/interop/pfo_http_server.h - the HTTP transport of `kareus serve` (cpp-httplib).
//
// Moves requests to a PfoService (pfo_service.h) and its answers back, nothing more: binds to
// loopback unless told otherwise, caps request bodies (413 beyond), times out slow readers and
// writers, and stops cleanly when stop() is called (from a signal-watching thread). Times in s.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kareus/interop/pfo_service.h"

namespace kareus::interop {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 7787;  ///< 0: any free port (see PfoHttpServer::bind)
  std::size_t max_body_bytes = 1u << 20;
  int read_timeout_s = 5;
  int write_timeout_s = 5;
  int threads = 64;  ///< worker threads; each serves one connection at a time
};

class PfoHttpServer {
 public:
  PfoHttpServer(PfoService& service, HttpServerOptions options);
  ~PfoHttpServer();
  PfoHttpServer(const PfoHttpServer&) = delete;
  PfoHttpServer& operator=(const PfoHttpServer&) = delete;

  /// Binds the listening socket; returns the port. Throws Error naming host and port on failure.
  int bind();
  /// Serves until stop(); requires bind(). Throws Error if the listener fails.
  void run();
  /// Makes run() return after the requests in flight; safe from any thread, before or during run().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kareus::interop
