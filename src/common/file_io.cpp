#include "kareus/common/file_io.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"

namespace kareus {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot read {}", path.string()));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json parse_json(std::string_view text, std::string_view origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    // nlohmann reports a byte offset; turn it into line:column for the user.
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t pos = 0; pos + 1 < error.byte && pos < text.size(); ++pos) {
      if (text[pos] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw InputError(fmt::format("{}:{}:{}: invalid JSON ({})", origin, line, column, error.what()));
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json(read_text_file(path), path.string());
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::path temporary = path;
  temporary += ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) throw Error(fmt::format("cannot write {}", temporary.string()));
  const bool written = std::fwrite(content.data(), 1, content.size(), file) == content.size() &&
                       std::fflush(file) == 0 && ::fsync(fileno(file)) == 0;
  const bool closed = std::fclose(file) == 0;
  std::error_code error;
  if (!written || !closed) {
    std::filesystem::remove(temporary, error);
    throw Error(fmt::format("cannot write {}", temporary.string()));
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    throw Error(fmt::format("cannot rename {} to {}", temporary.string(), path.string()));
  }
}

void ensure_writable_directory(const std::filesystem::path& dir, std::string_view flag) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    throw InputError(fmt::format("{} {}: cannot create directory ({})", flag, dir.string(),
                                 error ? error.message() : "not a directory"));
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw InputError(fmt::format("{} {}: directory is not writable", flag, dir.string()));
  }
}

}  // namespace kareus
