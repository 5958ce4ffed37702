// ctest-labels: unit;oracle
// Compares ByteBpeTokenizer with Hugging Face's RobertaTokenizer (slow) and RobertaTokenizerFast,
// run through tests/oracle/hf_bpe_tokenize.py, on the tokenizer corpus of the WordPiece oracle
// (hand-picked tricky sentences, ~2000 seeded random ones over many Unicode blocks, ill-formed
// UTF-8) plus RoBERTa-specific lines and sentence pairs. The vocabulary is a byte-level BPE that
// the `tokenizers` library trains on the same lines in the test's temp dir (nothing is
// downloaded). Both compat modes, with add_prefix_space off (RoBERTa's default) and on; the count
// of differing lines must be 0. Skips when RINGMASTER_PYTHON is unset or cannot import
// transformers or tokenizers (the script then exits 77).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "trainer/text/byte_bpe.h"
#include "trainer/text/tokenizer_oracle_corpus.h"
#include "trainer/text/unicode_util.h"

namespace ringmaster::trainer {
namespace {

using jobspec::TokenizerCompat;
using namespace oracle_corpus;  // NOLINT(build/namespaces): the shared corpus and its helpers

// Lines aimed at the byte-level pipeline: contractions, whitespace runs before text, RoBERTa's
// special tokens with the whitespace <mask> swallows (U+001C only for the slow tokenizer), and
// characters whose class the pattern depends on.
std::vector<std::string> RobertaCases() {
  return {
      "I'm sure you're right, it's what we'd've said: they'll see, I've seen, he'd go",
      "IT'S LOUD 'S 't 'RE ''s ' s",
      "hello  world   three    spaces\t\ttabs\n\nnewlines \n mixed",
      "trailing spaces   ",
      "   leading spaces",
      "<s>hello</s><pad><unk><mask>",
      "a <mask> b  <mask>c\t<mask>\n<mask> \u00A0<mask>\u3000<mask>\u0085<mask>",
      "lstrip\x1c<mask> and\x1d <mask> and \x1f<mask> separators",
      "<mask>start and end<mask>",
      "<Mask> <MASK> <mask <mas k> <<mask>> </s </S> <s> <s>> <pad>x<unk>",
      "numbers 123 4.56 7,890 ٣٤ ４５ ² ½ Ⅻ",
      "symbols $100 €50 ¥1000 #tag @user 50% a&b ~ ` ^ |",
      "emoji 😀😃 family 👨\u200D👩\u200D👧 skin 👍🏽 flag 🇫🇷",
      "new letters \U00011F04\U00011F05 kawi a\U00011F04b \U0001E4D0 \U00031350",
      "unassigned \u0558 \U00010D40 \U0002A6E0",
      "ill-formed \xFF bytes \xC3 here \xE4\xB8 and \xED\xA0\x80 surrogate",
      "",
      " ",
      "\t",
  };
}

// Sentence pairs: corpus lines side by side, so that longest_first truncation at a short
// length cuts a, b or both.
std::vector<std::string> PairLines(const std::vector<std::string>& cases, size_t n) {
  auto value = [](const std::string& s) {
    return IsValidUtf8(s) ? nlohmann::json(s) : nlohmann::json{{"hex", Hex(s)}};
  };
  // An empty text on either side: the fast tokenizer makes no pair of (a, "").
  std::vector<std::string> out = {
      nlohmann::json{{"pair", {value(cases[0]), ""}}}.dump(),
      nlohmann::json{{"pair", {"", value(cases[1])}}}.dump(),
      nlohmann::json{{"pair", {"", ""}}}.dump(),
  };
  Rng rng(11);
  for (size_t i = 0; i < n; ++i) {
    const std::string& a = cases[rng.Below(cases.size())];
    const std::string& b = cases[rng.Below(cases.size())];
    out.push_back(nlohmann::json{{"pair", {value(a), value(b)}}}.dump());
  }
  return out;
}

// The slow tokenizer's `regex` module has newer Unicode tables than this tokenizer (and the fast
// one), which use Unicode 14's: it counts letters and digits assigned since as \p{L} / \p{N}.
// RegexClasses reads the script's regex_classes.txt; DiffersFromRegex says whether `text` has a
// code point whose letter/number class differs between the two, so that such lines are left out
// of the comparison with the slow tokenizer.
struct ClassRange {
  char32_t first, last;
  char cls;  // 'L' or 'N'
};

std::vector<ClassRange> RegexClasses(const std::string& path) {
  std::vector<ClassRange> out;
  std::ifstream in(path);
  std::string cls, first, last;
  while (in >> cls >> first >> last) {
    out.push_back({static_cast<char32_t>(std::stoul(first, nullptr, 16)),
                   static_cast<char32_t>(std::stoul(last, nullptr, 16)), cls[0]});
  }
  std::sort(out.begin(), out.end(),
            [](const ClassRange& a, const ClassRange& b) { return a.first < b.first; });
  return out;
}

char RegexClass(const std::vector<ClassRange>& ranges, char32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t c, const ClassRange& r) { return c < r.first; });
  if (it == ranges.begin()) return 0;
  --it;
  return cp <= it->last ? it->cls : 0;
}

bool DiffersFromRegex(const std::vector<ClassRange>& ranges, const std::string& text) {
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp;
    pos += DecodeUtf8Char(text, pos, &cp);
    const int cat = PyCategory(cp);
    const char ours = cat >= 1 && cat <= 5 ? 'L' : cat >= 9 && cat <= 11 ? 'N' : 0;
    if (ours != RegexClass(ranges, cp)) return true;
  }
  return false;
}

constexpr int kMaxLen = 512, kMaxLenPairs = 40;

class ByteBpeOracleTest : public OracleScriptTest {
 protected:
  const char* ScriptName() const override { return "hf_bpe_tokenize.py"; }
  const char* Tag() const override { return "byte_bpe_oracle"; }

  // Runs the script with `args`; skips the test when it cannot import what it needs.
  void RunScript(const std::string& args) {
    const std::string log_path = (dir_ / "python.log").string();
    const std::string cmd = ShellQuote(python_) + " " + ShellQuote(script_) + " " + args + " 2> " +
                            ShellQuote(log_path);
    const int status = std::system(cmd.c_str());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
      GTEST_SKIP() << python_ << ": " << ReadAll(log_path);
    }
    ASSERT_EQ(status, 0) << cmd << "\n" << ReadAll(log_path);
  }
};

TEST_F(ByteBpeOracleTest, MatchesHuggingFaceRobertaTokenizers) {
  const OracleData d = MakeOracleData();
  std::vector<std::string> singles = d.cases;
  for (const std::string& c : RobertaCases()) singles.push_back(c);
  std::vector<std::string> lines;
  for (const std::string& c : singles) lines.push_back(JsonLine(c));
  const std::vector<std::string> pairs = PairLines(d.cases, 300);
  lines.insert(lines.end(), pairs.begin(), pairs.end());
  {
    std::ofstream input(dir_ / "input.jsonl", std::ios::binary);
    for (const std::string& l : lines) input << l << "\n";
  }
  // One run of the script (its start-up dominates): train the vocab, then HF's ids for every
  // line from both tokenizers, add_prefix_space off and on, into out.{slow,fast}[_prefix].
  const std::string input = ShellQuote((dir_ / "input.jsonl").string());
  RunScript("--train " + input + " --vocab-size 4000 --dir " + ShellQuote(dir_.string()) +
            " --input " + input + " --output " + ShellQuote((dir_ / "out").string()) +
            " --all-modes --max-length " + std::to_string(kMaxLen) + " --max-length-pairs " +
            std::to_string(kMaxLenPairs));
  if (IsSkipped() || HasFatalFailure()) return;
  const std::vector<ClassRange> regex_classes = RegexClasses((dir_ / "regex_classes.txt").string());
  ASSERT_GT(regex_classes.size(), 100u);

  for (bool prefix : {false, true}) {
    for (TokenizerCompat compat : {TokenizerCompat::kSlow, TokenizerCompat::kFast}) {
      const bool fast = compat == TokenizerCompat::kFast;
      const std::string mode =
          std::string(fast ? "fast" : "slow") + (prefix ? ", add_prefix_space" : "");
      SCOPED_TRACE(mode);
      const std::vector<std::vector<int32_t>> want = ParseIdLines(ReadAll(
          (dir_ / (std::string("out.") + (fast ? "fast" : "slow") + (prefix ? "_prefix" : "")))
              .string()));
      ASSERT_EQ(want.size(), lines.size());
      auto t = ByteBpeTokenizer::FromFiles((dir_ / "vocab.json").string(),
                                           (dir_ / "merges.txt").string(),
                                           {.add_prefix_space = prefix, .compat = compat});
      ASSERT_TRUE(t.ok()) << t.status();
      int mismatches = 0, compared = 0, left_out = 0, left_out_differ = 0;
      size_t pieces = 0, merged = 0;
      for (size_t i = 0; i < lines.size(); ++i) {
        std::vector<int32_t> got;
        bool newer;  // has a letter or digit newer than Unicode 14
        if (i < singles.size()) {
          got = t->Encode(singles[i], kMaxLen);
          newer = DiffersFromRegex(regex_classes, singles[i]);
        } else {
          const nlohmann::json p = nlohmann::json::parse(lines[i])["pair"];
          auto text = [](const nlohmann::json& v) {
            if (v.is_string()) return v.get<std::string>();
            std::string bytes, hex = v["hex"].get<std::string>();
            for (size_t k = 0; k + 1 < hex.size(); k += 2) {
              bytes += static_cast<char>(std::stoi(hex.substr(k, 2), nullptr, 16));
            }
            return bytes;
          };
          std::vector<int32_t> types;
          got = t->EncodePair(text(p[0]), text(p[1]), kMaxLenPairs, &types);
          newer = DiffersFromRegex(regex_classes, text(p[0])) ||
                  DiffersFromRegex(regex_classes, text(p[1]));
        }
        if (!fast && newer) {
          ++left_out;
          left_out_differ += got != want[i];
          continue;
        }
        ++compared;
        for (int32_t id : want[i]) {
          ++pieces;
          merged += id > 4 && CountUtf8Chars(t->token(id)) > 1;  // merged, not a special
        }
        if (got == want[i]) continue;
        if (++mismatches <= 10) {
          ADD_FAILURE() << "line " << i << ": " << lines[i] << "\n  HF:   " << Describe(*t, want[i])
                        << "\n  ours: " << Describe(*t, got);
        }
      }
      EXPECT_EQ(mismatches, 0) << "of " << compared << " lines";
      // The comparison means something only if the vocab merges most text into longer pieces.
      EXPECT_GT(t->merge_count(), 3000u);
      EXPECT_GT(merged, pieces / 3) << merged << " of " << pieces;
      std::printf(
          "[ oracle ] %s: %d lines compared (%d left out: a letter or digit newer than "
          "Unicode 14, of which %d differ), %zu ids (%zu longer than one byte), %d differ\n",
          mode.c_str(), compared, left_out, left_out_differ, pieces, merged, mismatches);
    }
  }
}

}  // namespace
}  // namespace ringmaster::trainer
