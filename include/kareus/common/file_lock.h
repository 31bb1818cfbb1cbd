// kareus/common/file_lock.h - an advisory lock that keeps two kareus processes off one output.
//
// `kareus search --log FILE` holds FILE.lock for the run and every command writing `--out DIR`
// holds DIR.lock until DIR is replaced (common/output_folder.h). The lock is flock(2) on the lock file, which
// records the holder's pid; a second process is refused at once with an InputError naming the
// locked path and that pid. The kernel drops the lock when its holder dies, so a crash never
// leaves a lock behind (the file may stay; it is reused). The lock file is never opened through a
// symlink, and an existing file that does not hold a pid (someone's data) is refused, never
// truncated or removed.
#pragma once

#include <filesystem>
#include <string>

namespace kareus {

class FileLock {
 public:
  /// Takes the lock at `lock_path` for `what` (e.g. "--log out/fwd_mlp.jsonl", used in the
  /// message). Throws InputError "<what>: in use by another kareus process (pid N, lock
  /// <lock_path>)" when another open file holds it, and InputError when it cannot be created, is
  /// a symlink, or is an existing file that is not a lock file.
  FileLock(std::filesystem::path lock_path, std::string what);
  /// Removes the lock file and releases the lock.
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace kareus
