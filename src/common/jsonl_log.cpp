#include "kareus/common/jsonl_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus {
namespace {

// Whether `line` is one whole JSON value: the test that tells a record that only lost its
// newline from one cut short.
bool whole_json(std::string_view line) {
  return json_nesting_past(line, kMaxJsonDepth) == std::string_view::npos && nlohmann::json::accept(line);
}

std::string torn_message(std::string_view origin, int line_number, std::string_view line) {
  return fmt::format("{}:{}: a torn last line (a write cut short by a crash or a full disk), {} bytes: \"{}\"", origin,
                     line_number, line.size(), json_fields::short_text(line, 60));
}

int line_count(std::string_view text) {
  int lines = 0;
  for (const char c : text) lines += c == '\n';
  return lines;
}

}  // namespace

JsonlAppender::JsonlAppender(std::filesystem::path path, std::string what, const Warn& warn)
    : path_(std::move(path)), lock_(std::filesystem::path(path_.string() + ".lock"), what) {
  // Checked before opening: a FIFO or device here would block or never end.
  struct stat status {};
  if (::stat(path_.c_str(), &status) == 0 && !S_ISREG(status.st_mode)) {
    throw InputError(fmt::format("{}: cannot open the log: not a regular file", what));
  }
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot open the log: {}", what, std::strerror(errno)));
  try {
    char buffer[1 << 16];
    for (;;) {
      const ssize_t count = ::pread(fd_, buffer, sizeof buffer, static_cast<off_t>(existing_.size()));
      if (count < 0 && errno == EINTR) continue;
      if (count < 0) throw InputError(fmt::format("{}: cannot read the log: {}", what, std::strerror(errno)));
      if (count == 0) break;
      existing_.append(buffer, static_cast<std::size_t>(count));
      if (existing_.size() > kMaxInputFileBytes) {
        throw InputError(
            fmt::format("{}: larger than {} bytes, the limit for an input file", what, kMaxInputFileBytes));
      }
    }
    size_ = existing_.size();
    if (!existing_.empty() && existing_.back() != '\n') {
      const std::size_t start = existing_.rfind('\n') + 1;  // npos + 1 == 0
      const std::string_view tail = std::string_view(existing_).substr(start);
      if (whole_json(tail)) {
        append("");  // the record is whole: give it its newline
        existing_ += '\n';
      } else {
        if (warn) warn(torn_message(path_.string(), line_count(existing_) + 1, tail) + "; cut off");
        cut_to(start);
      }
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

JsonlAppender::~JsonlAppender() {
  if (dirty_) ::fsync(fd_);
  ::close(fd_);
}

void JsonlAppender::append(std::string_view line) {
  std::string whole(line);
  whole += '\n';
  for (std::size_t written = 0; written < whole.size();) {
    const ssize_t count = ::write(fd_, whole.data() + written, whole.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      const int code = count < 0 ? errno : EIO;
      // Whole lines or nothing: what part of this line reached the file goes again.
      const bool cut = ::ftruncate(fd_, static_cast<off_t>(size_)) == 0;
      throw Error(fmt::format("{}: cannot append a line: {}{}", path_.string(), std::strerror(code),
                              cut ? "" : " (and the partial line could not be cut off)"));
    }
    written += static_cast<std::size_t>(count);
  }
  size_ += whole.size();
  dirty_ = true;
}

void JsonlAppender::checkpoint() {
  if (!dirty_) return;
  if (::fsync(fd_) != 0) throw Error(fmt::format("{}: cannot fsync the log: {}", path_.string(), std::strerror(errno)));
  dirty_ = false;
}

void JsonlAppender::cut_to(std::size_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    throw Error(fmt::format("{}: cannot cut the log back to {} bytes: {}", path_.string(), size, std::strerror(errno)));
  }
  existing_.resize(std::min(size, existing_.size()));
  size_ = size;
  dirty_ = true;
}

void for_each_jsonl_line(std::string_view text, std::string_view origin,
                         const std::function<void(std::string_view line, int line_number)>& on_line,
                         const JsonlAppender::Warn& warn) {
  std::size_t begin = 0;
  for (int line_number = 1; begin < text.size(); ++line_number) {
    std::size_t end = text.find('\n', begin);
    const bool terminated = end != std::string_view::npos;
    if (!terminated) end = text.size();
    const std::string_view line = text.substr(begin, end - begin);
    if (!terminated && !whole_json(line)) {
      if (warn) warn(torn_message(origin, line_number, line) + "; skipped");
      return;
    }
    on_line(line, line_number);
    begin = end + 1;
  }
}

}  // namespace kareus
