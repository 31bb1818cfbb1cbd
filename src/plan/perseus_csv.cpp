#include "kareus/plan/perseus_csv.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus::plan {
namespace {

constexpr std::string_view kHeader = "stage,instruction,frequency,time,energy";

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

// Whole-field numbers only: "12abc", "", "nan" and "inf" are rejected.
bool parse_double(std::string_view field, double& value) {
  const std::string text(field);
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  value = std::strtod(text.c_str(), &end);
  return errno == 0 && end == text.c_str() + text.size() && std::isfinite(value);
}

bool parse_int(std::string_view field, long long& value) {
  const std::string text(field);
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  value = std::strtoll(text.c_str(), &end, 10);
  return errno == 0 && end == text.c_str() + text.size();
}

}  // namespace

PerseusProfile parse_perseus_csv(std::string_view text, std::string_view origin, int stages) {
  if (stages < 1) throw InputError(fmt::format("--stages must be >= 1, found {}", stages));
  PerseusProfile profile;
  profile.stages.resize(stages);
  std::map<std::tuple<int, int, int>, int> seen;  // (stage, backward, freq) -> line
  int line_number = 0;
  bool header_seen = false;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_number;
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (!header_seen) {
      if (line != kHeader) {
        throw InputError(fmt::format("{}:{}: expected the header \"{}\", found \"{}\"", origin, line_number, kHeader,
                                     json_fields::short_text(line)));
      }
      header_seen = true;
      continue;
    }
    std::vector<std::string_view> fields;
    for (std::size_t begin = 0;;) {
      const std::size_t comma = line.find(',', begin);
      fields.push_back(
          trim(line.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin)));
      if (comma == std::string_view::npos) break;
      begin = comma + 1;
    }
    if (fields.size() != 5) {
      throw InputError(fmt::format("{}:{}: expected 5 fields ({}), found {}: \"{}\"", origin, line_number, kHeader,
                                   fields.size(), json_fields::short_text(line)));
    }
    long long stage = 0;
    if (!parse_int(fields[0], stage) || stage < 0) {
      throw InputError(fmt::format("{}:{}: stage must be an integer >= 0, found \"{}\"", origin, line_number,
                                   json_fields::short_text(fields[0])));
    }
    if (stage >= stages) {
      throw InputError(fmt::format("{}:{}: stage {} is out of range for --stages {} (expected 0..{})", origin,
                                   line_number, stage, stages, stages - 1));
    }
    bool backward = false;
    if (fields[1] == "backward") {
      backward = true;
    } else if (fields[1] != "forward") {
      throw InputError(fmt::format("{}:{}: instruction must be \"forward\" or \"backward\", found \"{}\"", origin,
                                   line_number, json_fields::short_text(fields[1])));
    }
    long long freq_mhz = 0;
    if (!parse_int(fields[2], freq_mhz) || freq_mhz <= 0 || freq_mhz > 100000) {
      throw InputError(fmt::format("{}:{}: frequency must be a positive integer (MHz), found \"{}\"", origin,
                                   line_number, json_fields::short_text(fields[2])));
    }
    double time_s = 0;
    if (!parse_double(fields[3], time_s)) {
      throw InputError(fmt::format("{}:{}: time must be a number (seconds), found \"{}\"", origin, line_number,
                                   json_fields::short_text(fields[3])));
    }
    if (!(time_s > 0) || time_s > kMaxInstructionTimeS) {
      throw InputError(fmt::format("{}:{}: time must be in (0, {:g}] seconds, found {}", origin, line_number,
                                   kMaxInstructionTimeS, json_fields::short_text(fields[3])));
    }
    double energy_j = 0;
    if (!parse_double(fields[4], energy_j)) {
      throw InputError(fmt::format("{}:{}: energy must be a number (joules), found \"{}\"", origin, line_number,
                                   json_fields::short_text(fields[4])));
    }
    if (!(energy_j >= 0) || energy_j > kMaxInstructionEnergyJ) {
      throw InputError(fmt::format("{}:{}: energy must be in [0, {:g}] joules, found {}", origin, line_number,
                                   kMaxInstructionEnergyJ, json_fields::short_text(fields[4])));
    }
    const auto key = std::make_tuple(static_cast<int>(stage), static_cast<int>(backward), static_cast<int>(freq_mhz));
    if (const auto found = seen.find(key); found != seen.end()) {
      throw InputError(fmt::format("{}:{}: duplicate row for stage {} {} at {} MHz (first on line {})", origin,
                                   line_number, stage, fields[1], freq_mhz, found->second));
    }
    seen.emplace(key, line_number);
    StageProfile& stage_profile = profile.stages[stage];
    (backward ? stage_profile.backward : stage_profile.forward)
        .push_back({static_cast<int>(freq_mhz), time_s, energy_j});
  }
  if (!header_seen) throw InputError(fmt::format("{}: empty file, expected the header \"{}\"", origin, kHeader));
  for (int stage = 0; stage < stages; ++stage) {
    const StageProfile& stage_profile = profile.stages[stage];
    if (stage_profile.forward.empty() && stage_profile.backward.empty()) {
      throw InputError(
          fmt::format("{}: no rows for stage {} (--stages {} needs stages 0..{})", origin, stage, stages, stages - 1));
    }
    if (stage_profile.forward.empty() || stage_profile.backward.empty()) {
      throw InputError(fmt::format("{}: stage {} has no {} rows (every stage needs forward and backward)", origin,
                                   stage, stage_profile.forward.empty() ? "forward" : "backward"));
    }
  }
  return profile;
}

PerseusProfile read_perseus_csv(const std::filesystem::path& path, int stages) {
  return parse_perseus_csv(read_text_file(path), path.string(), stages);
}

}  // namespace kareus::plan
