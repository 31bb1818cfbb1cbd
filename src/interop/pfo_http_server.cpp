// The HTTP/1.1 server of `kareus serve`: one thread, poll(2), one deadline per connection.
#include "kareus/interop/pfo_http_server.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/nonblocking_io.h"
#include "kareus/common/poll_loop.h"

namespace kareus::interop {
namespace {

/// A connection whose unsent answers reach this stops being read until they leave, so a client
/// that pipelines requests without reading answers holds at most this much (plus one answer).
constexpr std::size_t kPauseReadingBytes = 64 * 1024;
/// Bytes taken from a socket at a time; also the most unparsed input a paused connection holds.
constexpr std::size_t kReadChunkBytes = 16 * 1024;
/// After its last answer a closing connection reads and drops what the client still sends for at
/// most this long, so the answer is not lost to a reset (a 413 sent while a body is still coming).
constexpr double kMaxLingerS = 1.0;

std::string detail_json(const std::string& message) {
  return nlohmann::json{{"detail", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The addresses `host` names (numeric or a name), for listening.
struct AddressList {
  addrinfo* first = nullptr;
  AddressList(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const std::string service = std::to_string(port);
    if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &first) != 0) first = nullptr;
  }
  ~AddressList() {
    if (first != nullptr) ::freeaddrinfo(first);
  }
  AddressList(const AddressList&) = delete;
  AddressList& operator=(const AddressList&) = delete;
};

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* ipv4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(ipv4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const auto* ipv6 = reinterpret_cast<const sockaddr_in6*>(address);
    return IN6_IS_ADDR_LOOPBACK(&ipv6->sin6_addr);
  }
  return false;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  const AddressList addresses(host, 0);
  if (addresses.first == nullptr) return false;
  for (const addrinfo* entry = addresses.first; entry != nullptr; entry = entry->ai_next) {
    if (!is_loopback(entry->ai_addr)) return false;
  }
  return true;
}

struct PfoHttpServer::Impl {
  enum class Mode {
    kReading,    ///< reading and answering requests
    kClosing,    ///< sending its last answers; then lingering (or closed, while stopping)
    kLingering,  ///< answers sent and the writing side shut: drops input until EOF or the deadline
  };
  struct Connection {
    int fd;
    HttpRequestParser parser;
    std::string inbox;   ///< received bytes not yet parsed (only while reading is paused)
    std::string outbox;  ///< answers not yet sent
    Mode mode = Mode::kReading;
    bool continue_sent = false;
    double request_deadline_s = 0;  ///< while a 100 Continue is out: when the request must be whole
    /// Reading: the next request must be complete by then (set when the server starts waiting
    /// for it, never moved by the bytes that trickle in). Sending: the client must take more of
    /// the answers by then. Lingering: the end of the linger.
    double deadline_s;
    Connection(int socket, const HttpLimits& limits, double deadline)
        : fd(socket), parser(limits), deadline_s(deadline) {}
  };

  PfoService& service;
  HttpServerOptions options;
  int listen_fd = -1;
  PollLoop loop;  ///< its wake pipe carries stop()
  std::atomic<bool> stop_requested{false};
  bool stopping = false;
  double stop_deadline_s = 0;
  std::vector<std::unique_ptr<Connection>> connections;

  Impl(PfoService& service_ref, HttpServerOptions server_options)
      : service(service_ref), options(std::move(server_options)) {}
  ~Impl() {
    for (auto& connection : connections) ::close(connection->fd);
    if (listen_fd >= 0) ::close(listen_fd);
  }

  void queue_answer(Connection& connection, int status, const std::string& body, bool keep_alive, bool head) {
    queue_bytes(connection,
                fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n{}",
                            status, http_reason(status), body.size(), keep_alive ? "" : "Connection: close\r\n",
                            head ? std::string_view() : std::string_view(body)));
  }

  void queue_bytes(Connection& connection, std::string_view bytes) {
    if (connection.outbox.empty()) connection.deadline_s = monotonic_s() + options.timeout_s;  // to take them
    connection.outbox += bytes;
  }

  /// Sends what the socket takes now. False: the connection is finished (closed or failed).
  bool flush(Connection& connection, double now_s) {
    const std::optional<std::size_t> sent = send_pending(connection.fd, connection.outbox);
    if (!sent) return false;
    if (*sent > 0) connection.deadline_s = now_s + options.timeout_s;  // progress: the client reads its answers
    // An interim 100 Continue is part of answering the request being read: it never extends the
    // time that request has to arrive whole.
    if (connection.continue_sent && connection.mode == Mode::kReading) {
      connection.deadline_s = std::min(connection.deadline_s, connection.request_deadline_s);
    }
    if (!connection.outbox.empty() || connection.mode != Mode::kClosing) return true;
    if (stopping) return false;
    ::shutdown(connection.fd, SHUT_WR);
    connection.mode = Mode::kLingering;
    connection.deadline_s = now_s + std::min(options.timeout_s, kMaxLingerS);
    return true;
  }

  /// Parses and answers what the inbox holds, in order, while the answers waiting stay small.
  void process(Connection& connection) {
    while (connection.mode == Mode::kReading && !connection.inbox.empty() &&
           connection.outbox.size() < kPauseReadingBytes) {
      HttpRequestParser& parser = connection.parser;
      connection.inbox.erase(0, parser.feed(connection.inbox));
      if (parser.state() == HttpRequestParser::State::kComplete) {
        const ParsedHttpRequest request = parser.take();
        connection.continue_sent = false;
        const HttpResponse answer = service.handle(request.request);
        queue_answer(connection, answer.status, answer.body, request.keep_alive, request.head);
        if (!request.keep_alive) connection.mode = Mode::kClosing;
      } else if (parser.state() == HttpRequestParser::State::kFailed) {
        queue_answer(connection, parser.error_status(), detail_json(parser.error_message()), false, false);
        connection.mode = Mode::kClosing;
      }
    }
    if (connection.mode != Mode::kReading) connection.inbox.clear();
    if (connection.mode == Mode::kReading && connection.parser.awaits_continue() && !connection.continue_sent) {
      // The client waits for this before sending a body the headers showed to be within bounds.
      connection.request_deadline_s = connection.deadline_s;
      queue_bytes(connection, "HTTP/1.1 100 Continue\r\n\r\n");
      connection.deadline_s = std::min(connection.deadline_s, connection.request_deadline_s);
      connection.continue_sent = true;
    }
  }

  /// Handles poll's report for one connection. False: close it.
  bool serve(Connection& connection, short revents, double now_s) {
    if ((revents & POLLOUT) != 0 && !flush(connection, now_s)) return false;
    char chunk[kReadChunkBytes];
    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && wants_input(connection)) {
      const ssize_t count = ::recv(connection.fd, chunk, sizeof(chunk), 0);
      if (count < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (count <= 0) {
        // The client is gone or has finished sending: answers already queued may still leave.
        if (connection.mode == Mode::kLingering || connection.outbox.empty()) return false;
        connection.mode = Mode::kClosing;
        return flush(connection, now_s);
      }
      if (connection.mode == Mode::kLingering) return true;  // dropped
      connection.inbox.append(chunk, static_cast<std::size_t>(count));
    } else if ((revents & (POLLHUP | POLLERR)) != 0 && (revents & POLLOUT) == 0) {
      return false;
    }
    if (connection.mode == Mode::kReading) process(connection);
    return connection.outbox.empty() || flush(connection, now_s);
  }

  [[nodiscard]] bool wants_input(const Connection& connection) const {
    if (connection.mode == Mode::kLingering) return true;
    return connection.mode == Mode::kReading && !stopping && connection.inbox.empty() &&
           connection.outbox.size() < kPauseReadingBytes;
  }

  /// Acts on a passed deadline. False: close the connection.
  bool expire(Connection& connection, double now_s) {
    if (now_s < connection.deadline_s) return true;
    if (!connection.outbox.empty() || connection.mode != Mode::kReading) return false;  // not reading its answers
    if (!connection.parser.started()) return false;                                     // idle
    queue_answer(
        connection, 408,
        detail_json(fmt::format("the request did not arrive whole within {} s (--timeout-s)", options.timeout_s)),
        false, false);
    connection.mode = Mode::kClosing;
    connection.inbox.clear();
    return flush(connection, now_s);
  }

  void accept_clients(double now_s) {
    while (connections.size() < options.max_connections) {
      const int fd = loop.accept(listen_fd, now_s);  // out of descriptors: accepting pauses
      if (fd < 0) return;
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));  // small answers: no Nagle delay
      connections.push_back(std::make_unique<Connection>(fd, options.limits, now_s + options.timeout_s));
    }
  }

  void close_connection(std::size_t index) {
    ::close(connections[index]->fd);
    connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(index));
  }

  void begin_stop(double now_s) {
    stopping = true;
    stop_deadline_s = now_s + options.timeout_s;
    ::close(listen_fd);
    listen_fd = -1;
    for (std::size_t index = connections.size(); index-- > 0;) {
      Connection& connection = *connections[index];
      if (connection.outbox.empty() || connection.mode == Mode::kLingering) {
        close_connection(index);
      } else {
        connection.mode = Mode::kClosing;
      }
    }
  }

  void run() {
    while (true) {
      double now_s = monotonic_s();
      if (stop_requested.load() && !stopping) begin_stop(now_s);
      if (stopping && (connections.empty() || now_s >= stop_deadline_s)) return;
      for (std::size_t index = connections.size(); index-- > 0;) {
        if (!expire(*connections[index], now_s)) close_connection(index);
      }
      const bool accepting = !stopping && connections.size() < options.max_connections;
      double wake_s = stopping ? stop_deadline_s : INFINITY;
      std::vector<pollfd> fds;
      for (const auto& connection : connections) {
        const short events =
            static_cast<short>((wants_input(*connection) ? POLLIN : 0) | (connection->outbox.empty() ? 0 : POLLOUT));
        fds.push_back({connection->fd, events, 0});
        wake_s = std::min(wake_s, connection->deadline_s);
      }
      const std::optional<PollLoop::Ready> ready = loop.wait(accepting ? listen_fd : -1, fds, wake_s);
      if (!ready) continue;
      now_s = monotonic_s();
      if (!ready->wake_codes.empty()) continue;  // stop(): the loop's top begins the stop
      // Connections by index from the back, so closing one does not shift the rest.
      for (std::size_t index = connections.size(); index-- > 0;) {
        const short revents = ready->revents[index];
        if (revents != 0 && !serve(*connections[index], revents, now_s)) close_connection(index);
      }
      if (ready->listener) accept_clients(now_s);
    }
  }
};

PfoHttpServer::PfoHttpServer(PfoService& service, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {}

PfoHttpServer::~PfoHttpServer() = default;

int PfoHttpServer::bind() {
  const HttpServerOptions& options = impl_->options;
  const AddressList addresses(options.host, options.port);
  if (addresses.first == nullptr) {
    throw InputError(fmt::format("--host {}: not an address or a name of this machine", options.host));
  }
  if (!options.allow_remote && !is_loopback_host(options.host)) {
    throw InputError(
        fmt::format("--host {} is not a loopback address, and the server has no authentication (anyone "
                    "who reaches the port can register jobs and change their plans); pass "
                    "--allow-remote to listen there anyway",
                    options.host));
  }
  int error_code = 0;
  for (const addrinfo* entry = addresses.first; entry != nullptr; entry = entry->ai_next) {
    const int fd = ::socket(entry->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error_code = errno;
      continue;
    }
    // SO_REUSEADDR for quick restarts; never SO_REUSEPORT, which would let a second `kareus serve`
    // share the port (and split the jobs between two states).
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    // A burst of connections (every rank of a job at once) must not overflow the backlog.
    if (::bind(fd, entry->ai_addr, entry->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      sockaddr_storage bound{};
      socklen_t length = sizeof(bound);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
      impl_->listen_fd = fd;
      return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    }
    error_code = errno;
    ::close(fd);
  }
  throw Error(fmt::format("cannot listen on {}:{}: {}", options.host, options.port, std::strerror(error_code)));
}

void PfoHttpServer::run() {
  if (impl_->listen_fd < 0 && !impl_->stopping) throw Error("PfoHttpServer::run before bind");
  impl_->run();
}

void PfoHttpServer::stop() {
  impl_->stop_requested = true;
  impl_->loop.wake(1);
}

}  // namespace kareus::interop
