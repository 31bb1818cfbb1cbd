// kareus/common/file_io.h - whole-file reads and crash-safe writes.
//
// Writes go to a temporary beside PATH (PATH.<pid>-<n>.tmp, temporary_beside) and are
// renamed over PATH only when complete, so a failed or killed run never leaves half a file that
// looks finished.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace kareus {

/// The largest input file read_text_file reads (docs/limits.md): 1 GiB.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{1} << 30;

/// Reads a whole file. Throws InputError naming the path if it cannot be read, is not a regular
/// file (a directory, FIFO or device is refused before it is opened, so nothing blocks) or is
/// larger than kMaxInputFileBytes.
std::string read_text_file(const std::filesystem::path& path);

/// The deepest nesting of arrays and objects any JSON input may have (docs/limits.md). Deeper
/// documents are refused before parsing, so nothing downstream recurses without bound.
inline constexpr int kMaxJsonDepth = 64;

/// The byte offset of the first bracket in `text` that opens more than `max_depth` arrays or
/// objects inside one another (brackets inside strings do not count), or npos when none does.
std::size_t json_nesting_past(std::string_view text, int max_depth);

/// Throws InputError "<origin>:LINE:COLUMN: JSON nested deeper than 64 levels" if `text` opens more
/// than kMaxJsonDepth arrays or objects inside one another (brackets inside strings do not count).
void check_json_depth(std::string_view text, std::string_view origin);

/// Parses a JSON file. Throws InputError naming the path, line and column on bad JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

/// Parses JSON text; `origin` names where it came from in error messages. Throws InputError on
/// bad JSON and on nesting deeper than kMaxJsonDepth.
nlohmann::json parse_json(std::string_view text, std::string_view origin);

/// A fresh temporary name beside `path`: PATH.<pid>-<n>.tmp, unique to this process and call.
[[nodiscard]] std::filesystem::path temporary_beside(const std::filesystem::path& path);

/// Removes the temporaries beside `path` (PATH.<pid>-<n>.tmp, files or folders) whose process no
/// longer exists, left by a run that was killed; returns how many. Those of live processes stay.
int remove_dead_temporaries(const std::filesystem::path& path);

/// Writes `content` to a temporary file beside PATH (PATH.<pid>-<n>.tmp, unique to this process
/// and call, so two processes writing PATH never share one; created with O_EXCL | O_NOFOLLOW, so
/// it never writes through a symlink or into an existing file), flushes it to disk, and renames it
/// to PATH. Removes dead processes' temporaries of PATH first. Under a folder a DeferredSync
/// covers, neither: the folder is this process's own and its owner syncs it whole. Throws Error
/// on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

/// While it lives, files write_file_atomic() writes under `folder` (a fresh folder of this
/// process's: OutputFolder's staging) are not flushed to disk one by one, and no dead temporaries
/// are looked for there: the owner calls sync_file_system() once before it makes the folder
/// visible. A solve's 363 plans each flushed took 2.8 s here (a disk cache flush per fsync, ~8 ms
/// each, batched or not) and a directory scan each.
class DeferredSync {
 public:
  explicit DeferredSync(std::filesystem::path folder);
  ~DeferredSync();
  DeferredSync(const DeferredSync&) = delete;
  DeferredSync& operator=(const DeferredSync&) = delete;

 private:
  std::filesystem::path folder_;
};

/// Flushes the file system holding `path` to disk (syncfs(2): one flush for every file written
/// there, including other processes' pending writes). Throws Error naming the path on failure.
void sync_file_system(const std::filesystem::path& path);

/// Checks, before any work, that `path` can be written as a file: it is not a directory and its
/// folder exists and is writable. Throws InputError naming `flag` and the path otherwise.
void check_writable_file(const std::filesystem::path& path, std::string_view flag);

/// Creates `dir` (and parents) and checks it is writable. Throws InputError naming it otherwise.
void ensure_writable_directory(const std::filesystem::path& dir, std::string_view flag);

}  // namespace kareus
