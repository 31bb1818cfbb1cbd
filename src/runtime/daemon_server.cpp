// The socket side of kareusd: accept with SO_PEERCRED checks, split lines, enforce the message
// size, and turn a closed connection into a lease release. One thread, poll(2).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/file_lock.h"
#include "kareus/common/nonblocking_io.h"
#include "kareus/common/poll_loop.h"
#include "kareus/runtime/daemon.h"
#include "kareus/runtime/daemon_protocol.h"

namespace kareus::runtime {

struct DaemonServer::Connection {
  int fd = -1;
  DaemonCore::ClientId client = 0;
  PeerIdentity peer;
  std::string buffer;
  bool discarding = false;    ///< skipping the rest of an oversized message up to its newline
  std::string outbox;         ///< replies the socket has not taken yet
  double last_request_s = 0;  ///< when it connected or last sent a whole request
};

namespace {

// Replies waiting for a client that pipelines requests without reading: above the first size the
// daemon stops reading that client's requests until it reads its replies (back-pressure, the
// connection stays); a client that let the second pile up could only have done so by
// misbehaving and is dropped.
constexpr std::size_t kPauseReadingBytes = 64 * 1024;
constexpr std::size_t kMaxOutboxBytes = 1024 * 1024;

// What the wake pipe carries: stop() and reload().
constexpr char kWakeStop = 1;
constexpr char kWakeReload = 2;

// The first line of SOCKET_PATH.leases; one locked GPU index per line follows.
constexpr std::string_view kLeaseRecordSchema = "kareusd.leases/1";

std::string error_line(const std::string& message) {
  DaemonReply reply;
  reply.ok = false;
  reply.error = message;
  return format_daemon_reply(reply);
}

}  // namespace

DaemonServer::DaemonServer(DaemonConfig config, std::vector<std::unique_ptr<ClockBackend>> gpus, Log log)
    : config_(std::move(config)), core_(std::move(gpus), config_.max_requests_per_second), log_(std::move(log)) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (config_.socket_path.empty() || config_.socket_path.size() >= sizeof(address.sun_path)) {
    throw InputError(
        fmt::format("socket_path \"{}\" must be 1..{} characters", config_.socket_path, sizeof(address.sun_path) - 1));
  }
  std::optional<gid_t> group;
  if (!config_.socket_group.empty()) {
    std::vector<char> buffer(16384);
    ::group entry{};
    ::group* found = nullptr;
    if (::getgrnam_r(config_.socket_group.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
        found == nullptr) {
      throw InputError(fmt::format("socket_group \"{}\" does not exist", config_.socket_group));
    }
    group = found->gr_gid;
  }
  std::memcpy(address.sun_path, config_.socket_path.c_str(), config_.socket_path.size() + 1);
  check_socket_folder();
  // One daemon per socket path: a second one starting at the same moment is refused here.
  lock_.emplace(config_.socket_path + ".lock", "socket_path " + config_.socket_path);
  // A socket left by a daemon that died is replaced; a live daemon's socket and any other file
  // are not ours to remove.
  struct stat existing {};
  if (::lstat(config_.socket_path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      throw InputError(fmt::format("socket_path {} exists and is not a socket", config_.socket_path));
    }
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool live = probe >= 0 && ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
    if (probe >= 0) ::close(probe);
    if (live) {
      throw InputError(
          fmt::format("socket_path {}: a running kareusd answers there; stop it first (only a stale "
                      "socket is replaced)",
                      config_.socket_path));
    }
    ::unlink(config_.socket_path.c_str());
  }
  reset_left_locked();
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const mode_t previous_umask = ::umask(0117);  // the socket is born 0660, never wider
  const bool bound =
      listen_fd_ >= 0 && ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  const int bind_errno = errno;
  ::umask(previous_umask);
  const auto fail = [&](const std::string& what, int code) {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw Error(fmt::format("{} {}: {}", what, config_.socket_path, std::strerror(code)));
  };
  if (!bound) fail("cannot bind", bind_errno);
  if (::chmod(config_.socket_path.c_str(), 0660) != 0) fail("cannot chmod", errno);
  if (group && ::chown(config_.socket_path.c_str(), static_cast<uid_t>(-1), *group) != 0) fail("cannot chown", errno);
  if (::listen(listen_fd_, 64) != 0) fail("cannot listen on", errno);
}

void DaemonServer::check_socket_folder() const {
  // In a folder anyone may write, another user can put their own socket at the path (clients
  // would then talk to it) or, without the sticky bit, replace the daemon's.
  std::filesystem::path folder = std::filesystem::path(config_.socket_path).parent_path();
  if (folder.empty()) folder = ".";
  struct stat status {};
  if (::stat(folder.c_str(), &status) != 0 || (status.st_mode & S_IWOTH) == 0) return;
  if ((status.st_mode & S_ISVTX) == 0) {
    throw InputError(
        fmt::format("socket_path {}: its folder {} is writable by every user and not sticky, so anyone could "
                    "replace the socket; use a folder only root writes (/run/kareusd)",
                    config_.socket_path, folder.string()));
  }
  log(
      fmt::format("WARNING: socket_path {} lies in {}, which every user may write: another user could have "
                  "created the path before kareusd started; use a folder only root writes (/run/kareusd)",
                  config_.socket_path, folder.string()));
}

void DaemonServer::reset_left_locked() {
  const std::filesystem::path record = config_.socket_path + ".leases";
  core_.set_lease_record([record](const std::vector<int>& locked) {
    if (locked.empty()) {
      std::filesystem::remove(record);
    } else {
      write_file_atomic(record, fmt::format("{}\n{}\n", kLeaseRecordSchema, fmt::join(locked, "\n")));
    }
  });
  if (!std::filesystem::exists(record)) return;
  std::istringstream lines(read_text_file(record));
  std::string header;
  std::getline(lines, header);
  for (int gpu = 0; lines >> gpu;) {
    try {
      core_.reset_gpu(gpu);
      log(fmt::format("reset gpu {}, left locked by a previous kareusd that did not shut down (record {})", gpu,
                      record.string()));
    } catch (const std::exception& error) {
      log(
          fmt::format("GPU {} IS LEFT LOCKED by a previous kareusd: reset failed: {}; it stays in {} and the "
                      "next start or shutdown tries again",
                      gpu, error.what(), record.string()));
    }
  }
  core_.record_locked();
}

DaemonServer::~DaemonServer() {
  for (int gpu : core_.reset_all()) log(fmt::format("shutdown: reset gpu {}", gpu));
  for (auto& connection : connections_) ::close(connection->fd);
  ::close(listen_fd_);
  ::unlink(config_.socket_path.c_str());
}

void DaemonServer::stop() noexcept { loop_.wake(kWakeStop); }

void DaemonServer::reload(DaemonConfig config) {
  {
    const std::lock_guard lock(reload_mutex_);
    pending_reload_ = std::move(config);
  }
  loop_.wake(kWakeReload);
}

void DaemonServer::apply_reload() {
  std::optional<DaemonConfig> next;
  {
    const std::lock_guard lock(reload_mutex_);
    next.swap(pending_reload_);
  }
  if (!next) return;
  const auto keep = [&](const char* field, bool same) {
    if (!same) log(fmt::format("reload: {} changed, which takes a restart; the running value stays", field));
  };
  keep("socket_path", next->socket_path == config_.socket_path);
  keep("socket_group", next->socket_group == config_.socket_group);
  keep("backend", next->backend == config_.backend);
  keep("nvml_library", next->nvml_library == config_.nvml_library);
  keep("fake_gpu_count", next->fake_gpu_count == config_.fake_gpu_count);
  keep("fake_clocks_mhz", next->fake_clocks_mhz == config_.fake_clocks_mhz);
  config_.allowed_uids = std::move(next->allowed_uids);
  config_.allowed_gids = std::move(next->allowed_gids);
  config_.max_message_bytes = next->max_message_bytes;
  config_.max_requests_per_second = next->max_requests_per_second;
  config_.max_clients = next->max_clients;
  config_.max_clients_per_user = next->max_clients_per_user;
  config_.idle_timeout_s = next->idle_timeout_s;
  core_.set_max_requests_per_second(config_.max_requests_per_second);
  for (std::size_t index = connections_.size(); index-- > 0;) {
    const Connection& connection = *connections_[index];
    if (const std::optional<std::string> refusal = check_peer(connection.peer, config_)) {
      log(fmt::format("reload: pid {} uid {} is no longer allowed", connection.peer.pid, connection.peer.uid));
      close_client(index);
    }
  }
  log(
      fmt::format("reload: {} allowed uids, {} allowed gids, max_message_bytes {}, max_requests_per_second {}, "
                  "max_clients {}, idle_timeout_s {}",
                  config_.allowed_uids.size(), config_.allowed_gids.size(), config_.max_message_bytes,
                  config_.max_requests_per_second, config_.max_clients, config_.idle_timeout_s));
}

void DaemonServer::log(std::string_view message) const {
  if (log_) log_(message);
}

void DaemonServer::run() {
  log(fmt::format("serving {} GPUs on {}", core_.gpu_count(), config_.socket_path));
  while (true) {
    double now_s = monotonic_s();
    // Clients holding no GPU that sent no whole request for idle_timeout_s free their slot.
    double wake_s = std::numeric_limits<double>::infinity();
    for (std::size_t index = connections_.size(); index-- > 0;) {
      const Connection& connection = *connections_[index];
      if (core_.holds_any(connection.client)) continue;
      const double idle_until_s = connection.last_request_s + config_.idle_timeout_s;
      if (now_s >= idle_until_s) {
        log(fmt::format("client pid {} uid {} idle for {} s: disconnecting", connection.peer.pid, connection.peer.uid,
                        config_.idle_timeout_s));
        close_client(index);
      } else {
        wake_s = std::min(wake_s, idle_until_s);
      }
    }
    std::vector<pollfd> fds;
    for (const auto& connection : connections_) {
      const bool reading = connection->outbox.size() < kPauseReadingBytes;
      fds.push_back(
          {connection->fd, static_cast<short>((reading ? POLLIN : 0) | (connection->outbox.empty() ? 0 : POLLOUT)), 0});
    }
    const std::optional<PollLoop::Ready> ready = loop_.wait(listen_fd_, fds, wake_s);
    if (!ready) continue;
    now_s = monotonic_s();
    if (!ready->wake_codes.empty()) {
      if (ready->wake_codes.find(kWakeStop) != std::string::npos) return;
      apply_reload();
      continue;  // the connections may have changed
    }
    // Connections first, by index from the back, so closing one does not shift the rest.
    for (std::size_t index = fds.size(); index-- > 0;) {
      const short revents = ready->revents[index];
      if (revents == 0) continue;
      Connection& connection = *connections_[index];
      bool keep = true;
      if (revents & POLLOUT) keep = flush(connection);
      if (keep && (fds[index].events & POLLIN) != 0 && (revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        keep = read_client(connection);
      } else if (keep && (revents & (POLLHUP | POLLERR)) != 0) {
        keep = false;  // gone while its replies waited
      }
      if (!keep) close_client(index);
    }
    if (ready->listener) accept_client(now_s);
  }
}

void DaemonServer::accept_client(double now_s) {
  while (true) {
    int error = 0;
    const int fd = loop_.accept(listen_fd_, now_s, &error);
    if (fd < 0) {
      if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
        log(fmt::format("cannot accept a client: {}; pausing accepts for {} s ({} clients connected)",
                        std::strerror(error), PollLoop::kAcceptPauseS, connections_.size()));
      }
      return;  // 0: no more pending
    }
    ucred credentials{};
    socklen_t length = sizeof(credentials);
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
      log(fmt::format("refused a client: SO_PEERCRED failed: {}", std::strerror(errno)));
      ::close(fd);
      continue;
    }
    connection->peer = {credentials.pid, credentials.uid, credentials.gid};
    std::optional<std::string> refusal = check_peer(connection->peer, config_);
    if (!refusal && connections_.size() >= config_.max_clients) {
      refusal = fmt::format("too many clients (max_clients {})", config_.max_clients);
    }
    if (!refusal) {
      const auto own =
          static_cast<std::size_t>(std::count_if(connections_.begin(), connections_.end(), [&](const auto& other) {
            return other->peer.uid == credentials.uid;
          }));
      if (own >= config_.max_clients_per_user) {
        refusal = fmt::format("uid {} already has {} connections (max_clients_per_user {})", credentials.uid, own,
                              config_.max_clients_per_user);
      }
    }
    if (refusal) {
      log(fmt::format("refused pid {} uid {}: {}", credentials.pid, credentials.uid, *refusal));
      (void)send_line(*connection, error_line(*refusal));
      ::close(fd);
      continue;
    }
    connection->client = core_.connect(connection->peer);
    connection->last_request_s = now_s;
    log(fmt::format("client pid {} uid {} connected", credentials.pid, credentials.uid));
    connections_.push_back(std::move(connection));
  }
}

bool DaemonServer::send_line(Connection& connection, const std::string& line) {
  connection.outbox += line;
  return flush(connection);
}

bool DaemonServer::flush(Connection& connection) {
  // Never blocks: what the socket does not take now waits in the outbox for POLLOUT.
  return send_pending(connection.fd, connection.outbox) && connection.outbox.size() <= kMaxOutboxBytes;
}

bool DaemonServer::read_client(Connection& connection) {
  char chunk[4096];
  const ssize_t count = ::recv(connection.fd, chunk, sizeof(chunk), 0);
  if (count < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (count <= 0) {
    if (!connection.buffer.empty() && !connection.discarding) {
      // The peer may have shut down only its writing side and still read the answer.
      (void)send_line(connection, error_line(fmt::format("truncated message: the connection closed after {} bytes "
                                                         "without a newline",
                                                         connection.buffer.size())));
    }
    return false;
  }
  const double now_s = monotonic_s();
  std::string_view data(chunk, static_cast<std::size_t>(count));
  while (!data.empty()) {
    const std::size_t newline = data.find('\n');
    if (connection.discarding) {
      if (newline == std::string_view::npos) return true;
      connection.discarding = false;
      data.remove_prefix(newline + 1);
      continue;
    }
    const std::size_t take = newline == std::string_view::npos ? data.size() : newline;
    if (connection.buffer.size() + take > config_.max_message_bytes) {
      if (!send_line(connection, error_line(fmt::format("message exceeds {} bytes; skipped up to its newline",
                                                        config_.max_message_bytes)))) {
        return false;
      }
      connection.buffer.clear();
      connection.discarding = newline == std::string_view::npos;
      data.remove_prefix(newline == std::string_view::npos ? data.size() : newline + 1);
      continue;
    }
    connection.buffer.append(data.substr(0, take));
    if (newline == std::string_view::npos) return true;
    data.remove_prefix(newline + 1);
    std::string line = std::move(connection.buffer);
    connection.buffer.clear();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    connection.last_request_s = now_s;
    if (!send_line(connection, core_.handle_line(connection.client, line, now_s))) return false;
  }
  return true;
}

void DaemonServer::close_client(std::size_t index) {
  Connection& connection = *connections_[index];
  std::vector<std::string> failures;
  const std::vector<int> reset = core_.disconnect(connection.client, &failures);
  log(fmt::format("client pid {} uid {} disconnected{}", connection.peer.pid, connection.peer.uid,
                  reset.empty() ? "" : fmt::format("; reset gpus {}", fmt::join(reset, ", "))));
  for (const std::string& failure : failures) log(fmt::format("released the lease anyway: {}", failure));
  ::close(connection.fd);
  connections_.erase(connections_.begin() + static_cast<std::ptrdiff_t>(index));
}

}  // namespace kareus::runtime
