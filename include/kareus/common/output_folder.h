// kareus/common/output_folder.h - an output folder replaced as a whole or not at all.
//
// `plan --out`, `solve --out`, `import --out` and `export --out` build their files in a sibling
// temporary folder DIR.<pid>-<n>.tmp and only when every file is written put it in DIR's place
// with one rename (renameat2 RENAME_EXCHANGE when DIR exists), then delete the previous folder.
// A run that fails, or is killed at any moment, leaves the previous DIR exactly as it was; its
// temporary is removed by the next run that writes DIR (docs/limits.md). DIR.lock (FileLock)
// keeps a second process off DIR meanwhile. Because DIR is replaced whole, an existing DIR is
// replaced only when it is empty or a kareus output (it holds the marker file .kareus-output),
// and an input inside DIR is refused.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/common/file_io.h"
#include "kareus/common/file_lock.h"

namespace kareus {

/// The marker file in every output folder kareus writes: what may be replaced whole.
inline constexpr std::string_view kOutputMarker = ".kareus-output";

class OutputFolder {
 public:
  /// Checks `folder` (named `flag` in messages) before any work: its parent exists or can be
  /// created and is writable; an existing `folder` is a directory that is empty or holds
  /// kOutputMarker. Takes the lock FOLDER.lock, removes dead processes' temporaries and creates
  /// the staging folder. Throws InputError naming the folder otherwise. `command` is written
  /// into the marker ("kareus plan").
  OutputFolder(const std::filesystem::path& folder, std::string flag, std::string_view command);
  /// Removes the staging folder unless commit() ran. Never throws.
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  /// Where the command writes its files until commit().
  [[nodiscard]] const std::filesystem::path& staging() const { return staging_; }
  /// The folder being replaced (absolute, symlinks resolved).
  [[nodiscard]] const std::filesystem::path& folder() const { return folder_; }

  /// Throws InputError if `input` (named `input_flag`) lies inside the folder, which the commit
  /// would delete.
  void check_input_outside(const std::filesystem::path& input, std::string_view input_flag) const;

  /// Puts the staging folder in the folder's place in one rename and removes the previous
  /// folder. Throws Error if the rename fails (the previous folder then stays as it was).
  void commit();
  /// commit(), then returns `written` (paths under staging()) as named under `user_folder`.
  std::vector<std::filesystem::path> commit(const std::vector<std::filesystem::path>& written,
                                            const std::filesystem::path& user_folder);

 private:
  std::filesystem::path folder_;
  std::string flag_;
  std::optional<FileLock> lock_;
  std::filesystem::path staging_;
  std::optional<DeferredSync> deferred_sync_;  // the staging folder's files are synced at commit()
  bool committed_ = false;
};

}  // namespace kareus
