#include "python_literal.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "kareus/common/error.h"

namespace kareus::interop::detail {
namespace {

class Reader {
 public:
  Reader(std::string_view text, std::string_view origin) : text_(text), origin_(origin) {}

  PyValue document() {
    if (text_.size() > kMaxBytes) {
      throw InputError(fmt::format("{}: file is {} bytes, more than the {} allowed", origin_, text_.size(), kMaxBytes));
    }
    check_utf8();
    skip_blank();
    PyValue value = parse_value(0);
    skip_blank();
    if (position_ != text_.size()) fail(fmt::format("unexpected '{}' after the literal", text_[position_]));
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}:{}: {}", origin_, line_, what));
  }

  // Python reads a source file as UTF-8 and refuses one that is not: so does this reader (an
  // imported plan would otherwise carry bytes that the artifact's own loader cannot read).
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
  void check_utf8() const {
    int line = 1;
    for (std::size_t at = 0; at < text_.size();) {
      const auto byte = static_cast<unsigned char>(text_[at]);
      if (byte == '\n') ++line;
      if (byte < 0x80) {
        ++at;
        continue;
      }
      const std::size_t length = byte >= 0xC2 && byte <= 0xDF   ? 2
                                 : byte >= 0xE0 && byte <= 0xEF ? 3
                                 : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                                : 0;
      bool valid = length != 0 && at + length <= text_.size();
      for (std::size_t next = 1; valid && next < length; ++next) {
        valid = (static_cast<unsigned char>(text_[at + next]) & 0xC0) == 0x80;
      }
      if (valid && length >= 3) {
        const auto second = static_cast<unsigned char>(text_[at + 1]);
        valid = !(byte == 0xE0 && second < 0xA0) && !(byte == 0xED && second > 0x9F) &&
                !(byte == 0xF0 && second < 0x90) && !(byte == 0xF4 && second > 0x8F);
      }
      if (!valid) {
        throw InputError(fmt::format("{}:{}: invalid UTF-8 (byte 0x{:02x} at offset {}): Python cannot read this file",
                                     origin_, line, byte, at));
      }
      at += length;
    }
  }

  void skip_blank() {
    while (position_ < text_.size()) {
      const char c = text_[position_];
      if (c == '\n') {
        ++line_;
        ++position_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++position_;
      } else if (c == '#') {
        while (position_ < text_.size() && text_[position_] != '\n') ++position_;
      } else {
        break;
      }
    }
  }

  PyValue parse_value(int depth) {
    if (position_ >= text_.size()) fail("unexpected end of file, expected a value");
    const char c = text_[position_];
    if (c == '[' || c == '(') return parse_sequence(depth);
    if (c == '\'' || c == '"') return parse_string();
    if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) return parse_number();
    fail(fmt::format("unexpected '{}', expected a list, tuple, string or number", c));
  }

  PyValue parse_sequence(int depth) {
    if (depth >= kMaxDepth) fail(fmt::format("nesting deeper than {}", kMaxDepth));
    PyValue value;
    value.line = line_;
    const char open = text_[position_++];
    const char close = open == '[' ? ']' : ')';
    value.kind = open == '[' ? PyValue::Kind::kList : PyValue::Kind::kTuple;
    bool trailing_comma = false;
    while (true) {
      skip_blank();
      if (position_ >= text_.size()) fail(fmt::format("unexpected end of file, expected '{}'", close));
      if (text_[position_] == close) {
        ++position_;
        break;
      }
      if (!value.items.empty() && !trailing_comma) fail(fmt::format("expected ',' or '{}'", close));
      value.items.push_back(parse_value(depth + 1));
      skip_blank();
      trailing_comma = position_ < text_.size() && text_[position_] == ',';
      if (trailing_comma) ++position_;
    }
    // (x) is x in Python, (x,) a tuple; the files only hold real tuples, so insist on the comma.
    if (value.kind == PyValue::Kind::kTuple && value.items.size() == 1 && !trailing_comma) {
      fail("a one-element tuple needs a trailing comma");
    }
    return value;
  }

  PyValue parse_string() {
    PyValue value;
    value.kind = PyValue::Kind::kString;
    value.line = line_;
    const char quote = text_[position_++];
    while (true) {
      if (position_ >= text_.size() || text_[position_] == '\n') fail("unterminated string");
      const char c = text_[position_++];
      if (c == quote) break;
      if (c == '\\') {
        if (position_ >= text_.size()) fail("unterminated string");
        const char escaped = text_[position_++];
        if (escaped != '\\' && escaped != '\'' && escaped != '"')
          fail(fmt::format("unsupported escape '\\{}'", escaped));
        value.string_value.push_back(escaped);
      } else {
        value.string_value.push_back(c);
      }
      if (value.string_value.size() > 4096) fail("string longer than 4096 characters");
    }
    return value;
  }

  PyValue parse_number() {
    PyValue value;
    value.line = line_;
    const std::size_t start = position_;
    if (text_[position_] == '+' || text_[position_] == '-') ++position_;
    bool is_float = false;
    while (position_ < text_.size()) {
      const char c = text_[position_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        ++position_;
      } else if (c == '.' || c == 'e' || c == 'E' ||
                 ((c == '+' || c == '-') && (text_[position_ - 1] == 'e' || text_[position_ - 1] == 'E'))) {
        is_float = true;
        ++position_;
      } else {
        break;
      }
    }
    std::string_view token = text_.substr(start, position_ - start);
    if (!token.empty() && token.front() == '+') token.remove_prefix(1);
    const char* first = token.data();
    const char* last = token.data() + token.size();
    if (is_float) {
      value.kind = PyValue::Kind::kFloat;
      const auto result = std::from_chars(first, last, value.float_value);
      if (result.ec != std::errc() || result.ptr != last || !std::isfinite(value.float_value)) {
        fail(fmt::format("bad number '{}'", text_.substr(start, position_ - start)));
      }
    } else {
      value.kind = PyValue::Kind::kInt;
      // Python refuses a decimal integer with a leading zero (0123: octal in C, an error in
      // Python 3); only zeros ("0", "00") may start with one.
      const std::string_view digits = !token.empty() && token.front() == '-' ? token.substr(1) : token;
      if (digits.size() > 1 && digits.front() == '0' && digits.find_first_not_of('0') != std::string_view::npos) {
        fail(fmt::format("leading zeros in the integer '{}' (Python refuses them)",
                         text_.substr(start, position_ - start)));
      }
      const auto result = std::from_chars(first, last, value.int_value);
      if (result.ec == std::errc::result_out_of_range) {
        fail(fmt::format("integer '{}' out of range", text_.substr(start, position_ - start)));
      }
      if (result.ec != std::errc() || result.ptr != last) {
        fail(fmt::format("bad number '{}'", text_.substr(start, position_ - start)));
      }
    }
    return value;
  }

  std::string_view text_;
  std::string_view origin_;
  std::size_t position_ = 0;
  int line_ = 1;
};

}  // namespace

PyValue parse_python_literal(std::string_view text, std::string_view origin) { return Reader(text, origin).document(); }

std::string_view kind_name(PyValue::Kind kind) {
  switch (kind) {
    case PyValue::Kind::kList:
      return "list";
    case PyValue::Kind::kTuple:
      return "tuple";
    case PyValue::Kind::kString:
      return "string";
    case PyValue::Kind::kInt:
      return "integer";
    case PyValue::Kind::kFloat:
      return "float";
  }
  return "value";
}

}  // namespace kareus::interop::detail
