#include "kareus/runtime/daemon.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"
#include "kareus/runtime/daemon_protocol.h"
#include "kareus/runtime/nvml_clock_backend.h"

namespace kareus::runtime {
namespace {

using nlohmann::json;
namespace jf = json_fields;

long long require_integer(const json& object, const char* key, long long minimum, long long maximum,
                          std::string_view origin) {
  const json& value = jf::require(object, key, origin);
  if (!value.is_number_integer() || value.get<long long>() < minimum || value.get<long long>() > maximum) {
    throw InputError(fmt::format("{}: field '{}' must be an integer in [{}, {}], found {}", origin, key, minimum,
                                 maximum, jf::excerpt(value)));
  }
  return value.get<long long>();
}

template <typename Id>
std::vector<Id> require_ids(const json& object, const char* key, std::string_view origin) {
  std::vector<Id> ids;
  auto found = object.find(key);
  if (found == object.end()) return ids;
  if (!found->is_array()) throw InputError(fmt::format("{}: field '{}' must be an array of integers", origin, key));
  for (const json& value : *found) {
    if (!value.is_number_integer() || value.get<long long>() < 0 || value.get<long long>() > 0xFFFFFFFELL) {
      throw InputError(fmt::format("{}: field '{}' must hold ids >= 0, found {}", origin, key, jf::excerpt(value)));
    }
    ids.push_back(static_cast<Id>(value.get<long long>()));
  }
  return ids;
}

/// "1980, 1410, ... 510" with at most a dozen values shown.
std::string list_clocks(const std::vector<int>& clocks) {
  if (clocks.size() <= 12) return fmt::format("{}", fmt::join(clocks, ", "));
  return fmt::format("{} values from {} down to {}", clocks.size(), clocks.front(), clocks.back());
}

DaemonReply failure(std::string message) {
  DaemonReply reply;
  reply.ok = false;
  reply.error = std::move(message);
  return reply;
}

}  // namespace

DaemonConfig parse_daemon_config(std::string_view text, std::string_view origin_view) {
  const std::string origin(origin_view);
  const json document = parse_json(text, origin);
  jf::reject_unknown(
      document,
      {"socket_path", "socket_group", "allowed_uids", "allowed_gids", "max_message_bytes", "max_requests_per_second",
       "max_clients", "idle_timeout_s", "backend", "nvml_library", "fake_gpu_count", "fake_clocks_mhz"},
      origin);
  DaemonConfig config;
  config.socket_path = jf::require_string(document, "socket_path", origin);
  if (document.contains("socket_group")) config.socket_group = jf::require_string(document, "socket_group", origin);
  config.allowed_uids = require_ids<uid_t>(document, "allowed_uids", origin);
  config.allowed_gids = require_ids<gid_t>(document, "allowed_gids", origin);
  if (config.allowed_uids.empty() && config.allowed_gids.empty()) {
    throw InputError(
        fmt::format("{}: allowed_uids and allowed_gids are both empty: nobody could use the daemon", origin));
  }
  if (document.contains("max_message_bytes")) {
    config.max_message_bytes =
        static_cast<std::size_t>(require_integer(document, "max_message_bytes", 64, 1 << 20, origin));
  }
  if (document.contains("max_requests_per_second")) {
    // The token bucket holds as many tokens as the rate: below one it could never grant a request.
    config.max_requests_per_second = jf::require_number(document, "max_requests_per_second", origin);
    if (!(config.max_requests_per_second >= 1 && config.max_requests_per_second <= 1e6)) {
      throw InputError(
          fmt::format("{}: field 'max_requests_per_second' must be in [1, 1000000] (below one request "
                      "per second no request would ever be allowed), found {}",
                      origin, config.max_requests_per_second));
    }
  }
  if (document.contains("idle_timeout_s")) {
    config.idle_timeout_s = jf::require_number(document, "idle_timeout_s", origin);
    if (!(config.idle_timeout_s >= 0.1 && config.idle_timeout_s <= 86400)) {
      throw InputError(
          fmt::format("{}: field 'idle_timeout_s' must be in [0.1, 86400] s, found {}", origin, config.idle_timeout_s));
    }
  }
  if (document.contains("max_clients")) {
    config.max_clients = static_cast<std::size_t>(require_integer(document, "max_clients", 1, 65536, origin));
  }
  if (document.contains("backend")) config.backend = jf::require_string(document, "backend", origin);
  if (config.backend != "nvml" && config.backend != "fake") {
    throw InputError(fmt::format("{}: field 'backend' must be \"nvml\" or \"fake\", found \"{}\"", origin,
                                 jf::short_text(config.backend)));
  }
  if (document.contains("nvml_library")) config.nvml_library = jf::require_string(document, "nvml_library", origin);
  if (document.contains("fake_gpu_count")) {
    config.fake_gpu_count = static_cast<int>(require_integer(document, "fake_gpu_count", 1, 64, origin));
  }
  if (auto clocks = document.find("fake_clocks_mhz"); clocks != document.end()) {
    config.fake_clocks_mhz.clear();
    if (!clocks->is_array() || clocks->empty()) {
      throw InputError(fmt::format("{}: field 'fake_clocks_mhz' must be a non-empty array", origin));
    }
    for (const json& clock : *clocks) {
      if (!clock.is_number_integer() || clock.get<long long>() <= 0 || clock.get<long long>() > 100000) {
        throw InputError(
            fmt::format("{}: fake_clocks_mhz must hold positive clocks, found {}", origin, jf::excerpt(clock)));
      }
      config.fake_clocks_mhz.push_back(clock.get<int>());
    }
  }
  return config;
}

DaemonConfig read_daemon_config(const std::filesystem::path& path) {
  return parse_daemon_config(read_text_file(path), path.string());
}

std::vector<std::unique_ptr<ClockBackend>> make_daemon_gpus(const DaemonConfig& config) {
  std::vector<std::unique_ptr<ClockBackend>> gpus;
  if (config.backend == "fake") {
    for (int gpu = 0; gpu < config.fake_gpu_count; ++gpu) {
      gpus.push_back(std::make_unique<RecorderClockBackend>(config.fake_clocks_mhz));
    }
    return gpus;
  }
  auto library = std::make_shared<nvml::NvmlLibrary>(config.nvml_library);
  const int count = library->device_count();
  for (int gpu = 0; gpu < count; ++gpu) gpus.push_back(std::make_unique<NvmlClockBackend>(library, gpu));
  return gpus;
}

std::optional<std::string> check_peer(const PeerIdentity& peer, const DaemonConfig& config) {
  const auto& uids = config.allowed_uids;
  const auto& gids = config.allowed_gids;
  if (std::find(uids.begin(), uids.end(), peer.uid) != uids.end()) return std::nullopt;
  if (std::find(gids.begin(), gids.end(), peer.gid) != gids.end()) return std::nullopt;
  // Supplementary groups of the peer's account.
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(peer.uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    int count = 64;
    std::vector<gid_t> groups(static_cast<std::size_t>(count));
    if (::getgrouplist(found->pw_name, peer.gid, groups.data(), &count) < 0) {
      groups.resize(static_cast<std::size_t>(count));
      (void)::getgrouplist(found->pw_name, peer.gid, groups.data(), &count);
    }
    groups.resize(static_cast<std::size_t>(std::max(count, 0)));
    for (gid_t group : groups) {
      if (std::find(gids.begin(), gids.end(), group) != gids.end()) return std::nullopt;
    }
  }
  return fmt::format(
      "uid {} (gid {}, pid {}) is not allowed to use kareusd: add it to allowed_uids or a group "
      "of it to allowed_gids in the daemon's config",
      peer.uid, peer.gid, peer.pid);
}

// --- DaemonCore --------------------------------------------------------------------------------

DaemonCore::DaemonCore(std::vector<std::unique_ptr<ClockBackend>> gpus, double max_requests_per_second)
    : max_requests_per_second_(max_requests_per_second) {
  for (auto& backend : gpus) {
    Gpu gpu;
    gpu.supported_mhz = backend->supported_clocks_mhz();
    gpu.backend = std::move(backend);
    gpus_.push_back(std::move(gpu));
  }
}

DaemonCore::~DaemonCore() { (void)reset_all(); }

DaemonCore::ClientId DaemonCore::connect(const PeerIdentity& peer) {
  const ClientId id = next_client_++;
  clients_[id] = Client{peer, max_requests_per_second_, -1};
  return id;
}

bool DaemonCore::holds_any(ClientId client) const {
  return std::any_of(gpus_.begin(), gpus_.end(), [&](const Gpu& gpu) { return gpu.holder == client; });
}

void DaemonCore::set_max_requests_per_second(double rate) {
  max_requests_per_second_ = rate;
  for (auto& [id, client] : clients_) client.tokens = std::min(client.tokens, rate);
}

std::vector<int> DaemonCore::held_gpus() const {
  std::vector<int> held;
  for (std::size_t index = 0; index < gpus_.size(); ++index) {
    if (gpus_[index].holder) held.push_back(static_cast<int>(index));
  }
  return held;
}

std::optional<DaemonCore::ClientId> DaemonCore::holder(int gpu) const {
  if (gpu < 0 || gpu >= gpu_count()) return std::nullopt;
  return gpus_[static_cast<std::size_t>(gpu)].holder;
}

std::string DaemonCore::handle_line(ClientId client, std::string_view line, double now_s) {
  DaemonReply reply;
  try {
    reply = handle(client, line, now_s);
  } catch (const std::exception& error) {
    reply = failure(error.what());
  }
  return format_daemon_reply(reply);
}

DaemonReply DaemonCore::handle(ClientId client_id, std::string_view line, double now_s) {
  auto found = clients_.find(client_id);
  if (found == clients_.end()) return failure("unknown client");
  Client& client = found->second;
  // Token bucket: max_requests_per_second per second, bursts up to the same number.
  if (client.last_refill_s >= 0) {
    client.tokens =
        std::min(max_requests_per_second_, client.tokens + (now_s - client.last_refill_s) * max_requests_per_second_);
  }
  client.last_refill_s = now_s;
  if (client.tokens < 1) {
    return failure(fmt::format("rate limit: at most {} requests per second per client", max_requests_per_second_));
  }
  client.tokens -= 1;

  DaemonRequest request;
  try {
    request = parse_daemon_request(line);
  } catch (const InputError& error) {
    return failure(error.what());
  }
  DaemonReply reply;
  reply.id = request.id;
  if (request.gpu >= gpu_count()) {
    reply.ok = false;
    reply.error = fmt::format("gpu {} does not exist: this machine has {} GPUs (0..{})", request.gpu, gpu_count(),
                              gpu_count() - 1);
    return reply;
  }
  Gpu& gpu = gpus_[static_cast<std::size_t>(request.gpu)];
  const auto refuse = [&](std::string message) {
    reply.ok = false;
    reply.error = std::move(message);
    return reply;
  };
  const auto held_by_other = [&] { return gpu.holder && *gpu.holder != client_id; };
  const auto holder_text = [&] {
    const auto other = clients_.find(*gpu.holder);
    return other == clients_.end()
               ? std::string("another client")
               : fmt::format("another client (pid {}, uid {})", other->second.peer.pid, other->second.peer.uid);
  };
  try {
    switch (request.op) {
      case DaemonOp::kSet: {
        if (std::find(gpu.supported_mhz.begin(), gpu.supported_mhz.end(), request.freq_mhz) ==
            gpu.supported_mhz.end()) {
          return refuse(fmt::format("gpu {} does not support {} MHz (supported: {})", request.gpu, request.freq_mhz,
                                    list_clocks(gpu.supported_mhz)));
        }
        if (held_by_other()) return refuse(fmt::format("gpu {} is locked by {}", request.gpu, holder_text()));
        if (!gpu.holder && record_) {
          // Recorded before NVML is asked: a crash in between must not leave an unrecorded lock.
          gpu.holder = client_id;
          try {
            record_locked();
          } catch (...) {
            gpu.holder.reset();
            throw;
          }
        }
        gpu.backend->set_locked_clock(request.freq_mhz);
        gpu.holder = client_id;
        reply.freq_mhz = gpu.backend->read_clock_mhz();  // the clock it runs: one request per change
        break;
      }
      case DaemonOp::kReset: {
        if (held_by_other()) return refuse(fmt::format("gpu {} is locked by {}", request.gpu, holder_text()));
        if (gpu.holder) {
          reset_gpu(request.gpu);
          gpu.holder.reset();
          record_locked();
        }
        break;
      }
      case DaemonOp::kGet:
        reply.freq_mhz = gpu.backend->read_clock_mhz();
        break;
      case DaemonOp::kSupported:
        reply.clocks_mhz = gpu.supported_mhz;
        break;
      case DaemonOp::kEnergy: {
        reply.energy_mj = gpu.backend->read_energy_mj();
        if (!reply.energy_mj) return refuse(fmt::format("gpu {} has no energy counter", request.gpu));
        break;
      }
    }
  } catch (const std::exception& error) {
    return refuse(fmt::format("gpu {}: {}", request.gpu, error.what()));
  }
  return reply;
}

std::vector<int> DaemonCore::disconnect(ClientId client, std::vector<std::string>* failures) {
  std::vector<int> reset;
  bool released = false;
  for (std::size_t index = 0; index < gpus_.size(); ++index) {
    if (gpus_[index].holder != client) continue;
    // The lease goes whatever the reset does: a dead client must not lock the GPU forever.
    gpus_[index].holder.reset();
    released = true;
    try {
      reset_gpu(static_cast<int>(index));
      reset.push_back(static_cast<int>(index));
    } catch (const std::exception& error) {
      if (failures) failures->push_back(fmt::format("gpu {}: reset failed: {}", index, error.what()));
    } catch (...) {
      if (failures) failures->push_back(fmt::format("gpu {}: reset failed", index));
    }
  }
  clients_.erase(client);
  if (released) {
    try {
      record_locked();
    } catch (const std::exception& error) {
      if (failures) failures->push_back(fmt::format("the lease record was not updated: {}", error.what()));
    }
  }
  return reset;
}

std::vector<int> DaemonCore::reset_all() {
  std::vector<int> reset;
  bool released = !stuck_.empty();
  for (std::size_t index = 0; index < gpus_.size(); ++index) {
    const int gpu = static_cast<int>(index);
    const bool stuck = std::find(stuck_.begin(), stuck_.end(), gpu) != stuck_.end();
    if (!gpus_[index].holder && !stuck) continue;
    gpus_[index].holder.reset();
    released = true;
    try {
      reset_gpu(gpu);
      reset.push_back(gpu);
    } catch (...) {
      // Shutdown must go on for the other GPUs; this one stays in the record.
    }
  }
  if (released) {
    try {
      record_locked();
    } catch (...) {
      // The record keeps naming these GPUs; the next daemon resets them again, harmlessly.
    }
  }
  return reset;
}

void DaemonCore::reset_gpu(int gpu) {
  if (gpu < 0 || gpu >= gpu_count()) throw Error(fmt::format("gpu {} does not exist here ({} GPUs)", gpu, gpu_count()));
  const auto stuck = std::find(stuck_.begin(), stuck_.end(), gpu);
  try {
    gpus_[static_cast<std::size_t>(gpu)].backend->reset();
  } catch (...) {
    if (stuck == stuck_.end()) stuck_.push_back(gpu);
    throw;
  }
  if (stuck != stuck_.end()) stuck_.erase(stuck);
}

void DaemonCore::record_locked() {
  if (!record_) return;
  std::vector<int> locked = held_gpus();
  for (int gpu : stuck_) {
    if (std::find(locked.begin(), locked.end(), gpu) == locked.end()) locked.push_back(gpu);
  }
  std::sort(locked.begin(), locked.end());
  record_(locked);
}

}  // namespace kareus::runtime
