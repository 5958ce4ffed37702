// Hand-checked cases for the WordPiece tokenizer; each expectation follows from the steps of
// HF's BasicTokenizer + WordpieceTokenizer. wordpiece_oracle_test compares against HF itself.
#include "trainer/text/wordpiece.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/text/unicode_util.h"

namespace ringmaster::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Specials deliberately away from BERT's usual 0/100/101/102.
std::vector<std::string> BaseVocab() {
  return {
      "[UNK]",     // 0
      "hello",     // 1
      "world",     // 2
      "[PAD]",     // 3
      "!",         // 4
      "[SEP]",     // 5
      "我",        // 6
      "[CLS]",     // 7
      "爱",        // 8
      "[MASK]",    // 9
      "un",        // 10
      "##aff",     // 11
      "##able",    // 12
      "a",         // 13
      "##a",       // 14
      "Héllo",     // 15
      "cafe",      // 16
      "café",      // 17
      "you",       // 18
      "[",         // 19
      "]",         // 20
      "mask",      // 21
      "istanbul",  // 22
      "İstanbul",  // 23
      "οδοσ",      // 24
      "οδος",      // 25
      "straße",    // 26
      "«",         // 27
      "»",         // 28
      "—",         // 29
      "x",         // 30
      "##x",       // 31
      "$",         // 32
      "5",         // 33
      ",",         // 34
      "000",       // 35
      "b",         // 36
      "##b",       // 37
      "MASK",      // 38
  };
}

WordPieceTokenizer Make(bool lower, std::vector<std::string> vocab = BaseVocab()) {
  auto t = WordPieceTokenizer::FromVocabTokens(std::move(vocab), lower, "test-vocab");
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(WordPieceTest, SpecialIdsComeFromTheVocab) {
  WordPieceTokenizer t = Make(true);
  EXPECT_EQ(t.special().unk, 0);
  EXPECT_EQ(t.special().pad, 3);
  EXPECT_EQ(t.special().sep, 5);
  EXPECT_EQ(t.special().cls, 7);
  EXPECT_EQ(t.special().mask, 9);
  EXPECT_EQ(t.vocab_size(), static_cast<int32_t>(BaseVocab().size()));
  EXPECT_EQ(t.token(7), "[CLS]");
  EXPECT_EQ(t.TokenId("world"), 2);
  EXPECT_EQ(t.TokenId("nope"), -1);
  EXPECT_TRUE(t.do_lower_case());
  EXPECT_THAT(t.Encode("hello world", 512), ElementsAre(7, 1, 2, 5));
  EXPECT_THAT(t.Encode("", 512), ElementsAre(7, 5));
}

TEST(WordPieceTest, MaskIsOptional) {
  std::vector<std::string> v = BaseVocab();
  v[9] = "unused";
  WordPieceTokenizer t = Make(true, v);
  EXPECT_EQ(t.special().mask, -1);
  // HF would give [MASK] an id past the vocab; here it stays inside it, as [UNK].
  EXPECT_THAT(t.TokenizeToIds("[MASK]"), ElementsAre(0));
}

TEST(WordPieceTest, AccentsStrippedOnlyWhenUncased) {
  EXPECT_THAT(Make(true).Tokenize("Héllo"), ElementsAre("hello"));
  EXPECT_THAT(Make(false).Tokenize("Héllo"), ElementsAre("Héllo"));
  // Decomposed input is composed (NFC) first, so it matches the composed vocab entry.
  EXPECT_THAT(Make(false).Tokenize("He\u0301llo"), ElementsAre("Héllo"));
  EXPECT_THAT(Make(false).Tokenize("cafe\u0301"), ElementsAre("café"));
  EXPECT_THAT(Make(true).Tokenize("CAFÉ"), ElementsAre("cafe"));
  // Cased mode keeps case: "HELLO" is not in the vocab.
  EXPECT_THAT(Make(false).Tokenize("HELLO hello"), ElementsAre("[UNK]", "hello"));
}

TEST(WordPieceTest, ChineseCharactersAreSplit) {
  WordPieceTokenizer t = Make(true);
  EXPECT_THAT(t.Tokenize("我爱"), ElementsAre("我", "爱"));
  EXPECT_THAT(t.Tokenize("我爱you"), ElementsAre("我", "爱", "you"));
  EXPECT_THAT(t.TokenizeToIds("hello我"), ElementsAre(1, 6));
}

TEST(WordPieceTest, PunctuationRunsSplitPerCharacter) {
  WordPieceTokenizer t = Make(true);
  EXPECT_THAT(t.Tokenize("!!!"), ElementsAre("!", "!", "!"));
  EXPECT_THAT(t.Tokenize("hello!world"), ElementsAre("hello", "!", "world"));
  // Unicode punctuation (Pi/Pf/Pd) splits too, and ASCII symbols such as '$' count as punctuation.
  EXPECT_THAT(t.Tokenize("«hello»—world"), ElementsAre("«", "hello", "»", "—", "world"));
  EXPECT_THAT(t.Tokenize("$5,000"), ElementsAre("$", "5", ",", "000"));
}

TEST(WordPieceTest, ControlCharactersAreDroppedNotSpaces) {
  WordPieceTokenizer t = Make(true);
  EXPECT_THAT(t.Tokenize("hel\x01lo"), ElementsAre("hello"));
  EXPECT_THAT(t.Tokenize(std::string("hel\0lo", 6)), ElementsAre("hello"));
  EXPECT_THAT(t.Tokenize("hel\x7Flo"), ElementsAre("hello"));
  EXPECT_THAT(t.Tokenize("hel\u200Blo"), ElementsAre("hello"));  // zero-width space, Cf
  EXPECT_THAT(t.Tokenize("hel\u0085lo"), ElementsAre("hello"));  // NEL, Cc
  EXPECT_THAT(t.Tokenize("hel\uE000lo"), ElementsAre("hello"));  // private use
  EXPECT_THAT(t.Tokenize("hel\uFFFDlo"), ElementsAre("hello"));
}

TEST(WordPieceTest, WhitespaceKinds) {
  WordPieceTokenizer t = Make(true);
  EXPECT_THAT(t.Tokenize(" hello\tworld\n"), ElementsAre("hello", "world"));
  EXPECT_THAT(t.Tokenize("hello\r\nworld"), ElementsAre("hello", "world"));
  EXPECT_THAT(t.Tokenize("hello\u00A0world"), ElementsAre("hello", "world"));
  EXPECT_THAT(t.Tokenize("hello\u3000world"), ElementsAre("hello", "world"));
  // U+2028 is not HF whitespace, but Python's str.split() splits on it.
  EXPECT_THAT(t.Tokenize("hello\u2028world"), ElementsAre("hello", "world"));
  EXPECT_THAT(t.Tokenize(" \t\n "), IsEmpty());
}

TEST(WordPieceTest, GreedyLongestMatchFirst) {
  WordPieceTokenizer t = Make(true);
  EXPECT_THAT(t.Tokenize("unaffable"), ElementsAre("un", "##aff", "##able"));
  EXPECT_THAT(t.TokenizeToIds("unaffable"), ElementsAre(10, 11, 12));
  EXPECT_THAT(t.Tokenize("aaa"), ElementsAre("a", "##a", "##a"));
}

TEST(WordPieceTest, UnknownWordsBecomeOneUnk) {
  WordPieceTokenizer t = Make(true);
  EXPECT_THAT(t.Tokenize("zebra"), ElementsAre("[UNK]"));
  // "hello" matches but "##xyz" does not: the whole word is one [UNK], not "hello [UNK]".
  EXPECT_THAT(t.Tokenize("helloxyz world"), ElementsAre("[UNK]", "world"));
  EXPECT_THAT(t.TokenizeToIds("zebra"), ElementsAre(0));
}

TEST(WordPieceTest, OverLongWordsAreUnk) {
  WordPieceTokenizer t = Make(true);
  std::vector<std::string> hundred = t.Tokenize(std::string(100, 'a'));
  ASSERT_EQ(hundred.size(), 100u);
  EXPECT_EQ(hundred[0], "a");
  EXPECT_EQ(hundred[99], "##a");
  EXPECT_THAT(t.Tokenize(std::string(101, 'a')), ElementsAre("[UNK]"));
  // The limit counts code points, not bytes: 60 two-byte characters (kept by the cased
  // tokenizer) are 60 characters.
  std::vector<std::string> vocab = BaseVocab();
  vocab.push_back("á");
  vocab.push_back("##á");
  WordPieceTokenizer cased = Make(false, vocab);
  std::string accented;
  for (int i = 0; i < 60; ++i) accented += "á";
  std::vector<std::string> pieces = cased.Tokenize(accented);
  ASSERT_EQ(pieces.size(), 60u);
  EXPECT_EQ(pieces[59], "##á");
}

TEST(WordPieceTest, TruncationCutsPiecesFromTheEnd) {
  WordPieceTokenizer t = Make(true);
  EXPECT_THAT(t.Encode("hello world you", 4), ElementsAre(7, 1, 2, 5));
  EXPECT_THAT(t.Encode("hello world you", 5), ElementsAre(7, 1, 2, 18, 5));
  EXPECT_THAT(t.Encode("hello world you", 100), ElementsAre(7, 1, 2, 18, 5));
  EXPECT_THAT(t.Encode("hello world you", 2), ElementsAre(7, 5));
  EXPECT_THAT(t.Encode("hello world you", 3), ElementsAre(7, 1, 5));
}

TEST(WordPieceTest, PairsAreClsASepBSepWithTypeIds) {
  WordPieceTokenizer t = Make(true);
  std::vector<int32_t> types;
  // hello=1 world=2 you=18 x=30 b=36; [CLS]=7 [SEP]=5.
  EXPECT_THAT(t.EncodePair("hello world", "you", 100, &types), ElementsAre(7, 1, 2, 5, 18, 5));
  EXPECT_THAT(types, ElementsAre(0, 0, 0, 0, 1, 1));
  EXPECT_THAT(t.EncodePair("", "", 100, &types), ElementsAre(7, 5, 5));
  EXPECT_THAT(types, ElementsAre(0, 0, 1));
}

TEST(WordPieceTest, PairTruncationIsLongestFirst) {
  WordPieceTokenizer t = Make(true);
  std::vector<int32_t> types;
  // a has 4 pieces, b 1: the 2 pieces over max_len 6 both come off a.
  EXPECT_THAT(t.EncodePair("hello world you x", "b", 6, &types), ElementsAre(7, 1, 2, 5, 36, 5));
  EXPECT_THAT(types, ElementsAre(0, 0, 0, 0, 1, 1));
  // a 1, b 4: from b.
  EXPECT_THAT(t.EncodePair("b", "hello world you x", 6, &types), ElementsAre(7, 36, 5, 1, 2, 5));
  EXPECT_THAT(types, ElementsAre(0, 0, 0, 1, 1, 1));
  // 3 and 3 pieces into 7 ids: 2 off, b loses its last first (a tie), then a.
  EXPECT_THAT(t.EncodePair("hello world you", "x b hello", 7, &types),
              ElementsAre(7, 1, 2, 5, 30, 36, 5));
  // 3 and 3 into 6: 3 off: b, a, b.
  EXPECT_THAT(t.EncodePair("hello world you", "x b hello", 6, &types),
              ElementsAre(7, 1, 2, 5, 30, 5));
  // 4 and 1 into 5 (2 pieces): all 3 off a, which evens them out.
  EXPECT_THAT(t.EncodePair("hello world you x", "b", 5, &types), ElementsAre(7, 1, 5, 36, 5));
  // Nothing fits but the three specials.
  EXPECT_THAT(t.EncodePair("hello", "world", 3, &types), ElementsAre(7, 5, 5));
  EXPECT_THAT(types, ElementsAre(0, 0, 1));
  EXPECT_THAT(t.EncodePair("hello", "world", 1, &types), ElementsAre(7, 5, 5));
}

TEST(WordPieceTest, LiteralSpecialTokensStayWhole) {
  WordPieceTokenizer lower = Make(true);
  EXPECT_THAT(lower.TokenizeToIds("hello [MASK] world"), ElementsAre(1, 9, 2));
  EXPECT_THAT(lower.TokenizeToIds("hello[MASK]world"), ElementsAre(1, 9, 2));
  EXPECT_THAT(lower.Encode("[CLS] hello [SEP]", 512), ElementsAre(7, 7, 1, 5, 5));
  // Not a special token once lowercased by hand: split as punctuation, lowercased.
  EXPECT_THAT(lower.Tokenize("[mask]"), ElementsAre("[", "mask", "]"));
  // A control character inside stops the special match; uncased lowercases the letters.
  EXPECT_THAT(lower.Tokenize("[MA\x01SK]"), ElementsAre("[", "mask", "]"));
  // Cased: the cleaned word "[MASK]" is in never_split, so WordPiece sees it whole.
  WordPieceTokenizer cased = Make(false);
  EXPECT_THAT(cased.Tokenize("[MA\x01SK]"), ElementsAre("[MASK]"));
  EXPECT_THAT(cased.Tokenize("[Mask]"), ElementsAre("[", "[UNK]", "]"));
}

TEST(WordPieceTest, LowercasingFollowsPython) {
  WordPieceTokenizer lower = Make(true);
  // İ lowercases to "i" + U+0307, and the combining dot is then stripped as an accent.
  EXPECT_THAT(lower.Tokenize("İSTANBUL"), ElementsAre("istanbul"));
  EXPECT_THAT(Make(false).Tokenize("İstanbul"), ElementsAre("İstanbul"));
  // HF lowercases the text one character at a time first, so Σ never sees its word end:
  // the result ends in σ, not the final form ς.
  EXPECT_THAT(lower.Tokenize("ΟΔΟΣ"), ElementsAre("οδοσ"));
  // ß stays ß (no "ss" folding); capital ẞ lowercases to ß.
  EXPECT_THAT(lower.Tokenize("STRAẞE"), ElementsAre("straße"));
  EXPECT_THAT(lower.Tokenize("Straße"), ElementsAre("straße"));
}

TEST(WordPieceTest, InvalidUtf8NeverCrashesAndIsDropped) {
  WordPieceTokenizer t = Make(true);
  EXPECT_THAT(t.Tokenize("hel\xFFlo"), ElementsAre("hello"));
  // A truncated sequence must not swallow the ASCII byte after it.
  EXPECT_THAT(t.Tokenize("x\xE4\xB8"
                         "a"),
              ElementsAre("x", "##a"));
  EXPECT_THAT(t.Tokenize("x\xF0\x9F"
                         "a"),
              ElementsAre("x", "##a"));
  EXPECT_THAT(t.Tokenize("x\xED\xA0\x80"
                         "a"),
              ElementsAre("x", "##a"));  // a surrogate
  EXPECT_THAT(t.Tokenize("x\xC0\xAF"
                         "a"),
              ElementsAre("x", "##a"));  // overlong '/'
  EXPECT_THAT(t.Tokenize("\x80\x80\xF8"), IsEmpty());
}

TEST(Utf8Test, DecodingConsumesTheMaximalIllFormedSubpart) {
  // (input, bytes consumed by the first character, code point) per the Unicode recommendation
  // that Python's "replace" error handler follows.
  struct Case {
    std::string in;
    size_t used;
    char32_t cp;
  };
  const std::vector<Case> cases = {
      {"a", 1, 'a'},
      {"\xC3\xA9", 2, 0xE9},
      {"\xE6\x88\x91", 3, 0x6211},
      {"\xF0\x9F\x98\x80", 4, 0x1F600},
      {"\xEF\xBF\xBD", 3, 0xFFFD},
      {"\xE4\xB8"
       "a",
       2, 0xFFFD},  // truncated, then a fresh character
      {"\xF0\x9F\x98"
       "a",
       3, 0xFFFD},
      {"\xED\xA0\x80", 1, 0xFFFD},      // surrogate: the second byte is out of range
      {"\xE0\x80\x80", 1, 0xFFFD},      // overlong
      {"\xF4\x90\x80\x80", 1, 0xFFFD},  // past U+10FFFF
      {"\xC0\xAF", 1, 0xFFFD},
      {"\x80", 1, 0xFFFD},
      {"\xFF", 1, 0xFFFD},
  };
  for (const Case& c : cases) {
    char32_t cp = 0;
    EXPECT_EQ(DecodeUtf8Char(c.in, 0, &cp), c.used) << testing::PrintToString(c.in);
    EXPECT_EQ(cp, c.cp) << testing::PrintToString(c.in);
  }
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo \xEF\xBF\xBD \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xE4\xB8"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));
}

TEST(UnicodeTest, CharacterClassesFollowPython311) {
  EXPECT_TRUE(IsHfControl(0x200B));    // Cf
  EXPECT_TRUE(IsHfControl(0xE000));    // Co
  EXPECT_TRUE(IsHfControl(0x0378));    // Cn, unassigned everywhere
  EXPECT_TRUE(IsHfControl(0x1F6DC));   // So in Unicode 15, Cn in Python 3.11's 14.0
  EXPECT_FALSE(IsHfControl(0x1F6D7));  // elevator, assigned in 13.0
  EXPECT_FALSE(IsHfControl('\t'));
  EXPECT_TRUE(IsHfWhitespace(0x3000));
  EXPECT_FALSE(IsHfWhitespace(0x2028));    // Zl, not Zs
  EXPECT_TRUE(IsHfPunctuation('$'));       // Sc, but ASCII
  EXPECT_FALSE(IsHfPunctuation(0x20AC));   // € is Sc and not ASCII
  EXPECT_TRUE(IsHfPunctuation(0x3002));    // 。
  EXPECT_TRUE(IsHfChineseChar(0x2B739));   // in HF's range (and Cn in 14.0, so dropped first)
  EXPECT_FALSE(IsHfChineseChar(0x31350));  // CJK Extension H is outside HF's ranges
}

TEST(WordPieceTest, ConcurrentUseGivesTheSameIds) {
  WordPieceTokenizer t = Make(true);
  const std::string text = "Héllo wörld!! 我爱 unaffable [MASK] ΟΔΟΣ";
  const std::vector<int32_t> want = t.TokenizeToIds(text);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 2000; ++k) bad[i] += t.TokenizeToIds(text) != want;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(bad, ElementsAre(0, 0, 0, 0));
}

class VocabFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("wordpiece_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& data) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(VocabFileTest, LinesEndAtLfCrLfOrCr) {
  // No final newline; an empty line is a token; a duplicate's later id wins.
  std::string path = Write("vocab.txt", "[PAD]\r\n[UNK]\r[CLS]\n\n[SEP]\nhello\nhello");
  auto t = WordPieceTokenizer::FromVocabFile(path, true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab_size(), 7);
  EXPECT_EQ(t->special().pad, 0);
  EXPECT_EQ(t->special().unk, 1);
  EXPECT_EQ(t->special().cls, 2);
  EXPECT_EQ(t->token(3), "");
  EXPECT_EQ(t->special().sep, 4);
  EXPECT_EQ(t->TokenId("hello"), 6);
  EXPECT_THAT(t->Encode("hello", 8), ElementsAre(2, 6, 4));
}

TEST_F(VocabFileTest, MissingFileNamesThePath) {
  std::string path = (dir_ / "absent.txt").string();
  auto t = WordPieceTokenizer::FromVocabFile(path, true);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr(path));
}

TEST_F(VocabFileTest, EmptyFileIsAnError) {
  std::string path = Write("empty.txt", "");
  auto t = WordPieceTokenizer::FromVocabFile(path, true);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr(path));
  EXPECT_THAT(t.status().message(), HasSubstr("empty"));
}

TEST_F(VocabFileTest, InvalidUtf8NamesTheLine) {
  std::string path = Write("bad.txt", "[PAD]\n[UNK]\nab\xC3\n[CLS]\n[SEP]\n");
  auto t = WordPieceTokenizer::FromVocabFile(path, true);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), path + ":3: invalid UTF-8");
}

TEST_F(VocabFileTest, EachRequiredSpecialIsChecked) {
  const std::vector<std::string> required = {"[CLS]", "[SEP]", "[UNK]", "[PAD]"};
  for (const std::string& missing : required) {
    std::string data;
    for (const std::string& tok : required) {
      if (tok != missing) data += tok + "\n";
    }
    data += "[MASK]\nhello\n";
    std::string path = Write("v.txt", data);
    auto t = WordPieceTokenizer::FromVocabFile(path, true);
    ASSERT_FALSE(t.ok()) << missing;
    EXPECT_EQ(t.status().message(), path + ": vocab has no " + missing + " token");
  }
}

TEST(WordPieceVocabTest, FromTokensReportsTheSource) {
  auto t = WordPieceTokenizer::FromVocabTokens({"[CLS]", "[SEP]", "[UNK]"}, true, "my-source");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "my-source: vocab has no [PAD] token");
  auto e = WordPieceTokenizer::FromVocabTokens({}, true, "my-source");
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("my-source"));
}

TEST(WordPieceVocabTest, FromTextSplitsLinesAsTheFileReaderDoes) {
  auto t = WordPieceTokenizer::FromVocabText("[PAD]\r\n[UNK]\r[CLS]\n[SEP]\nhello", true, "mem");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab_size(), 5);
  EXPECT_EQ(t->TokenId("hello"), 4);
  auto bad = WordPieceTokenizer::FromVocabText("[PAD]\n[CLS]\n[SEP]\n", true, "mem");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("mem: vocab has no [UNK] token"));
}

// A vocab is a few MB at most; a huge file is refused before it is split into millions of
// strings (the limit applies to the file reader through ReadFile and to FromVocabText).
TEST(WordPieceVocabTest, RefusesOversizedVocab) {
  const std::string text(WordPieceTokenizer::kMaxVocabFileBytes + 1, 'a');
  auto t = WordPieceTokenizer::FromVocabText(text, true, "big.txt");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("big.txt: 67108865 bytes exceeds"));
  const std::string path = ::testing::TempDir() + "/wordpiece_big_vocab.txt";
  ASSERT_TRUE(WriteFileAtomic(path, text).ok());
  auto f = WordPieceTokenizer::FromVocabFile(path, true);
  std::remove(path.c_str());
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("over the limit of 67108864"));
}

}  // namespace
}  // namespace ringmaster::trainer
