#include "kareus/search/evaluation_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::search {
namespace {

constexpr std::string_view kSchema = "kareus.evaluations/1";

nlohmann::ordered_json header_json(const LogHeader& header) {
  return {{"schema", kSchema},
          {"workload", nlohmann::ordered_json::parse(header.workload_json.empty() ? "{}" : header.workload_json)},
          {"partition", header.partition_key},
          {"nanobatch", header.nanobatch},
          {"device", {{"kind", header.device_kind}, {"gpu", header.gpu}}},
          {"seed", header.seed}};
}

// Writes all of `text` with as few write() calls as the kernel allows, then fsyncs.
void write_durably(int fd, std::string_view text, const std::filesystem::path& path) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("cannot append to evaluation log {}: {}", path.string(), std::strerror(errno)));
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  if (::fsync(fd) != 0) {
    throw Error(fmt::format("cannot fsync evaluation log {}: {}", path.string(), std::strerror(errno)));
  }
}

void sync_directory(const std::filesystem::path& path) {
  std::filesystem::path directory = path.parent_path();
  if (directory.empty()) directory = ".";
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the file itself is already synced
  ::fsync(fd);
  ::close(fd);
}

std::string describe(const nlohmann::json& value) {
  if (!value.is_string()) return json_fields::excerpt(value);
  const std::string excerpt = json_fields::excerpt(value);  // "text" or "text...
  const bool cut = excerpt.back() != '"';
  return fmt::format("'{}'{}", excerpt.substr(1, excerpt.size() - (cut ? 4 : 2)), cut ? "..." : "");
}

// Throws InputError naming the first header field that differs from `expected`.
void check_header(const nlohmann::json& found, const nlohmann::ordered_json& expected, const std::string& origin) {
  if (!found.is_object()) throw InputError(fmt::format("{}: the header must be a JSON object", origin));
  const std::string schema = json_fields::require_string(found, "schema", origin);
  if (schema != kSchema) {
    throw InputError(fmt::format("{}: schema '{}' is not an evaluation log (expected '{}')", origin, schema, kSchema));
  }
  const auto compare = [&](const nlohmann::json& actual, const nlohmann::ordered_json& ordered,
                           std::string_view field) {
    const nlohmann::json wanted = nlohmann::json::parse(ordered.dump());
    if (actual != wanted) {
      throw InputError(fmt::format("{}: the log is for {} {}, not {} (use another --log file)", origin, field,
                                   describe(actual), describe(wanted)));
    }
  };
  compare(json_fields::require(found, "workload", origin), expected["workload"], "workload");
  compare(json_fields::require(found, "partition", origin), expected["partition"], "partition");
  compare(json_fields::require(found, "nanobatch", origin), expected["nanobatch"], "nanobatch");
  const nlohmann::json& device = json_fields::require(found, "device", origin);
  compare(json_fields::require(device, "kind", origin), expected["device"]["kind"], "device kind");
  compare(json_fields::require(device, "gpu", origin), expected["device"]["gpu"], "gpu");
  compare(json_fields::require(found, "seed", origin), expected["seed"], "seed");
}

Evaluation parse_evaluation(const nlohmann::json& line, const std::string& origin) {
  if (!line.is_object()) throw InputError(fmt::format("{}: a measurement must be a JSON object", origin));
  const nlohmann::json& config = json_fields::require(line, "config", origin);
  Evaluation evaluation;
  const nlohmann::json& freq = json_fields::require(config, "freq_mhz", origin);
  const nlohmann::json& ctas = json_fields::require(config, "ctas", origin);
  if (!freq.is_number_integer() || !ctas.is_number_integer()) {
    throw InputError(fmt::format("{}: config freq_mhz and ctas must be integers", origin));
  }
  // Past int range get<int> would wrap silently.
  if (freq.get<long long>() < 1 || freq.get<long long>() > 100000 || ctas.get<long long>() < 0 ||
      ctas.get<long long>() > 65536) {
    throw InputError(fmt::format("{}: config freq_mhz {} must be in [1, 100000] and ctas {} in [0, 65536]", origin,
                                 freq.get<long long>(), ctas.get<long long>()));
  }
  evaluation.config.freq_mhz = freq.get<int>();
  evaluation.config.ctas = ctas.get<int>();
  evaluation.config.slot = json_fields::require_string(config, "slot", origin);
  evaluation.time_s = json_fields::require_positive(line, "time_s", origin);
  evaluation.energy_j = json_fields::require_positive(line, "energy_j", origin);
  return evaluation;
}

}  // namespace

EvaluationLog::EvaluationLog(std::filesystem::path path, const LogHeader& header, const WarningCallback& warn)
    : path_(std::move(path)) {
  const nlohmann::ordered_json expected = header_json(header);
  std::filesystem::path lock_path = path_;
  lock_path += ".lock";
  lock_.emplace(lock_path, "--log " + path_.string());
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw InputError(fmt::format("--log {}: cannot open the evaluation log: {}", path_.string(), std::strerror(errno)));
  }
  try {
    std::string content;
    char buffer[1 << 16];
    for (;;) {
      const ssize_t count = ::pread(fd_, buffer, sizeof buffer, static_cast<off_t>(content.size()));
      if (count < 0) {
        if (errno == EINTR) continue;
        throw InputError(
            fmt::format("--log {}: cannot read the evaluation log: {}", path_.string(), std::strerror(errno)));
      }
      if (count == 0) break;
      content.append(buffer, static_cast<std::size_t>(count));
    }

    // Split into lines; remember where each starts so a torn last line can be cut off.
    std::vector<std::pair<std::size_t, std::string_view>> lines;
    for (std::size_t start = 0; start < content.size();) {
      const std::size_t end = content.find('\n', start);
      const std::size_t stop = end == std::string::npos ? content.size() : end;
      lines.emplace_back(start, std::string_view(content).substr(start, stop - start));
      start = stop + 1;
    }
    const bool terminated = content.empty() || content.back() == '\n';
    std::size_t keep = content.size();  // bytes of the file that stay
    for (std::size_t number = 0; number < lines.size(); ++number) {
      const auto [offset, text] = lines[number];
      const std::string origin = fmt::format("{}:{}", path_.string(), number + 1);
      const bool last = number + 1 == lines.size();
      try {
        check_json_depth(text, origin);
        const nlohmann::json parsed = nlohmann::json::parse(text);
        if (number == 0) {
          check_header(parsed, expected, origin);
        } else {
          recorded_.push_back(parse_evaluation(parsed, origin));
        }
      } catch (const nlohmann::json::exception& error) {
        if (!last) throw InputError(fmt::format("{}: corrupt line in the evaluation log: {}", origin, error.what()));
        if (warn) {
          warn(fmt::format("{}: dropping a corrupt last line (a write cut short by a crash?): \"{}\"", origin,
                           text.substr(0, 80)));
        }
        keep = offset;
      } catch (const InputError&) {
        if (!last || number == 0) throw;
        if (warn) warn(fmt::format("{}: dropping a malformed last line: \"{}\"", origin, text.substr(0, 80)));
        keep = offset;
      }
    }
    if (keep < content.size()) {
      if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) {
        throw Error(fmt::format("cannot truncate evaluation log {}: {}", path_.string(), std::strerror(errno)));
      }
    } else if (!terminated) {
      write_durably(fd_, "\n", path_);  // a complete last line that lost only its newline
    }
    if (keep == 0) {
      write_durably(fd_, expected.dump() + "\n", path_);
      sync_directory(path_);
    }
    for (std::size_t index = 0; index < recorded_.size(); ++index) {
      for (std::size_t earlier = 0; earlier < index; ++earlier) {
        if (recorded_[earlier].config == recorded_[index].config) {
          throw InputError(fmt::format("{}: config {} MHz, {} CTAs, slot '{}' is recorded twice", path_.string(),
                                       recorded_[index].config.freq_mhz, recorded_[index].config.ctas,
                                       recorded_[index].config.slot));
        }
      }
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

EvaluationLog::~EvaluationLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<Evaluation> EvaluationLog::find(const partition::KnobConfig& config) const {
  for (const Evaluation& evaluation : recorded_) {
    if (evaluation.config == config) return evaluation;
  }
  return std::nullopt;
}

void EvaluationLog::append(const Evaluation& evaluation) {
  const nlohmann::ordered_json line = {
      {"config",
       {{"freq_mhz", evaluation.config.freq_mhz}, {"ctas", evaluation.config.ctas}, {"slot", evaluation.config.slot}}},
      {"time_s", evaluation.time_s},
      {"energy_j", evaluation.energy_j}};
  write_durably(fd_, line.dump() + "\n", path_);
}

}  // namespace kareus::search
