// kareus/common/jsonl_log.h - the one append-only JSONL writer of kareus's measurement logs.
//
// The search's evaluation log (search/evaluation_log.h) and the device measurement log
// (device/measurement_log.h) both append one JSON object per line through JsonlAppender:
// - one writer per log: it holds the advisory lock PATH.lock (common/file_lock.h) while open;
// - whole lines: each line goes out in one write(); a write that fails part way (a full disk,
//   ENOSPC or EFBIG) is cut back to the last whole line before the error is thrown, so no
//   fragment is ever glued to the next record;
// - a torn last line found when the log is opened (a crash mid-write, or a writer without this
//   class) is reported through the warning callback and cut off; a last line that is whole
//   JSON and only lacks its newline gets it;
// - fsync at checkpoints (checkpoint(), and when the appender is destroyed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "kareus/common/file_lock.h"

namespace kareus {

class JsonlAppender {
 public:
  using Warn = std::function<void(const std::string& message)>;

  /// Opens `path` for appending (creating it), holding PATH.lock; `what` names it in messages
  /// ("--log out/fwd_mlp.jsonl"). Throws InputError if another process holds the lock, if the
  /// path is not a regular file or the file is larger than kMaxInputFileBytes, Error on I/O failure.
  JsonlAppender(std::filesystem::path path, std::string what, const Warn& warn = {});
  /// Checkpoints and closes. Never throws.
  ~JsonlAppender();
  JsonlAppender(const JsonlAppender&) = delete;
  JsonlAppender& operator=(const JsonlAppender&) = delete;

  /// The whole lines the file held when opened (after a torn tail was cut).
  [[nodiscard]] const std::string& existing() const { return existing_; }
  /// Appends `line` (one JSON object, no newline) and a newline, whole or not at all. Throws
  /// Error naming the file when the write fails (the file is then as it was before the call).
  void append(std::string_view line);
  /// Flushes what was appended to the disk (fsync). Throws Error on failure.
  void checkpoint();
  /// Cuts the file back to its first `size` bytes of existing(), e.g. a last line the caller
  /// refuses to keep. Throws Error on failure.
  void cut_to(std::size_t size);

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  FileLock lock_;
  int fd_ = -1;
  std::string existing_;
  std::uint64_t size_ = 0;  ///< bytes of whole lines in the file
  bool dirty_ = false;      ///< appended since the last checkpoint
};

/// Calls `on_line(line, line_number)` for each line of JSONL `text` (1-based numbers, without
/// the newline). A last line without its newline that is not whole JSON (a torn write) is
/// reported through `warn` as "<origin>:N: ..." and skipped.
void for_each_jsonl_line(std::string_view text, std::string_view origin,
                         const std::function<void(std::string_view line, int line_number)>& on_line,
                         const JsonlAppender::Warn& warn = {});

}  // namespace kareus
