// Hostile JSON: bounded nesting and short excerpts in messages (docs/limits.md).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/json_fields.h"

namespace kareus {
namespace {

using test_common::error_of;

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonDepth, AcceptsTheLimitAndRefusesOneMoreNamingLineAndColumn) {
  EXPECT_NO_THROW((void)parse_json(nested_arrays(kMaxJsonDepth), "doc.json"));
  // Objects count as levels too: the 65th level opens at line 2, column 64.
  std::string deep = "{\"a\":\n";
  for (int level = 1; level < kMaxJsonDepth; ++level) deep += "[";
  deep += "[";
  EXPECT_EQ(deep.size(), 6u + 64u);
  EXPECT_EQ(error_of([&] { (void)parse_json(deep, "doc.json"); }), "doc.json:2:64: JSON nested deeper than 64 levels");
  EXPECT_EQ(error_of([&] { (void)parse_json(nested_arrays(90'000), "plan.json"); }),
            "plan.json:1:65: JSON nested deeper than 64 levels");
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  const std::string text = "{\"name\": \"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\"}";
  const nlohmann::json value = parse_json(text, "doc.json");
  EXPECT_EQ(value["name"].get<std::string>().size(), 1001u);
  // Closing brackets do not go below zero: a stray one is the parser's error, not a depth error.
  EXPECT_NE(error_of([] { (void)parse_json("]]" + nested_arrays(3), "doc.json"); }).find("invalid JSON"),
            std::string::npos);
}

TEST(JsonParse, ANumberPastDoubleRangeIsAnInputError) {
  // nlohmann throws out_of_range here, not parse_error; it used to escape as exit 1 (fuzzer find).
  EXPECT_EQ(error_of([] { (void)parse_json(R"({"time_s": 1e999})", "p.json"); }),
            "p.json: invalid JSON ([json.exception.out_of_range.406] number overflow parsing '1e999')");
}

TEST(JsonParse, ADocumentPastTheSizeBoundIsRefusedBeforeParsing) {
  // A document at the bound parses; one byte more is refused before the parser allocates anything.
  std::string text = "[" + std::string(kMaxJsonDocumentBytes - 2, ' ') + "]";
  EXPECT_TRUE(parse_json(text, "big.json").empty());
  text.insert(1, " ");
  EXPECT_EQ(
      error_of([&] { (void)parse_json(text, "big.json"); }),
      "big.json: a JSON document of 67108865 bytes is larger than the 64 MiB kareus parses at once (it would take "
      "about 20 times that in memory; docs/limits.md)");
}

TEST(JsonExcerpt, CutsLongAndDeepValues) {
  EXPECT_EQ(json_fields::excerpt(nlohmann::json(42)), "42");
  EXPECT_EQ(json_fields::excerpt(nlohmann::json::parse(R"({"a": [1, 2]})")), R"({"a": [1, 2]})");
  EXPECT_EQ(json_fields::excerpt(nlohmann::json(std::string(100, 'x')), 10), "\"xxxxxxxxx...");
  // Depth is cut at four levels whatever the limit; the rest becomes [...].
  const nlohmann::json deep = nlohmann::json::parse(nested_arrays(kMaxJsonDepth));
  EXPECT_EQ(json_fields::excerpt(deep), "[[[[[...]]]]]");
  // A huge array stops at the limit, not after the last element.
  const nlohmann::json wide(100'000, 7);
  EXPECT_EQ(json_fields::excerpt(wide, 12), "[7, 7, 7, 7,...");
  // Never cuts inside a UTF-8 character ("é" is two bytes).
  EXPECT_EQ(json_fields::short_text("ééé", 3), "é...");
}

TEST(JsonFields, MessagesQuoteAnExcerptOfTheValue) {
  const nlohmann::json object = {{"name", nlohmann::json(std::vector<int>(10'000, 1))}};
  const std::string message = error_of([&] { (void)json_fields::require_string(object, "name", "gpu.json"); });
  EXPECT_EQ(message.rfind("gpu.json: field 'name' must be a string, found [1, 1, 1,", 0), 0u) << message;
  EXPECT_LT(message.size(), 120u);
}

}  // namespace
}  // namespace kareus
