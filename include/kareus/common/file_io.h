// kareus/common/file_io.h - whole-file reads and crash-safe writes.
//
// Writes go to PATH.tmp and are renamed over PATH only when complete, so a
// failed or killed run never leaves half a file that looks finished.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace kareus {

/// Reads a whole file. Throws InputError naming the path if it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

/// Parses a JSON file. Throws InputError naming the path, line and column on bad JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

/// Parses JSON text; `origin` names where it came from in error messages.
nlohmann::json parse_json(std::string_view text, std::string_view origin);

/// Writes `content` to PATH.tmp, flushes, and renames it to PATH. Throws Error on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

/// Creates `dir` (and parents) and checks it is writable. Throws InputError naming it otherwise.
void ensure_writable_directory(const std::filesystem::path& dir, std::string_view flag);

}  // namespace kareus
