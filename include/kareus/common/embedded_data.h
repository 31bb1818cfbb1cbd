// kareus/common/embedded_data.h - the data/ presets compiled into the binary.
//
// GPU and model presets live as JSON files under data/ (each value with its
// source); the build embeds them so `kareus` works from any directory.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kareus {

struct EmbeddedFile {
  std::string_view path;     ///< relative to data/, e.g. "gpus/a100-40gb.json"
  std::string_view content;  ///< the file's bytes
};

/// Every embedded file, sorted by path.
std::span<const EmbeddedFile> embedded_files();

/// The content of data/<path>, or nullopt.
std::optional<std::string_view> find_embedded_file(std::string_view path);

/// A preset's JSON text and where it came from (the path, for error messages).
struct PresetText {
  std::string text;
  std::string origin;
};

/// The preset a user named (--gpu, --model): a name ending in .json is a file read from disk
/// (read_text_file's InputErrors), any other is data/<folder>/<name>.json among the embedded
/// presets, nullopt when there is none.
std::optional<PresetText> read_preset(std::string_view name_or_path, std::string_view folder);

/// Names (file stem) of every embedded data/<folder>/*.json, sorted.
std::vector<std::string> embedded_names(std::string_view folder);

}  // namespace kareus
