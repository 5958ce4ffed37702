#include "common/log_escape.h"

#include <string>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

std::string Esc(std::string_view s) { return EscapeControlCharacters(s); }

TEST(LogEscapeTest, ValidUtf8StaysAsItIs) {
  const std::string text =
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xed\x9f\xbf";
  EXPECT_EQ(Esc(text), text);  // 2, 3 and 4 bytes, U+10FFFF, U+D7FF (just below the surrogates)
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(Esc("\xc2\xa0"), "\xc2\xa0");  // U+00A0, the first code point past the C1 controls
}

TEST(LogEscapeTest, ControlCharactersAreEscaped) {
  EXPECT_EQ(Esc("a\nb\rc\td\x1b[2J\x7f"), "a\\nb\\rc\td\\x1b[2J\\x7f");
  EXPECT_EQ(Esc(std::string("nul\0", 4)), "nul\\x00");
  // C1 controls: U+009B is CSI on some terminals, U+0085 a line break.
  EXPECT_EQ(Esc("x\xc2\x9b"
                "2Jy\xc2\x85z\xc2\x80"),
            "x\\u009b2Jy\\u0085z\\u0080");
}

TEST(LogEscapeTest, LineBreaksCanBeKept) {
  EXPECT_EQ(EscapeControlCharacters("one\ntwo\r\n\x1b[31mred\n", LineBreaks::kKeep),
            "one\ntwo\\r\n\\x1b[31mred\n");
}

struct Invalid {
  const char* what;
  std::string in;
  std::string out;
};

TEST(LogEscapeTest, EveryClassOfInvalidUtf8IsEscapedByteByByte) {
  const Invalid cases[] = {
      {"the issue's config.json", "\xff\xfe{", "\\xff\\xfe{"},
      {"lone continuation byte", "a\x80z", "a\\x80z"},
      {"continuation bytes in a row", "\xbf\xbf", "\\xbf\\xbf"},
      {"overlong 2-byte (C0, C1 leads)", "\xc0\xaf\xc1\xbf", "\\xc0\\xaf\\xc1\\xbf"},
      {"overlong 3-byte", "\xe0\x80\xaf", "\\xe0\\x80\\xaf"},
      {"overlong 4-byte", "\xf0\x8f\xbf\xbf", "\\xf0\\x8f\\xbf\\xbf"},
      {"surrogate U+D800", "\xed\xa0\x80", "\\xed\\xa0\\x80"},
      {"surrogate U+DFFF", "\xed\xbf\xbf", "\\xed\\xbf\\xbf"},
      {"truncated 2-byte at the end", "ok\xc3", "ok\\xc3"},
      {"truncated 3-byte before ASCII", "\xe2\x82z", "\\xe2\\x82z"},
      {"truncated 4-byte", "\xf0\x9f\x98", "\\xf0\\x9f\\x98"},
      {"past U+10FFFF (F4 90)", "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
      {"past U+10FFFF (F5 lead)", "\xf5\x80\x80\x80", "\\xf5\\x80\\x80\\x80"},
      {"FE and FF", "\xfe\xff", "\\xfe\\xff"},
      {"invalid then valid multi-byte", "\xff\xc3\xa9", "\\xff\xc3\xa9"},
  };
  for (const Invalid& c : cases) {
    EXPECT_FALSE(IsValidUtf8(c.in)) << c.what;
    const std::string got = Esc(c.in);
    EXPECT_EQ(got, c.out) << c.what;
    EXPECT_TRUE(IsValidUtf8(got)) << c.what;
  }
}

TEST(LogEscapeTest, EveryByteStringComesOutValidAndPrintable) {
  // Every 1- and 2-byte string and a sweep of 3-byte ones: the result is valid UTF-8 with no C0
  // control but tab, no DEL and no C1 control.
  auto check = [](const std::string& s) {
    const std::string e = Esc(s);
    ASSERT_TRUE(IsValidUtf8(e)) << testing::PrintToString(s);
    for (size_t i = 0; i < e.size(); ++i) {
      const auto u = static_cast<unsigned char>(e[i]);
      ASSERT_FALSE((u < 0x20 && u != '\t') || u == 0x7f) << testing::PrintToString(s);
      if (u == 0xc2 && i + 1 < e.size()) {
        ASSERT_GE(static_cast<unsigned char>(e[i + 1]), 0xa0) << testing::PrintToString(s);
      }
    }
  };
  for (int a = 0; a < 256; ++a) {
    check(std::string(1, static_cast<char>(a)));
    for (int b = 0; b < 256; ++b) {
      check(std::string{static_cast<char>(a), static_cast<char>(b)});
      check(std::string{static_cast<char>(a), static_cast<char>(b), static_cast<char>(0x80)});
    }
  }
}

TEST(LogEscapeTest, FirstInvalidUtf8GivesTheOffset) {
  EXPECT_EQ(FirstInvalidUtf8("caf\xc3\xa9"), std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8("caf\xc3\xa9\xff"), 5u);
  EXPECT_EQ(FirstInvalidUtf8("\xe2\x82"), 0u);
}

TEST(LogEscapeTest, Utf8PrefixDoesNotCutASequence) {
  EXPECT_EQ(Utf8Prefix("abc", 5), "abc");
  EXPECT_EQ(Utf8Prefix("ab\xe2\x82\xac", 4), "ab");  // the cap falls inside the euro sign
  EXPECT_EQ(Utf8Prefix("ab\xe2\x82\xac", 5), "ab\xe2\x82\xac");
  EXPECT_EQ(Utf8Prefix("a\xc3\xa9z", 2), "a");
  EXPECT_EQ(Utf8Prefix("a\xc3\xa9z", 3), "a\xc3\xa9");
  EXPECT_EQ(Utf8Prefix(std::string(10, '\x80'), 6).size(), 3u);  // invalid input: bounded back-off
}

}  // namespace
}  // namespace ringmaster
