#include "kareus/common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus {
namespace {

// The pid the holder wrote into the lock file, or "unknown" while it has not written it yet.
std::string read_holder(int fd) {
  char buffer[32] = {};
  const ssize_t count = ::pread(fd, buffer, sizeof buffer - 1, 0);
  std::string_view text(buffer, count > 0 ? static_cast<std::size_t>(count) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return "unknown";
  return std::string(text);
}

// A lock file another kareus process left: empty (not written yet) or a pid and a newline. Anything
// else at the path is someone's file, which a lock must never truncate or remove.
bool holds_a_pid_or_nothing(int fd, const struct stat& status) {
  if (status.st_size == 0) return true;
  return status.st_size <= 21 && read_holder(fd) != "unknown";
}

// Opens the lock file: created here (exclusively), or an existing lock file; never through a
// symlink. Returns -1 when the path vanished in between (the caller retries).
int open_lock_file(const std::filesystem::path& path, const std::string& what, bool& created) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return -1;
    if (errno == ELOOP) {
      throw InputError(fmt::format("{}: the lock file {} is a symbolic link; a lock never follows one (remove it)",
                                   what, path.string()));
    }
    throw InputError(fmt::format("{}: cannot create the lock file {}: {}", what, path.string(), std::strerror(errno)));
  }
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || (!created && !holds_a_pid_or_nothing(fd, status))) {
    ::close(fd);
    throw InputError(
        fmt::format("{}: {} exists and is not a kareus lock file (a pid); it is left alone: remove it "
                    "or choose another path",
                    what, path.string()));
  }
  return fd;
}

}  // namespace

FileLock::FileLock(std::filesystem::path lock_path, std::string what) : path_(std::move(lock_path)) {
  // Retry when the file we locked was removed by a holder that released it in the meantime:
  // the lock must be on the file that is at the path now.
  for (int attempt = 0; attempt < 100; ++attempt) {
    bool created = false;
    const int fd = open_lock_file(path_, what, created);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int code = errno;
      const std::string holder = read_holder(fd);
      ::close(fd);
      if (code == EWOULDBLOCK) {
        throw InputError(
            fmt::format("{}: in use by another kareus process (pid {}, lock {})", what, holder, path_.string()));
      }
      throw InputError(fmt::format("{}: cannot lock {}: {}", what, path_.string(), std::strerror(code)));
    }
    struct stat locked {};
    struct stat current {};
    if (::fstat(fd, &locked) == 0 && ::lstat(path_.c_str(), &current) == 0 && locked.st_ino == current.st_ino &&
        locked.st_dev == current.st_dev) {
      // Only a lock file (checked above) is truncated: its old pid gives way to ours.
      const std::string pid = fmt::format("{}\n", ::getpid());
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        const int code = errno;
        ::close(fd);
        throw InputError(
            fmt::format("{}: cannot write the lock file {}: {}", what, path_.string(), std::strerror(code)));
      }
      fd_ = fd;
      return;
    }
    ::close(fd);
  }
  throw InputError(fmt::format("{}: cannot lock {}: it keeps being replaced", what, path_.string()));
}

FileLock::~FileLock() {
  // Unlinked while still held, so whoever locks next creates (and locks) a fresh file.
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace kareus
