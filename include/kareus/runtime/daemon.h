// kareus/runtime/daemon.h - kareusd, the privileged clock daemon, as a library.
//
// Locking GPU clocks needs root or CAP_SYS_ADMIN. kareusd runs with that privilege and lets
// allowed users (uids/gids in its JSON config, checked with SO_PEERCRED) lock and reset the
// SM clock (MHz) of the GPUs, read clocks and energy (mJ) over a Unix socket, one JSON request per
// line (daemon_protocol.h). A connection is a lease: a GPU locked by a client belongs to it until
// it resets or disconnects (or dies), and then the daemon resets it; shutdown resets every clock it
// changed. DaemonCore holds the logic (testable without sockets); DaemonServer adds the socket.
// tools/kareusd/main.cpp is the executable, tools/kareusd/kareusd.service its systemd unit.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/common/file_lock.h"
#include "kareus/common/poll_loop.h"
#include "kareus/runtime/clock_backend.h"
#include "kareus/runtime/daemon_protocol.h"

namespace kareus::runtime {

struct DaemonConfig {
  std::string socket_path = "/run/kareusd/kareusd.sock";
  std::string socket_group;  ///< group that owns the socket (mode 0660); empty: the daemon's group
  std::vector<uid_t> allowed_uids;
  std::vector<gid_t> allowed_gids;  ///< matched against the peer's primary and supplementary groups
  std::size_t max_message_bytes = 4096;
  double max_requests_per_second = 500;  ///< per client, >= 1; bursts of the same size are allowed
  std::size_t max_clients = 256;
  /// Connections one uid may hold at once, so that one allowed user cannot take every slot
  /// (a job opens one per rank on the machine: 8 on an 8-GPU node).
  std::size_t max_clients_per_user = 64;
  /// A client holding no GPU that sends no whole request for this long is disconnected (its
  /// slot freed); a client holding a GPU is never timed out (its connection is its lease).
  double idle_timeout_s = 60;
  std::string backend = "nvml";  ///< "nvml" or "fake" (tests: GPUs that only remember clocks)
  std::string nvml_library = "libnvidia-ml.so.1";
  int fake_gpu_count = 2;
  std::vector<int> fake_clocks_mhz = {1980, 1410, 1200, 1005, 810, 510};
};

/// Parses a config file's text; `origin` names it in messages. Throws InputError naming the
/// field ("kareusd.json: field 'max_message_bytes' must be an integer in [64, 1048576], found 3").
[[nodiscard]] DaemonConfig parse_daemon_config(std::string_view text, std::string_view origin);
[[nodiscard]] DaemonConfig read_daemon_config(const std::filesystem::path& path);

/// One backend per GPU index for `config` (NVML: every GPU NVML sees; fake: recorders).
[[nodiscard]] std::vector<std::unique_ptr<ClockBackend>> make_daemon_gpus(const DaemonConfig& config);

/// Who is on the other end of a connection (SO_PEERCRED).
struct PeerIdentity {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// Whether `peer` may use the daemon: its uid is allowed, or its primary gid, or a supplementary
/// group of its account (getgrouplist). Returns the refusal message, or nullopt if allowed.
[[nodiscard]] std::optional<std::string> check_peer(const PeerIdentity& peer, const DaemonConfig& config);

/// The daemon's logic: clients, leases, validation, rate limits. Not thread-safe (the server
/// calls it from one thread).
class DaemonCore {
 public:
  using ClientId = std::uint64_t;

  /// Queries each GPU's supported clocks once. Throws Error if a backend fails.
  DaemonCore(std::vector<std::unique_ptr<ClockBackend>> gpus, double max_requests_per_second);
  /// Resets every GPU a client still holds. Never throws.
  ~DaemonCore();
  DaemonCore(const DaemonCore&) = delete;
  DaemonCore& operator=(const DaemonCore&) = delete;

  ClientId connect(const PeerIdentity& peer);
  /// Handles one request line (no newline) at time `now_s` (seconds, monotonic) and returns the
  /// reply line (newline-terminated). Never throws: every failure is an {"ok": false} reply.
  [[nodiscard]] std::string handle_line(ClientId client, std::string_view line, double now_s);
  /// Forgets the client, releases every GPU it held and resets them. Returns the GPUs reset; a
  /// reset that throws still releases the GPU, and its message is added to `failures`.
  std::vector<int> disconnect(ClientId client, std::vector<std::string>* failures = nullptr);
  /// Resets every GPU any client holds (shutdown). Returns the GPUs reset.
  std::vector<int> reset_all();

  [[nodiscard]] int gpu_count() const { return static_cast<int>(gpus_.size()); }
  /// Whether `client` holds any GPU's lock.
  [[nodiscard]] bool holds_any(ClientId client) const;
  /// A new rate (a reloaded config); buckets above it are cut to it.
  void set_max_requests_per_second(double rate);
  /// The client holding `gpu`'s lock, if any.
  [[nodiscard]] std::optional<ClientId> holder(int gpu) const;
  /// The GPUs some client holds, ascending.
  [[nodiscard]] std::vector<int> held_gpus() const;
  /// Called with the GPUs held whenever that set changes; a GPU about to be locked is in it
  /// before NVML is asked, so that a crash never leaves a lock the record does not name. A
  /// record that throws refuses the lock.
  void set_lease_record(std::function<void(const std::vector<int>&)> record) { record_ = std::move(record); }
  /// Hands the record the GPUs held now and those whose reset failed.
  void record_locked();
  /// Resets `gpu` whoever holds it (a lock left by a previous daemon). Throws Error; a GPU whose
  /// reset failed counts as locked in the record (and shutdown tries it again) until one works.
  void reset_gpu(int gpu);

 private:
  struct Client {
    PeerIdentity peer;
    double tokens = 0;
    double last_refill_s = -1;
  };
  struct Gpu {
    std::unique_ptr<ClockBackend> backend;
    std::vector<int> supported_mhz;
    std::optional<ClientId> holder;
  };
  DaemonReply handle(ClientId client, std::string_view line, double now_s);

  std::vector<Gpu> gpus_;
  std::map<ClientId, Client> clients_;
  ClientId next_client_ = 1;
  double max_requests_per_second_;
  std::function<void(const std::vector<int>&)> record_;
  std::vector<int> stuck_;  ///< GPUs no client holds whose last reset failed (they may be locked)
};

/// Serves a DaemonCore on the config's Unix socket until stop().
class DaemonServer {
 public:
  using Log = std::function<void(std::string_view)>;

  /// Creates the socket (replacing a stale one), mode 0660, owned by config.socket_group, and
  /// holds SOCKET_PATH.lock while serving. The GPUs clients hold are recorded in
  /// SOCKET_PATH.leases; a daemon starting where a previous one died (SIGKILL, a crash) resets
  /// the GPUs that record names and logs each one, and one it cannot reset is logged as left
  /// locked and stays in the record. A socket folder any user may write is refused unless it is
  /// sticky (/tmp: then only a loud warning is logged, since another user could have taken the
  /// path first). Throws InputError for a bad path, an unknown group, or
  /// a path where a live daemon answers or that another daemon holds, and Error when the socket
  /// cannot be created. Replies a client does not read wait in memory (the daemon stops reading
  /// that client's requests while 64 KiB wait), so pipelined requests are all answered.
  DaemonServer(DaemonConfig config, std::vector<std::unique_ptr<ClockBackend>> gpus, Log log = {});
  /// Resets every clock still locked, closes and removes the socket.
  ~DaemonServer();
  DaemonServer(const DaemonServer&) = delete;
  DaemonServer& operator=(const DaemonServer&) = delete;

  /// Serves until stop() is called. Throws Error when poll fails.
  void run();
  /// Makes run() return; safe from any thread and from a signal handler.
  void stop() noexcept;
  /// Makes the serving loop take `config` (SIGHUP): the allow-lists and limits change at once,
  /// clients no longer allowed are disconnected (their clocks reset), leases stay; fields that
  /// need a restart (socket_path, socket_group, backend, nvml_library, fake_*) are kept and a
  /// changed one is logged. Safe from any thread.
  void reload(DaemonConfig config);

 private:
  struct Connection;
  void check_socket_folder() const;  ///< refuses (or warns about) a folder every user may write
  void reset_left_locked();          ///< from SOCKET_PATH.leases, and installs the record's writer
  void accept_client(double now_s);
  void apply_reload();
  bool read_client(Connection& connection);                         ///< false: close it
  bool send_line(Connection& connection, const std::string& line);  ///< false: close it
  bool flush(Connection& connection);                               ///< false: close it
  void close_client(std::size_t index);
  void log(std::string_view message) const;

  DaemonConfig config_;
  std::optional<FileLock> lock_;  ///< SOCKET_PATH.lock, held while serving
  DaemonCore core_;
  Log log_;
  int listen_fd_ = -1;
  PollLoop loop_;  ///< its wake pipe carries stop() and reload()
  std::mutex reload_mutex_;
  std::optional<DaemonConfig> pending_reload_;
  std::vector<std::unique_ptr<Connection>> connections_;
};

}  // namespace kareus::runtime
