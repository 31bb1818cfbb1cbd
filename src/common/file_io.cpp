#include "kareus/common/file_io.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/json_fields.h"

namespace kareus {

namespace {

// What a non-regular file is, for the message that refuses it.
std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

void check_regular(const struct stat& status, const std::filesystem::path& path) {
  if (S_ISDIR(status.st_mode)) throw InputError(fmt::format("cannot read {}: it is a directory", path.string()));
  if (!S_ISREG(status.st_mode)) {
    throw InputError(
        fmt::format("cannot read {}: it is {}, expected a regular file", path.string(), file_kind(status.st_mode)));
  }
  if (static_cast<std::uintmax_t>(status.st_size) > kMaxInputFileBytes) {
    throw InputError(
        fmt::format("{}: larger than {} bytes, the limit for an input file", path.string(), kMaxInputFileBytes));
  }
}

}  // namespace

std::string read_text_file(const std::filesystem::path& path) {
  // Checked before it is opened (a FIFO would block the open, a device could be endless), and
  // again on the open file, which is what is read, in case the path changed in between.
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    throw InputError(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
  }
  check_regular(status, path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
  std::string content;
  try {
    if (::fstat(fd, &status) != 0) throw InputError(fmt::format("cannot read {}", path.string()));
    check_regular(status, path);
    // Read up to the limit, so a file still growing ends in an error, not OOM.
    content.reserve(static_cast<std::size_t>(status.st_size));
    char chunk[1 << 16];
    for (;;) {
      const ssize_t count = ::read(fd, chunk, sizeof chunk);
      if (count < 0 && errno == EINTR) continue;
      if (count < 0) throw InputError(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
      if (count == 0) break;
      content.append(chunk, static_cast<std::size_t>(count));
      if (content.size() > kMaxInputFileBytes) {
        throw InputError(
            fmt::format("{}: larger than {} bytes, the limit for an input file", path.string(), kMaxInputFileBytes));
      }
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return content;
}

namespace {

// "LINE:COLUMN" (1-based) of byte `offset` in `text`.
std::string line_column(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t pos = 0; pos < offset && pos < text.size(); ++pos) {
    if (text[pos] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("{}:{}", line, column);
}

}  // namespace

std::size_t json_nesting_past(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return pos;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

void check_json_depth(std::string_view text, std::string_view origin) {
  if (const std::size_t pos = json_nesting_past(text, kMaxJsonDepth); pos != std::string_view::npos) {
    throw InputError(
        fmt::format("{}:{}: JSON nested deeper than {} levels", origin, line_column(text, pos), kMaxJsonDepth));
  }
}

nlohmann::json parse_json(std::string_view text, std::string_view origin) {
  if (text.size() > kMaxJsonDocumentBytes) {
    throw InputError(fmt::format(
        "{}: a JSON document of {} bytes is larger than the {} MiB kareus parses at once (it would take about 20 "
        "times that in memory; docs/limits.md)",
        origin, text.size(), kMaxJsonDocumentBytes >> 20));
  }
  check_json_depth(text, origin);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    // nlohmann reports a 1-based byte offset; turn it into line:column for the user.
    throw InputError(fmt::format("{}:{}: invalid JSON ({})", origin,
                                 line_column(text, error.byte > 0 ? error.byte - 1 : 0), error.what()));
  } catch (const nlohmann::json::exception& error) {
    // out_of_range: a number too large for a double (1e999); the message quotes it.
    throw InputError(fmt::format("{}: invalid JSON ({})", origin, json_fields::short_text(error.what(), 200)));
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json(read_text_file(path), path.string());
}

std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  static std::atomic<unsigned long> counter{0};
  std::filesystem::path temporary = path;
  temporary += fmt::format(".{}-{}.tmp", ::getpid(), counter.fetch_add(1));
  return temporary;
}

int remove_dead_temporaries(const std::filesystem::path& path) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  const std::string prefix = path.filename().string() + ".";
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(".tmp")) continue;
    // NAME.<pid>-<n>.tmp: the pid and the counter, digits only.
    const std::string_view middle = std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - 4);
    const std::size_t dash = middle.find('-');
    const auto digits = [](std::string_view text, std::size_t most) {
      return !text.empty() && text.size() <= most && text.find_first_not_of("0123456789") == std::string_view::npos;
    };
    if (dash == std::string_view::npos || !digits(middle.substr(0, dash), 9) || !digits(middle.substr(dash + 1), 19)) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(std::string(middle.substr(0, dash))));
    // Only a process that no longer exists (ESRCH) gives its temporaries up; EPERM means alive.
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    if (std::filesystem::remove_all(entry.path(), ignored) > 0) ++removed;
  }
  return removed;
}

namespace {

// The folders DeferredSync objects cover now; few, so a list.
std::mutex deferred_mutex;
std::vector<std::filesystem::path> deferred_folders;

bool sync_deferred(const std::filesystem::path& path) {
  const std::filesystem::path absolute = std::filesystem::absolute(path).lexically_normal();
  const std::lock_guard lock(deferred_mutex);
  return std::any_of(deferred_folders.begin(), deferred_folders.end(), [&](const std::filesystem::path& folder) {
    return std::mismatch(folder.begin(), folder.end(), absolute.begin(), absolute.end()).first == folder.end();
  });
}

}  // namespace

DeferredSync::DeferredSync(std::filesystem::path folder)
    : folder_(std::filesystem::absolute(folder).lexically_normal()) {
  const std::lock_guard lock(deferred_mutex);
  deferred_folders.push_back(folder_);
}

DeferredSync::~DeferredSync() {
  const std::lock_guard lock(deferred_mutex);
  deferred_folders.erase(std::find(deferred_folders.begin(), deferred_folders.end(), folder_));
}

void sync_file_system(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::syncfs(fd) != 0) {
    const int code = errno;
    if (fd >= 0) ::close(fd);
    throw Error(fmt::format("cannot flush {} to disk: {}", path.string(), std::strerror(code)));
  }
  ::close(fd);
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  // A name no other process (pid) and no other call of this one (counter) uses, created
  // exclusively and never through a symlink: concurrent writers of one PATH each rename a
  // complete file of their own, and no existing file is ever written into.
  const bool deferred = sync_deferred(path);
  if (!deferred) remove_dead_temporaries(path);
  const std::filesystem::path temporary = temporary_beside(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  std::FILE* file = fd < 0 ? nullptr : ::fdopen(fd, "wb");
  if (file == nullptr) {
    const int code = errno;
    if (fd >= 0) ::close(fd);
    throw Error(fmt::format("cannot write {}: {}", temporary.string(), std::strerror(code)));
  }
  const bool written = std::fwrite(content.data(), 1, content.size(), file) == content.size() &&
                       std::fflush(file) == 0 && (deferred || ::fsync(fileno(file)) == 0);
  const bool closed = std::fclose(file) == 0;
  std::error_code error;
  if (!written || !closed) {
    std::filesystem::remove(temporary, error);
    throw Error(fmt::format("cannot write {}", temporary.string()));
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    throw Error(fmt::format("cannot rename {} to {}", temporary.string(), path.string()));
  }
}

void check_writable_file(const std::filesystem::path& path, std::string_view flag) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw InputError(fmt::format("{} {}: is a directory, expected a file path", flag, path.string()));
  }
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir, error)) {
    throw InputError(fmt::format("{} {}: the folder {} does not exist", flag, path.string(), dir.string()));
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw InputError(fmt::format("{} {}: the folder {} is not writable", flag, path.string(), dir.string()));
  }
}

void ensure_writable_directory(const std::filesystem::path& dir, std::string_view flag) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    throw InputError(fmt::format("{} {}: cannot create directory ({})", flag, dir.string(),
                                 error ? error.message() : "not a directory"));
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw InputError(fmt::format("{} {}: directory is not writable", flag, dir.string()));
  }
}

}  // namespace kareus
