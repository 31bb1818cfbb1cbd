#include "kareus/common/output_folder.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"

namespace kareus {
namespace {

void sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the files inside are already synced
  ::fsync(fd);
  ::close(fd);
}

// Whether `path` is `folder` or lies under it (both absolute and normal).
bool inside(const std::filesystem::path& path, const std::filesystem::path& folder) {
  return std::mismatch(folder.begin(), folder.end(), path.begin(), path.end()).first == folder.end();
}

// rename(2) without replacing, or swapping two names (renameat2). A file system without renameat2's
// flags (EINVAL) gets plain renames: the previous folder is first moved aside under a temporary
// name, so DIR is briefly absent but never half written.
void rename_into_place(const std::filesystem::path& from, const std::filesystem::path& to, bool exchange) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), exchange ? RENAME_EXCHANGE : RENAME_NOREPLACE) == 0) {
    return;
  }
  if (errno != EINVAL) throw std::system_error(errno, std::generic_category());
  if (exchange) {
    const std::filesystem::path aside = temporary_beside(to);
    std::filesystem::rename(to, aside);
    std::filesystem::rename(from, to);
    std::filesystem::rename(aside, from);
  } else {
    std::filesystem::rename(from, to);
  }
}

// Whether `folder` (an existing directory) is the root of a mount: then no rename can put another
// folder in its place (EBUSY), which the commit needs. statx's mount-root attribute also sees a
// bind mount of a folder of the same file system; without it, a device that differs from the
// parent's does.
bool is_mount_point(const std::filesystem::path& folder) {
#ifdef STATX_ATTR_MOUNT_ROOT
  struct statx status {};
  if (::statx(AT_FDCWD, folder.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &status) == 0 &&
      (status.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0) {
    return (status.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  }
#endif
  struct stat own {};
  struct stat parent {};
  return ::stat(folder.c_str(), &own) == 0 && ::stat(folder.parent_path().c_str(), &parent) == 0 &&
         own.st_dev != parent.st_dev;
}

}  // namespace

OutputFolder::OutputFolder(const std::filesystem::path& folder, std::string flag, std::string_view command)
    : flag_(std::move(flag)) {
  std::error_code error;
  // Resolved, so a symlinked DIR replaces its target and `a/../b` and `b` share one lock.
  folder_ = std::filesystem::weakly_canonical(std::filesystem::absolute(folder, error), error);
  if (error || folder_.filename().empty() || folder_ == folder_.root_path()) {
    throw InputError(fmt::format("{} {}: not a folder that can be replaced", flag_, folder.string()));
  }
  const std::filesystem::path parent = folder_.parent_path();
  std::filesystem::create_directories(parent, error);
  if (error || !std::filesystem::is_directory(parent)) {
    throw InputError(fmt::format("{} {}: cannot create directory {} ({})", flag_, folder.string(), parent.string(),
                                 error ? error.message() : "not a directory"));
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    throw InputError(fmt::format("{} {}: the folder {} is not writable", flag_, folder.string(), parent.string()));
  }
  const auto status = std::filesystem::symlink_status(folder_, error);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_directory(status)) {
      throw InputError(fmt::format("{} {}: cannot create directory (it is a file)", flag_, folder.string()));
    }
    if (is_mount_point(folder_)) {
      throw InputError(
          fmt::format("{} {}: is a mount point; the output is put in place by renaming a folder over it, which a mount "
                      "point refuses, so give a folder inside it",
                      flag_, folder.string()));
    }
    if (!std::filesystem::exists(folder_ / kOutputMarker) && !std::filesystem::is_empty(folder_, error)) {
      throw InputError(fmt::format(
          "{} {}: exists and is not a kareus output folder (no {}); it would be replaced whole, so give a new "
          "folder or empty it",
          flag_, folder.string(), kOutputMarker));
    }
  }
  std::filesystem::path lock_path = folder_;
  lock_path += ".lock";
  lock_.emplace(lock_path, fmt::format("{} {}", flag_, folder.string()));
  remove_dead_temporaries(folder_);
  staging_ = temporary_beside(folder_);
  if (!std::filesystem::create_directory(staging_, error) || error) {
    throw InputError(fmt::format("{} {}: cannot create {} ({})", flag_, folder.string(), staging_.string(),
                                 error ? error.message() : "it exists"));
  }
  deferred_sync_.emplace(staging_);
  write_file_atomic(staging_ / kOutputMarker, fmt::format("{}\n", command));
}

OutputFolder::~OutputFolder() {
  if (committed_ || staging_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(staging_, ignored);
}

std::vector<std::filesystem::path> OutputFolder::commit(const std::vector<std::filesystem::path>& written,
                                                        const std::filesystem::path& user_folder) {
  commit();
  std::vector<std::filesystem::path> named;
  named.reserve(written.size());
  for (const std::filesystem::path& path : written) named.push_back(user_folder / path.lexically_relative(staging_));
  return named;
}

void OutputFolder::check_input_outside(const std::filesystem::path& input, std::string_view input_flag) const {
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(std::filesystem::absolute(input), error);
  if (!error && inside(resolved, folder_)) {
    throw InputError(fmt::format("{} {} lies inside {} {}, which is replaced whole: move it out or write elsewhere",
                                 input_flag, input.string(), flag_, folder_.string()));
  }
}

void OutputFolder::commit() {
  // Every file written into the staging folder reaches the disk before its name can appear as
  // DIR: one flush for all of them (DeferredSync).
  sync_file_system(staging_);
  deferred_sync_.reset();
  // Both names stay valid at every moment: a kill between any two steps leaves either the old
  // folder or the new one at DIR, and the other under a temporary name for the next run to remove.
  try {
    std::error_code error;
    rename_into_place(staging_, folder_, std::filesystem::exists(std::filesystem::symlink_status(folder_, error)));
  } catch (const std::exception& error) {
    throw Error(
        fmt::format("{}: cannot put {} in place of {}: {}", flag_, staging_.string(), folder_.string(), error.what()));
  }
  committed_ = true;
  sync_directory(folder_.parent_path());
  std::error_code ignored;
  std::filesystem::remove_all(staging_, ignored);  // the previous folder, if any
}

}  // namespace kareus
