// ctest-labels: unit;oracle
// Compares WordPieceTokenizer::Encode with Hugging Face's slow BertTokenizer, run through
// tests/oracle/hf_tokenize.py, on hand-picked tricky sentences, ~2000 seeded random ones drawn
// from many Unicode blocks, and ill-formed UTF-8, in both uncased and cased mode; and the fast
// mode (TokenizerCompat::kFast) with the fast BertTokenizerFast on the same lines plus one line
// per known difference between the two. Skips when RINGMASTER_PYTHON is unset or cannot import
// transformers or tokenizers (the script then exits 77).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "trainer/text/tokenizer_oracle_corpus.h"
#include "trainer/text/unicode_util.h"
#include "trainer/text/wordpiece.h"

namespace ringmaster::trainer {
namespace {

using namespace std::string_literals;  // for literals with NUL bytes inside
using jobspec::TokenizerCompat;
using namespace oracle_corpus;  // NOLINT(build/namespaces): the shared corpus and its helpers

class WordPieceOracleTest : public OracleScriptTest {
 protected:
  const char* ScriptName() const override { return "hf_tokenize.py"; }
  const char* Tag() const override { return "wordpiece_oracle"; }

  std::string UnidataVersion() {
    std::string out = (dir_ / "info.txt").string();
    std::string cmd =
        ShellQuote(python_) + " " + ShellQuote(script_) + " --info > " + ShellQuote(out);
    if (std::system(cmd.c_str()) != 0) return "";
    std::string v = ReadAll(out);
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
    return v;
  }

  // Writes the vocab and the cases for hf_tokenize.py.
  void WriteInputs(const OracleData& d, const std::vector<std::string>& cases) {
    std::ofstream vocab(dir_ / "vocab.txt", std::ios::binary);
    for (const std::string& tok : d.vocab) vocab << tok << "\n";
    std::ofstream input(dir_ / "input.jsonl", std::ios::binary);
    for (const std::string& c : cases) input << JsonLine(c) << "\n";
  }

  // The HF tokenizer's ids for each case (the slow one, or the fast one), into *want; skips the
  // test when the script cannot import what it needs.
  void RunHf(size_t n_cases, bool lower, bool fast, std::vector<std::vector<int32_t>>* want) {
    const std::string name =
        std::string("out_") + (lower ? "lower" : "cased") + (fast ? "_fast" : "");
    const std::string output_path = (dir_ / (name + ".txt")).string();
    const std::string log_path = (dir_ / "python.log").string();
    std::string cmd = ShellQuote(python_) + " " + ShellQuote(script_) + " --vocab " +
                      ShellQuote((dir_ / "vocab.txt").string()) + " --lower " +
                      (lower ? "1" : "0") + " --fast " + (fast ? "1" : "0") + " --input " +
                      ShellQuote((dir_ / "input.jsonl").string()) + " --output " +
                      ShellQuote(output_path) + " --max-length 512 2> " + ShellQuote(log_path);
    const int status = std::system(cmd.c_str());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
      GTEST_SKIP() << python_ << ": " << ReadAll(log_path);
    }
    ASSERT_EQ(status, 0) << cmd << "\n" << ReadAll(log_path);
    *want = ParseIdLines(ReadAll(output_path));
    ASSERT_EQ(want->size(), n_cases);
  }

  void CompareMode(const OracleData& d, const std::vector<std::string>& cases, bool lower,
                   TokenizerCompat compat = TokenizerCompat::kSlow) {
    const bool fast = compat == TokenizerCompat::kFast;
    SCOPED_TRACE(std::string(lower ? "uncased" : "cased") + (fast ? ", fast" : ", slow"));
    std::vector<std::vector<int32_t>> want;
    RunHf(cases.size(), lower, fast, &want);
    if (IsSkipped() || HasFatalFailure()) return;

    auto t = WordPieceTokenizer::FromVocabFile((dir_ / "vocab.txt").string(),
                                               {.do_lower_case = lower, .compat = compat});
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_EQ(t->vocab_size(), static_cast<int32_t>(d.vocab.size()));
    int mismatches = 0;
    size_t non_unk_pieces = 0, pieces = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      std::vector<int32_t> got = t->Encode(cases[i], 512);
      for (size_t k = 1; k + 1 < want[i].size(); ++k) {
        ++pieces;
        non_unk_pieces += want[i][k] != t->special().unk;
      }
      if (got == want[i]) continue;
      if (++mismatches <= 15) {
        ADD_FAILURE() << "case " << i << ": " << JsonLine(cases[i])
                      << "\n  HF:   " << Describe(*t, want[i]) << "\n  ours: " << Describe(*t, got);
      }
    }
    EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " cases";
    // The comparison only means something if most pieces hit the vocab.
    EXPECT_GT(non_unk_pieces, pieces / 2) << non_unk_pieces << " of " << pieces;
    std::printf("[ oracle ] %s %s: %zu cases, %zu pieces (%zu not [UNK]), %d mismatches\n",
                fast ? "fast" : "slow", lower ? "uncased" : "cased", cases.size(), pieces,
                non_unk_pieces, mismatches);
  }

  // Which lines HF's slow and fast tokenizers disagree on.
  std::vector<bool> SlowFastDifferences(size_t n_cases, bool lower) {
    std::vector<std::vector<int32_t>> slow, fast;
    RunHf(n_cases, lower, /*fast=*/false, &slow);
    RunHf(n_cases, lower, /*fast=*/true, &fast);
    std::vector<bool> differ(n_cases, false);
    for (size_t i = 0; i < slow.size() && i < fast.size(); ++i) differ[i] = slow[i] != fast[i];
    return differ;
  }
};

TEST_F(WordPieceOracleTest, MatchesHuggingFaceBertTokenizer) {
  const OracleData d = MakeOracleData();
  std::vector<std::string> cases = d.cases;
  // Our character classes are those of Python 3.11 (Unicode 14.0). Another Python classifies
  // the characters Unicode 15 added differently, so those cases are left out there.
  const std::string unidata = UnidataVersion();
  ASSERT_FALSE(unidata.empty());
  if (unidata != "14.0.0") {
    std::printf(
        "[ oracle ] Python's Unicode is %s, not 14.0.0: skipping cases with characters "
        "new in Unicode 15\n",
        unidata.c_str());
    std::erase_if(cases, HasNewUnicode15Char);
  }
  WriteInputs(d, cases);
  CompareMode(d, cases, /*lower=*/true);
  if (IsSkipped() || HasFatalFailure()) return;
  CompareMode(d, cases, /*lower=*/false);
}

// One line per difference between the fast and the slow tokenizer (fast_char_classes.h and
// wordpiece.h), each next to vocab words so that a wrong split shows.
std::vector<std::string> FastDifferenceCases() {
  return {
      "hello\U0002A6E0world the unassigned \U000E0001 and \uFFFE kept",   // Cn
      "un" + U8(0x0890) + "affable the" + U8(0x13430) + "world",          // new Cf
      "the " + U8(0x2B820) + U8(0x2B91F) + " world " + U8(0x2B920),       // CJK range
      "hello" + U8(0x061D) + "world the" + U8(0x2E43) + "of",             // new punctuation
      "hello" + U8(0x166D) + "world the" + U8(0x111C9) + "of",            // old punctuation
      "cafe" + U8(0x0898) + " the" + U8(0x1E000) + " of" + U8(0x1734),    // marks
      "the" + U8(0x11938) + "of " + U8(0x11935) + U8(0x11930),            // not decomposed
      "[MA\x01SK] [CL\u200BS] hello[SEP]world",                           // never_split
      "He\u0301llo cafe\u0301 \u037E \u1FEF \u2126 \uF900 ΣΑΣ İstanbul",  // no NFC
  };
}

TEST_F(WordPieceOracleTest, FastModeMatchesHuggingFaceBertTokenizerFast) {
  const OracleData d = MakeOracleData();
  std::vector<std::string> cases = d.cases;
  const size_t corpus = cases.size();
  for (const std::string& c : FastDifferenceCases()) cases.push_back(c);
  const std::string unidata = UnidataVersion();
  ASSERT_FALSE(unidata.empty());
  if (unidata != "14.0.0") {
    std::printf(
        "[ oracle ] Python's Unicode is %s, not 14.0.0: skipping cases with characters "
        "new in Unicode 15\n",
        unidata.c_str());
    std::erase_if(cases, HasNewUnicode15Char);
  }
  WriteInputs(d, cases);
  for (bool lower : {true, false}) {
    CompareMode(d, cases, lower, TokenizerCompat::kFast);
    if (IsSkipped() || HasFatalFailure()) return;
    // The comparison only tells the modes apart if HF's two tokenizers disagree on some lines.
    const std::vector<bool> differ = SlowFastDifferences(cases.size(), lower);
    if (HasFatalFailure()) return;
    const size_t n_corpus = std::min(corpus, cases.size());
    const auto in_corpus = std::count(differ.begin(), differ.begin() + n_corpus, true);
    const auto in_extra = std::count(differ.begin() + n_corpus, differ.end(), true);
    EXPECT_GT(in_corpus, 0);
    std::printf(
        "[ oracle ] %s: HF slow and fast differ on %td of the %zu corpus lines and %td "
        "of the %zu difference cases\n",
        lower ? "uncased" : "cased", in_corpus, n_corpus, in_extra, cases.size() - n_corpus);
  }
}

}  // namespace
}  // namespace ringmaster::trainer
