#include "interop/python_literal.h"

#include <gtest/gtest.h>

#include "common/input_error.h"

namespace kareus::interop::detail {
namespace {

using test_common::error_of;

TEST(PythonLiteral, ReadsWhatTheScheduleFilesHold) {
  const PyValue value = parse_python_literal(
      "# header\n[\n  ('forward', -12, +3, 1.5e3),  # trailing\n  [\"a\\\"b\", 'c\\\\d', ('x',)],\n  (),\n]\n", "t.py");
  ASSERT_EQ(value.kind, PyValue::Kind::kList);
  ASSERT_EQ(value.items.size(), 3u);
  const PyValue& first = value.items[0];
  EXPECT_EQ(first.kind, PyValue::Kind::kTuple);
  EXPECT_EQ(first.line, 3);
  EXPECT_EQ(first.items[0].string_value, "forward");
  EXPECT_EQ(first.items[1].int_value, -12);
  EXPECT_EQ(first.items[2].int_value, 3);
  EXPECT_EQ(first.items[3].kind, PyValue::Kind::kFloat);
  EXPECT_EQ(first.items[3].float_value, 1500.0);
  const PyValue& second = value.items[1];
  EXPECT_EQ(second.items[0].string_value, "a\"b");
  EXPECT_EQ(second.items[1].string_value, "c\\d");
  EXPECT_EQ(second.items[2].kind, PyValue::Kind::kTuple);
  EXPECT_EQ(second.items[2].items.size(), 1u);
  EXPECT_EQ(value.items[2].items.size(), 0u);
}

TEST(PythonLiteral, ValidUtf8IsRead) {
  EXPECT_EQ(parse_python_literal("['caf\xc3\xa9', '\xe2\x82\xac', '\xf0\x9f\x98\x80']  # \xc3\xa9", "t.py")
                .items[1]
                .string_value,
            "\xe2\x82\xac");
}

TEST(PythonLiteral, ZerosAndFloatsWithLeadingZerosReadAsPythonDoes) {
  // "0", "00" and "-0" are Python integers, and a float may start with zeros ("01.5" is 1.5).
  const PyValue list = parse_python_literal("[0, 00, -0, 01.5, 1410]", "t.py");
  ASSERT_EQ(list.items.size(), 5u);
  EXPECT_EQ(list.items[1].kind, PyValue::Kind::kInt);
  EXPECT_EQ(list.items[1].int_value, 0);
  EXPECT_EQ(list.items[3].kind, PyValue::Kind::kFloat);
  EXPECT_EQ(list.items[3].float_value, 1.5);
  EXPECT_EQ(list.items[4].int_value, 1410);
}

TEST(PythonLiteral, RejectsWhatPythonWouldNotReadTheSameWay) {
  struct Case {
    std::string text;
    std::string expected;
  };
  for (const Case& row : std::vector<Case>{
           {"('x')", "t.py:1: a one-element tuple needs a trailing comma"},
           {"[1,,2]", "t.py:1: unexpected ',', expected a list, tuple, string or number"},
           {"[1 2]", "t.py:1: expected ',' or ']'"},
           {"[1,\n2", "t.py:2: unexpected end of file, expected ']'"},
           {"'a\\n'", "t.py:1: unsupported escape '\\n'"},
           {"'abc\n'", "t.py:1: unterminated string"},
           {"None", "t.py:1: unexpected 'N', expected a list, tuple, string or number"},
           {"1.2.3", "t.py:1: bad number '1.2.3'"},
           // Python 3 refuses a leading zero in a decimal integer (0123 is octal in C).
           {"[('forward', 01410)]", "t.py:1: leading zeros in the integer '01410' (Python refuses them)"},
           {"-007", "t.py:1: leading zeros in the integer '-007' (Python refuses them)"},
           {"", "t.py:1: unexpected end of file, expected a value"},
           {"[] []", "t.py:1: unexpected '[' after the literal"},
           // Python reads source as UTF-8: a stray Latin-1 byte, an overlong '/', a surrogate.
           {"[('forward', 1410),\n 'caf\xe9']",
            "t.py:2: invalid UTF-8 (byte 0xe9 at offset 25): Python cannot read "
            "this file"},
           {"['\xc0\xaf']", "t.py:1: invalid UTF-8 (byte 0xc0 at offset 2): Python cannot read this file"},
           {"# \xed\xa0\x80\n[]", "t.py:1: invalid UTF-8 (byte 0xed at offset 2): Python cannot read this file"},
           {"['\xe2\x82']", "t.py:1: invalid UTF-8 (byte 0xe2 at offset 2): Python cannot read this file"},
       }) {
    SCOPED_TRACE(row.text);
    EXPECT_EQ(error_of([&] { (void)parse_python_literal(row.text, "t.py"); }), row.expected);
  }
}

}  // namespace
}  // namespace kareus::interop::detail
