#include "trainer/text/byte_bpe.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "trainer/text/unicode_util.h"

namespace ringmaster::trainer {
namespace {

using jobspec::TokenizerCompat;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Sym(uint8_t b) {
  std::string s;
  AppendUtf8(ByteBpeTokenizer::ByteSymbol(b), &s);
  return s;
}

// A small RoBERTa-style vocab: the specials at RoBERTa's ids, the 256 byte symbols, and the
// results of kMerges, in rank order.
const std::vector<std::string> kMerges = {
    "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "e l", "' s",
};

std::string VocabJson(const std::vector<std::string>& merges = kMerges) {
  nlohmann::json j = nlohmann::json::object();
  int id = 0;
  for (const char* s : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}) j[s] = id++;
  for (int b = 0; b < 256; ++b) j[Sym(static_cast<uint8_t>(b))] = id++;
  for (const std::string& m : merges) {
    std::string merged = m;
    merged.erase(merged.find(' '), 1);
    if (!j.contains(merged)) j[merged] = id++;
  }
  return j.dump(1);
}

std::string MergesTxt(const std::vector<std::string>& merges = kMerges) {
  std::string s = "#version: 0.2\n";
  for (const std::string& m : merges) s += m + "\n";
  return s;
}

ByteBpeTokenizer Make(const ByteBpeOptions& options = {}) {
  auto t =
      ByteBpeTokenizer::FromText(VocabJson(), "vocab.json", MergesTxt(), "merges.txt", options);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(ByteBpeTest, BytesToUnicodeIsGpt2s) {
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol('!'), U'!');
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol('~'), U'~');
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol(0), 0x100);
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol(' '), 0x120);   // "Ġ"
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol('\n'), 0x10A);  // "Ċ"
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol(0x7F), 0x121);
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol(0xA0), 0x142);
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol(0xAD), 0x143);
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol(0xAE), 0xAE);
  EXPECT_EQ(ByteBpeTokenizer::ByteSymbol(0xFF), 0xFF);
}

TEST(ByteBpeTest, PreTokenizerFollowsGpt2Pattern) {
  EXPECT_THAT(ByteBpeTokenizer::PreTokenize("Hello world's  test!!  "),
              ElementsAre("Hello", " world", "'s", " ", " test", "!!", "  "));
  EXPECT_THAT(ByteBpeTokenizer::PreTokenize("it'S we're I'll 'd"),
              ElementsAre("it", "'", "S", " we", "'re", " I", "'ll", " '", "d"));
  EXPECT_THAT(ByteBpeTokenizer::PreTokenize("abc123 ４５ x\t\ty\n"),
              ElementsAre("abc", "123", " ４５", " x", "\t", "\t", "y", "\n"));
  EXPECT_THAT(ByteBpeTokenizer::PreTokenize("naïve 北京 ¥5 \u00A0a"),
              ElementsAre("naïve", " 北京", " ¥", "5", " ", "\u00A0", "a"));
  // U+001C is not \s (Python's isspace says it is); U+0085 and U+3000 are.
  EXPECT_THAT(ByteBpeTokenizer::PreTokenize("a\x1c b\u0085c\u3000"),
              ElementsAre("a", "\x1c", " b", "\u0085", "c", "\u3000"));
  // A letter Unicode 15 added (Kawi U+11F04) is not \p{L} for the fast tokenizer's tables.
  EXPECT_THAT(ByteBpeTokenizer::PreTokenize("a\U00011F04b"), ElementsAre("a", "\U00011F04", "b"));
  EXPECT_THAT(ByteBpeTokenizer::PreTokenize(""), ElementsAre());
}

TEST(ByteBpeTest, MergesByRank) {
  const ByteBpeTokenizer t = Make();
  EXPECT_THAT(t.Tokenize("hello world"), ElementsAre("hello", "Ġworld"));
  // "h e" ranks before "e l", so "hel" is "he" + "l", not "h" + "el".
  EXPECT_THAT(t.Tokenize("hel"), ElementsAre("he", "l"));
  EXPECT_THAT(t.Tokenize("el"), ElementsAre("el"));
  // Occurrences of a pair merge from left to right without overlapping.
  EXPECT_THAT(t.Tokenize("lll"), ElementsAre("ll", "l"));
  EXPECT_THAT(t.Tokenize("it's"), ElementsAre("i", "t", "'s"));
  // Again, from the cache.
  EXPECT_THAT(t.Tokenize("hello hello"), ElementsAre("hello", "Ġ", "hello"));  // no "Ġ h" merge
}

TEST(ByteBpeTest, BytesOfAnyCharacter) {
  const ByteBpeTokenizer t = Make();
  EXPECT_THAT(t.Tokenize("é\n"), ElementsAre(Sym(0xC3), Sym(0xA9), "Ċ"));
  // Ill-formed UTF-8 is read as U+FFFD, whose bytes are EF BF BD.
  EXPECT_THAT(t.Tokenize("\xFF"), ElementsAre("ï", "¿", "½"));
  EXPECT_THAT(t.Tokenize(std::string("\0", 1)), ElementsAre("Ā"));
}

TEST(ByteBpeTest, SpecialTokens) {
  const ByteBpeTokenizer t = Make();
  EXPECT_EQ(t.special().bos, 0);
  EXPECT_EQ(t.special().pad, 1);
  EXPECT_EQ(t.special().eos, 2);
  EXPECT_EQ(t.special().unk, 3);
  EXPECT_EQ(t.special().mask, 4);
  EXPECT_THAT(t.TokenizeToIds("<s><pad></s><unk><mask>"), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(t.Tokenize("hello</s>world"), ElementsAre("hello", "</s>", "w", "or", "ld"));
  EXPECT_THAT(t.Tokenize("hello <s> <S> <mas"),
              ElementsAre("hello", "Ġ", "<s>", "Ġ", "<", "S", ">", "Ġ", "<", "m", "a", "s"));
  // <mask> swallows the whitespace before it (not after); U+001C only in the slow mode.
  EXPECT_THAT(t.Tokenize("hello \t <mask> world"), ElementsAre("hello", "<mask>", "Ġworld"));
  EXPECT_THAT(t.Tokenize("hello\x1c<mask>"), ElementsAre("hello", "<mask>"));
  const ByteBpeTokenizer fast = Make({.compat = TokenizerCompat::kFast});
  EXPECT_THAT(fast.Tokenize("hello\x1c<mask>"), ElementsAre("hello", Sym(0x1C), "<mask>"));
}

TEST(ByteBpeTest, AddPrefixSpace) {
  const ByteBpeTokenizer slow = Make({.add_prefix_space = true});
  const ByteBpeTokenizer fast = Make({.add_prefix_space = true, .compat = TokenizerCompat::kFast});
  EXPECT_THAT(slow.Tokenize("world"), ElementsAre("Ġworld"));
  EXPECT_THAT(slow.Tokenize(" world"), ElementsAre("Ġworld"));
  EXPECT_THAT(slow.Tokenize("\tworld"), ElementsAre("ĉ", "w", "or", "ld"));
  // The slow tokenizer prefixes the whole text once, the fast one each piece.
  EXPECT_THAT(slow.Tokenize("<s>world</s>world"),
              ElementsAre("Ġ", "<s>", "w", "or", "ld", "</s>", "w", "or", "ld"));
  EXPECT_THAT(fast.Tokenize("<s>world</s>world"), ElementsAre("<s>", "Ġworld", "</s>", "Ġworld"));
  EXPECT_THAT(Make().Tokenize("world"), ElementsAre("w", "or", "ld"));
}

TEST(ByteBpeTest, EncodeAndTruncate) {
  const ByteBpeTokenizer t = Make();
  const int32_t hello = t.TokenId("hello"), world = t.TokenId("Ġworld");
  EXPECT_THAT(t.Encode("hello world", 512), ElementsAre(0, hello, world, 2));
  EXPECT_THAT(t.Encode("hello world", 3), ElementsAre(0, hello, 2));
  EXPECT_THAT(t.Encode("", 8), ElementsAre(0, 2));
  std::vector<int32_t> types;
  EXPECT_THAT(t.EncodePair("hello", "hello world", 512, &types),
              ElementsAre(0, hello, 2, 2, hello, world, 2));
  EXPECT_THAT(types, ElementsAre(0, 0, 0, 0, 0, 0, 0));
  // 4 + 2 pieces ("Ġ hello": no "Ġ h" merge) into 3: a loses two, then b (a tie) one.
  EXPECT_THAT(t.EncodePair("hello world hello", "hello world", 7, &types),
              ElementsAre(0, hello, world, 2, 2, hello, 2));
}

TEST(ByteBpeTest, FastModeEncodesAPairWithEmptySecondTextAsOneText) {
  const ByteBpeTokenizer slow = Make();
  const ByteBpeTokenizer fast = Make({.compat = TokenizerCompat::kFast});
  const int32_t hello = slow.TokenId("hello");
  std::vector<int32_t> types;
  EXPECT_THAT(slow.EncodePair("hello", "", 16, &types), ElementsAre(0, hello, 2, 2, 2));
  EXPECT_THAT(fast.EncodePair("hello", "", 16, &types), ElementsAre(0, hello, 2));
  EXPECT_THAT(types, ElementsAre(0, 0, 0));
  EXPECT_THAT(fast.EncodePair("", "hello", 16, &types), ElementsAre(0, 2, 2, hello, 2));
}

TEST(ByteBpeTest, TokenizerJsonModelMatchesFiles) {
  const std::string dir = ::testing::TempDir() + "/byte_bpe_json_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  nlohmann::json model = {{"type", "BPE"},
                          {"dropout", nullptr},
                          {"continuing_subword_prefix", ""},
                          {"vocab", nlohmann::json::parse(VocabJson())},
                          {"merges", kMerges}};
  model["merges"][1] = nlohmann::json::array({"l", "l"});  // the newer [a, b] form
  std::ofstream(dir + "/tokenizer.json") << nlohmann::json{{"model", model}}.dump();
  auto t = ByteBpeTokenizer::FromTokenizerJson(dir + "/tokenizer.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->Tokenize("hello world lll"), ElementsAre("hello", "Ġworld", "Ġ", "ll", "l"));
  model["type"] = "WordPiece";
  std::ofstream(dir + "/bad.json") << nlohmann::json{{"model", model}}.dump();
  auto bad = ByteBpeTokenizer::FromTokenizerJson(dir + "/bad.json");
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.json: model.type is 'WordPiece'"));
  std::filesystem::remove_all(dir);
}

TEST(ByteBpeTest, BadFilesNameFileAndLine) {
  auto err = [](const std::string& vocab, const std::string& merges) {
    auto t = ByteBpeTokenizer::FromText(vocab, "dir/vocab.json", merges, "dir/merges.txt");
    EXPECT_FALSE(t.ok());
    return std::string(t.status().message());
  };
  EXPECT_THAT(err(VocabJson(), MergesTxt({"h e", "q zz", "l l"})),
              HasSubstr("dir/merges.txt:3: merge \"q zz\" names \"zz\", which is not in "
                        "dir/vocab.json"));
  EXPECT_THAT(err(VocabJson({"h e"}), MergesTxt({"h e", "l l"})),
              HasSubstr("dir/merges.txt:3: merge \"l l\" makes \"ll\""));
  EXPECT_THAT(err(VocabJson(), "#version: 0.2\nh e\nhe  ll\n"),
              HasSubstr("dir/merges.txt:3: a merge is two tokens separated by one space"));
  EXPECT_THAT(err(VocabJson(), "#version: 0.2\n"), HasSubstr("dir/merges.txt: no merges"));
  EXPECT_THAT(err("{\n\"a\": 1,\n\"b\" 2}", MergesTxt()),
              HasSubstr("dir/vocab.json:3:5: malformed JSON"));
  EXPECT_THAT(err("{\"<s>\": 0,\n\"b\": -1}", MergesTxt()),
              HasSubstr("dir/vocab.json:2: token \"b\" has id -1, not a non-negative integer"));
  EXPECT_THAT(err("{\"<s>\": 0,\n\"b\": 0}", MergesTxt()),
              HasSubstr("dir/vocab.json:2: id 0 is used by both"));
  nlohmann::json v = nlohmann::json::parse(VocabJson());
  v.erase("</s>");
  EXPECT_THAT(err(v.dump(), MergesTxt()), HasSubstr("dir/vocab.json: vocab has no </s> token"));
  v = nlohmann::json::parse(VocabJson());
  v.erase(Sym(0xF5));
  EXPECT_THAT(err(v.dump(), MergesTxt()), HasSubstr("vocab has no symbol for byte 245"));
  const std::string dir = ::testing::TempDir() + "/byte_bpe_bad_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/vocab.json") << VocabJson();
  auto missing = ByteBpeTokenizer::FromFiles(dir + "/vocab.json", dir + "/merges.txt");
  EXPECT_THAT(missing.status().message(), HasSubstr(dir + "/merges.txt"));
  std::filesystem::remove_all(dir);
  // "\r\n" line ends and a merges file without the #version line are read.
  std::string crlf;
  for (const std::string& m : kMerges) crlf += m + "\r\n";
  auto t = ByteBpeTokenizer::FromText(VocabJson(), "v", crlf, "m");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->Tokenize("hello world"), ElementsAre("hello", "Ġworld"));
}

}  // namespace
}  // namespace ringmaster::trainer
