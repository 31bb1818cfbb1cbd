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

}  // namespace

FileLock::FileLock(std::filesystem::path lock_path, std::string what) : path_(std::move(lock_path)) {
  // Retry when the file we locked was removed by a holder that released it in the meantime:
  // the lock must be on the file that is at the path now.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw InputError(
          fmt::format("{}: cannot create the lock file {}: {}", what, path_.string(), std::strerror(errno)));
    }
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
    if (::fstat(fd, &locked) == 0 && ::stat(path_.c_str(), &current) == 0 && locked.st_ino == current.st_ino &&
        locked.st_dev == current.st_dev) {
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
