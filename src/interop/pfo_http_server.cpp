#include "kareus/interop/pfo_http_server.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <sys/socket.h>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"

namespace kareus::interop {

struct PfoHttpServer::Impl {
  PfoService& service;
  HttpServerOptions options;
  httplib::Server server;
  std::atomic<bool> stop_requested{false};
  bool bound = false;
  int listen_socket = -1;  ///< the last socket httplib configured: the one it bound

  Impl(PfoService& service_ref, HttpServerOptions server_options)
      : service(service_ref), options(std::move(server_options)) {}
};

PfoHttpServer::PfoHttpServer(PfoService& service, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {
  httplib::Server& server = impl_->server;
  const int threads = std::max(1, impl_->options.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  server.set_payload_max_length(impl_->options.max_body_bytes);
  server.set_read_timeout(impl_->options.read_timeout_s, 0);
  server.set_write_timeout(impl_->options.write_timeout_s, 0);
  server.set_keep_alive_max_count(100);
  server.set_tcp_nodelay(true);  // small JSON answers: no Nagle delay against delayed ACKs
  // httplib's default also sets SO_REUSEPORT, which would let a second `kareus serve` share the
  // port (and split the jobs between two states); keep only SO_REUSEADDR for quick restarts.
  server.set_socket_options([impl = impl_.get()](socket_t socket) {
    int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    impl->listen_socket = socket;
  });
  const auto forward = [this](const httplib::Request& request, httplib::Response& response) {
    HttpRequest mapped;
    mapped.method = request.method;
    mapped.path = request.path;
    for (const auto& [name, value] : request.params) mapped.query.emplace(name, value);  // first value wins
    mapped.body = request.body;
    HttpResponse answer = impl_->service.handle(mapped);
    response.status = answer.status;
    response.set_content(std::move(answer.body), "application/json");
  };
  server.Get(".*", forward);
  server.Post(".*", forward);
  server.Put(".*", forward);
  server.Delete(".*", forward);
  server.Patch(".*", forward);
  // Errors httplib answers itself (413 body too large, 400 unparsable request) get a JSON body too.
  server.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& response) {
        if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const std::string message =
            response.status == 413 ? "request body too large" : fmt::format("HTTP error {}", response.status);
        response.set_content(nlohmann::json{{"detail", message}}.dump(), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
}

PfoHttpServer::~PfoHttpServer() = default;

int PfoHttpServer::bind() {
  const HttpServerOptions& options = impl_->options;
  int port = options.port;
  if (port == 0) {
    port = impl_->server.bind_to_any_port(options.host);
  } else if (!impl_->server.bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port < 0) {
    throw Error(fmt::format("cannot listen on {}:{} (address in use, or not an address of this machine)", options.host,
                            options.port));
  }
  // httplib listens with a backlog of 5: a burst of connections (every rank of a job at once)
  // would overflow it and wait out SYN retransmissions (1 s, 3 s, ...). Widen it.
  if (impl_->listen_socket >= 0) ::listen(impl_->listen_socket, SOMAXCONN);
  impl_->bound = true;
  return port;
}

void PfoHttpServer::run() {
  if (!impl_->bound) throw Error("PfoHttpServer::run before bind");
  // A stop() that lands before the listener runs would be lost (httplib ignores it then), so a
  // watcher repeats it until the listener has returned.
  std::atomic<bool> done{false};
  std::thread watcher([this, &done] {
    while (!done.load()) {
      if (impl_->stop_requested.load() && impl_->server.is_running()) impl_->server.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  bool listened = true;
  if (!impl_->stop_requested.load()) listened = impl_->server.listen_after_bind();
  done = true;
  watcher.join();
  if (!listened && !impl_->stop_requested.load()) throw Error("the HTTP listener failed");
}

void PfoHttpServer::stop() {
  impl_->stop_requested = true;
  impl_->server.stop();
}

}  // namespace kareus::interop
