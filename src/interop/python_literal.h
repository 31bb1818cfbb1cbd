// python_literal.h - a reader for the small Python literals of the artifact's schedule files.
//
// Private to src/interop. Accepts lists, tuples, strings ('...' or "...", with \\ \' \" escapes),
// integers and floats, '#' comments and whitespace: exactly what `ast.literal_eval` of a
// freqs/scheds file needs. Nesting is bounded (kMaxDepth) and so is the text (kMaxBytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::interop::detail {

struct PyValue {
  enum class Kind { kList, kTuple, kString, kInt, kFloat };
  Kind kind = Kind::kInt;
  std::int64_t int_value = 0;
  double float_value = 0;
  std::string string_value;
  std::vector<PyValue> items;  ///< list / tuple elements
  int line = 1;                ///< where the value starts (1-based)
};

inline constexpr int kMaxDepth = 8;
inline constexpr std::size_t kMaxBytes = 64u << 20;

/// Parses one literal (followed only by whitespace and comments). Throws InputError
/// "<origin>:<line>: ..." on anything else.
[[nodiscard]] PyValue parse_python_literal(std::string_view text, std::string_view origin);

/// "list", "tuple", "string", "integer", "float".
[[nodiscard]] std::string_view kind_name(PyValue::Kind kind);

}  // namespace kareus::interop::detail
