#include "kareus/common/embedded_data.h"

#include <algorithm>

#include <fmt/format.h>

#include "kareus/common/file_io.h"

namespace kareus {

std::optional<std::string_view> find_embedded_file(std::string_view path) {
  for (const EmbeddedFile& file : embedded_files()) {
    if (file.path == path) return file.content;
  }
  return std::nullopt;
}

std::optional<PresetText> read_preset(std::string_view name_or_path, std::string_view folder) {
  if (name_or_path.ends_with(".json")) {
    std::string path(name_or_path);
    return PresetText{read_text_file(path), std::move(path)};
  }
  std::string path = fmt::format("{}/{}.json", folder, name_or_path);
  if (auto content = find_embedded_file(path)) return PresetText{std::string(*content), std::move(path)};
  return std::nullopt;
}

std::vector<std::string> embedded_names(std::string_view folder) {
  std::vector<std::string> names;
  const std::string prefix = std::string(folder) + "/";
  constexpr std::string_view kSuffix = ".json";
  for (const EmbeddedFile& file : embedded_files()) {
    if (!file.path.starts_with(prefix) || !file.path.ends_with(kSuffix)) continue;
    std::string_view stem = file.path.substr(prefix.size());
    stem.remove_suffix(kSuffix.size());
    names.emplace_back(stem);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kareus
