#include "common/json_limits.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

std::string Nested(int depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

// Issue #31, finding 4: 300,000 levels of '[' parsed, then crashed the trainer in dump().
TEST(JsonLimits, DeepNestingIsRefusedBeforeParsing) {
  absl::StatusOr<nlohmann::json> j = ParseJsonLimited(Nested(300000), "modules.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(j.status().message(),
              HasSubstr("modules.json: JSON nested deeper than 64 levels (at byte 64)"));
  EXPECT_FALSE(CheckJsonDepth(Nested(65, '{', '}'), "x").ok());
  // An unclosed one too (the parser would fail, but only after building the levels).
  EXPECT_FALSE(CheckJsonDepth(std::string(1000, '['), "x").ok());
}

TEST(JsonLimits, NestingUpToTheLimitParses) {
  absl::StatusOr<nlohmann::json> j = ParseJsonLimited(Nested(64), "x");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_TRUE(j->is_array());
  // Siblings do not add up: depth is per path.
  std::string wide = "[";
  for (int i = 0; i < 1000; ++i) wide += Nested(60) + ",";
  wide += "1]";
  EXPECT_TRUE(ParseJsonLimited(wide, "x").ok());
}

TEST(JsonLimits, BracketsInStringsDoNotCount) {
  const std::string text = "{\"a\": \"" + std::string(500, '[') + "\\\"[[[\", \"b\": [1]}";
  absl::StatusOr<nlohmann::json> j = ParseJsonLimited(text, "x");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["b"][0], 1);
  // An escaped backslash ends before the quote: the quote closes the string.
  EXPECT_FALSE(CheckJsonDepth("[\"\\\\\"" + std::string(100, '['), "x").ok());
}

TEST(JsonLimits, SyntaxErrorNamesTheSource) {
  absl::StatusOr<nlohmann::json> j = ParseJsonLimited("{\"a\": ", "f.json");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(j.status().message(), HasSubstr("f.json: not valid JSON"));
  EXPECT_TRUE(ParseJsonLimited<nlohmann::ordered_json>("{\"b\": 1, \"a\": 2}", "x").ok());
}

TEST(JsonLimits, ExcerptIsBoundedEscapedAndDoesNotRecurse) {
  nlohmann::json deep = nlohmann::json::array();
  nlohmann::json* at = &deep;
  for (int i = 0; i < 100; ++i) {
    at->push_back(nlohmann::json::array());
    at = &(*at)[0];
  }
  EXPECT_EQ(JsonExcerpt(deep), "a list of 1");
  EXPECT_EQ(JsonExcerpt(nlohmann::json::object({{"a", 1}, {"b", 2}})), "an object of 2 keys");
  EXPECT_EQ(JsonExcerpt(nlohmann::json(42)), "42");
  EXPECT_EQ(JsonExcerpt(nlohmann::json("a\x1b[2Jb")), "\"a\\u001b[2Jb\"");
  // Invalid UTF-8 (dump would throw) is replaced; the output is ASCII.
  const std::string bad = JsonExcerpt(nlohmann::json(std::string("x\xff\xfey")));
  EXPECT_EQ(bad, "\"x\\ufffd\\ufffdy\"");
  const std::string long_one = JsonExcerpt(nlohmann::json(std::string(1 << 20, 'a')));
  EXPECT_LE(long_one.size(), kMaxJsonExcerptBytes + 8);
  EXPECT_THAT(long_one, HasSubstr("...\""));
}

}  // namespace
}  // namespace ringmaster
