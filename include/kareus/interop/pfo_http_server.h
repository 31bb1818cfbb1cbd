// kareus/interop/pfo_http_server.h - the HTTP/1.1 transport of `kareus serve`.
//
// Moves requests to a PfoService (pfo_service.h) and its answers back, nothing more. One thread
// serves every connection with poll(2), so no client can hold a worker: a request must arrive
// whole (headers and body) within `timeout_s` of the server waiting for it, however slowly its
// bytes trickle; an answer must make progress within `timeout_s`; requests on one connection
// (pipelined or not) are answered in order. Bodies, header fields and open connections are
// bounded (http_request_parser.h); past `max_connections` new clients wait in the kernel's
// backlog rather than being refused, and running out of file descriptors pauses accepting instead
// of spinning. Binds to loopback unless `allow_remote`. stop() ends run() within `timeout_s`
// whatever the clients do (answers already queued get that long to leave). Times in s.
//
// Why not cpp-httplib (Debian's 0.11): it reads a chunked body whole whatever the payload limit,
// accepts any number of header lines, restarts its read timeout on every byte received (so a
// trickling client is never cut off) and serves each connection on a pool thread that stop()
// must wait for.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kareus/interop/http_request_parser.h"
#include "kareus/interop/pfo_service.h"

namespace kareus::interop {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 7787;            ///< 0: any free port (see PfoHttpServer::bind)
  bool allow_remote = false;  ///< listen on a non-loopback address (the server has no authentication)
  HttpLimits limits;
  double timeout_s = 5;
  std::size_t max_connections = 1024;
};

/// Whether every address `host` names is a loopback address (127.0.0.0/8, ::1). False when it
/// names none.
[[nodiscard]] bool is_loopback_host(const std::string& host);

class PfoHttpServer {
 public:
  PfoHttpServer(PfoService& service, HttpServerOptions options);
  ~PfoHttpServer();
  PfoHttpServer(const PfoHttpServer&) = delete;
  PfoHttpServer& operator=(const PfoHttpServer&) = delete;

  /// Binds the listening socket; returns the port. Throws InputError for a non-loopback host
  /// without `allow_remote` and Error naming host and port when binding fails.
  int bind();
  /// Serves until stop(); requires bind(). Throws Error if poll fails.
  void run();
  /// Makes run() return (within timeout_s); safe from any thread, before or during run().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kareus::interop
