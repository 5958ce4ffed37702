// The tokenizer oracle corpus shared by the WordPiece and byte-level BPE oracle tests: a
// random BERT vocab whose words the sentences reuse, hand-picked tricky sentences, ~2000 seeded
// random sentences drawn from many Unicode blocks, and ill-formed UTF-8; plus the helpers both
// tests use to talk to the Python scripts in tests/oracle/. Test-only, header-only.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "trainer/text/unicode_util.h"

namespace ringmaster::trainer::oracle_corpus {

using namespace std::string_literals;  // for literals with NUL bytes inside

inline std::string U8(char32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

inline std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

inline std::string Hex(const std::string& s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// One JSON value per case: a string when it is valid UTF-8, else the bytes in hex.
inline std::string JsonLine(const std::string& text) {
  if (IsValidUtf8(text)) return nlohmann::json(text).dump();
  return nlohmann::json{{"hex", Hex(text)}}.dump();
}

// Deterministic generator; the distributions are spelled out so that every standard library
// produces the same cases.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t Below(uint64_t n) { return gen_() % n; }
  int64_t Between(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Below(hi - lo + 1)); }
  bool Chance(int percent) { return Below(100) < static_cast<uint64_t>(percent); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Below(v.size())];
  }

 private:
  std::mt19937_64 gen_;
};

struct CpRange {
  char32_t lo, hi;
};

// Blocks the random sentences draw from: scripts with case, accents and decompositions, CJK
// (all of HF's ranges and neighbours that are not in them), controls, format characters,
// private use, code points Unicode 15 added, unassigned and noncharacter code points.
inline const std::vector<CpRange>& FuzzRanges() {
  static const std::vector<CpRange> kRanges = {
      {0x00, 0x1F},       {0x20, 0x7E},         {0x7F, 0x9F},       {0xA0, 0xFF},
      {0x100, 0x17F},     {0x180, 0x24F},       {0x250, 0x2FF},     {0x300, 0x36F},
      {0x370, 0x3FF},     {0x400, 0x4FF},       {0x530, 0x5FF},     {0x600, 0x6FF},
      {0x900, 0x97F},     {0xE00, 0xE7F},       {0xCF0, 0xCF5},     {0x10A0, 0x10FF},
      {0x1100, 0x11FF},   {0x1680, 0x1680},     {0x180B, 0x180F},   {0x1E00, 0x1EFF},
      {0x1F00, 0x1FFF},   {0x2000, 0x206F},     {0x2100, 0x214F},   {0x2150, 0x218F},
      {0x2460, 0x24FF},   {0x2E80, 0x2FDF},     {0x3000, 0x303F},   {0x3040, 0x30FF},
      {0x3400, 0x4DBF},   {0x4E00, 0x4F00},     {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
      {0xAC00, 0xD7A3},   {0xD7B0, 0xD7FF},     {0xE000, 0xF8FF},   {0xF900, 0xFAFF},
      {0xFB00, 0xFB4F},   {0xFB50, 0xFDFF},     {0xFE00, 0xFE0F},   {0xFE30, 0xFE4F},
      {0xFF00, 0xFFEF},   {0xFFF0, 0xFFFF},     {0x10400, 0x1044F}, {0x11F00, 0x11F59},
      {0x13430, 0x13455}, {0x1D100, 0x1D1FF},   {0x1D400, 0x1D7FF}, {0x1E4D0, 0x1E4F9},
      {0x1F300, 0x1F64F}, {0x1F680, 0x1FAFF},   {0x20000, 0x2A6DF}, {0x2A6E0, 0x2A6FF},
      {0x2A700, 0x2B73F}, {0x2B740, 0x2B81F},   {0x2B820, 0x2CEAF}, {0x2CEB0, 0x2EBEF},
      {0x2F800, 0x2FA1F}, {0x30000, 0x3134F},   {0x31350, 0x323AF}, {0xE0000, 0xE01EF},
      {0xF0000, 0xF0010}, {0x10FFF0, 0x10FFFF}, {0x0, 0x10FFFF},
  };
  return kRanges;
}

// Single characters with known traps: case mappings that change length or differ by context,
// singleton decompositions, separators Python splits on, zero-width and format characters.
inline const std::vector<char32_t>& TrapChars() {
  static const std::vector<char32_t> kChars = {
      0x130,   0x131,   0x3A3,   0x3C2,  0x1E9E,  0xDF,   0x345,  0x1E9B, 0xFB01, 0x2126,
      0x212A,  0x212B,  0x200B,  0x200C, 0x200D,  0xFEFF, 0x2028, 0x2029, 0xA0,   0x3000,
      0x1680,  0x180E,  0x85,    0x0,    0xFFFD,  0xAD,   0x34F,  0x301,  0x308,  0x327,
      0x1F468, 0x1F3FD, 0xFE0F,  0x2060, 0x61C,   0x1C5,  0x1C4,  0x1F88, 0x390,  0x1D15E,
      0x2B739, 0x1F6DC, 0xE0041, 0xF900, 0x2F800, 0x9FFF, 0xA000, 0x3005, 0x30FC, 0xFF01,
  };
  return kChars;
}

// Syllable-built words, so that the vocab and the sentences share many words and sub-words.
inline std::vector<std::string> MakeWords(Rng& rng, int n) {
  const std::vector<std::string> onsets = {"b", "c", "d",  "f",  "g",  "h",  "j",  "k",
                                           "l", "m", "n",  "p",  "r",  "s",  "t",  "v",
                                           "w", "z", "th", "st", "pr", "ch", "sh", "qu"};
  const std::vector<std::string> vowels = {"a", "e", "i", "o", "u", "ou", "ea", "y"};
  const std::vector<std::string> codas = {"", "", "n", "r", "s", "t", "ng", "ck", "ll"};
  std::set<std::string> seen;
  std::vector<std::string> words;
  while (static_cast<int>(words.size()) < n) {
    std::string w;
    int syllables = static_cast<int>(rng.Between(1, 3));
    for (int i = 0; i < syllables; ++i) {
      w += rng.Pick(onsets) + rng.Pick(vowels) + rng.Pick(codas);
    }
    if (seen.insert(w).second) words.push_back(w);
  }
  return words;
}

struct OracleData {
  std::vector<std::string> vocab;
  std::vector<std::string> words;      // words the vocab knows whole
  std::vector<std::string> fragments;  // syllables, known as "##" continuations
  std::vector<std::string> cases;
};

inline std::vector<std::string> BuildVocab(Rng& rng, std::vector<std::string>* words,
                                           std::vector<std::string>* fragments) {
  std::vector<std::string> body;
  std::set<std::string> seen;
  auto add = [&](const std::string& tok) {
    if (seen.insert(tok).second) body.push_back(tok);
  };
  auto add_cp_range = [&](char32_t lo, char32_t hi, int step, bool continuation) {
    for (char32_t cp = lo; cp <= hi; cp += step) {
      add(U8(cp));
      if (continuation) add("##" + U8(cp));
    }
  };
  for (const char* w :
       {"the",    "of",     "and",    "to",      "in",       "is",       "was",  "hello", "world",
        "un",     "##aff",  "##able", "naive",   "naïve",    "café",     "cafe", "Café",  "über",
        "Über",   "uber",   "straße", "strasse", "İstanbul", "istanbul", "οδοσ", "οδος",  "ΟΔΟΣ",
        "москва", "Москва", "héllo",  "Héllo",   "mask",     "cls",      "##s",  "##ing", "##ed",
        "##ly",   "1",      "000",    "##000",   "emoji"}) {
    add(w);
  }
  add_cp_range(0x21, 0x7E, 1, true);       // ASCII
  add_cp_range(0xC0, 0xFF, 1, true);       // Latin-1 letters
  add_cp_range(0x100, 0x17F, 2, true);     // Latin Extended-A, every other one
  add_cp_range(0x1E00, 0x1EFF, 3, true);   // Vietnamese and friends
  add_cp_range(0x300, 0x36F, 1, true);     // combining marks (cased mode keeps them)
  add_cp_range(0x391, 0x3C9, 1, true);     // Greek
  add_cp_range(0x410, 0x44F, 1, true);     // Cyrillic
  add_cp_range(0x621, 0x64A, 1, true);     // Arabic
  add_cp_range(0x905, 0x94D, 1, true);     // Devanagari
  add_cp_range(0xE01, 0xE3A, 1, true);     // Thai
  add_cp_range(0x3041, 0x30FF, 1, true);   // kana
  add_cp_range(0x4E00, 0x4F00, 1, false);  // CJK, never continuations (always split)
  add_cp_range(0x8C48, 0x8C48, 1, false);  // NFC of U+F900
  add_cp_range(0x3400, 0x3440, 1, false);
  add_cp_range(0x20000, 0x20040, 1, false);
  add_cp_range(0xAC00, 0xAD00, 1, true);    // Hangul syllables
  add_cp_range(0x1100, 0x1112, 1, true);    // Hangul jamo
  add_cp_range(0x1F600, 0x1F64F, 1, true);  // emoji
  add_cp_range(0x2010, 0x2027, 1, false);   // general punctuation
  add_cp_range(0x3001, 0x3003, 1, false);
  add_cp_range(0xFF01, 0xFF5E, 4, true);    // fullwidth forms
  add_cp_range(0x10428, 0x1044F, 1, true);  // Deseret lowercase
  *words = MakeWords(rng, 1500);
  for (size_t i = 0; i < words->size(); ++i) {
    add((*words)[i]);
    if (i % 5 == 0) {  // some capitalized, for cased mode
      std::string cap = (*words)[i];
      cap[0] = static_cast<char>(cap[0] - 'a' + 'A');
      add(cap);
    }
  }
  for (const std::string& w : MakeWords(rng, 300)) {
    fragments->push_back(w);
    add("##" + w);
  }

  // Specials at unusual ids, an empty line and a duplicate (a later line wins in HF's dict).
  std::vector<std::string> vocab;
  const std::vector<std::pair<size_t, std::string>> placed = {
      {17, "[PAD]"},    {333, "[UNK]"}, {1001, "[CLS]"}, {2022, "[SEP]"},
      {2500, "[MASK]"}, {40, ""},       {2600, "the"}};
  size_t next_body = 0;
  while (next_body < body.size()) {
    auto it = std::find_if(placed.begin(), placed.end(),
                           [&](const auto& p) { return p.first == vocab.size(); });
    if (it != placed.end()) {
      vocab.push_back(it->second);
    } else {
      vocab.push_back(body[next_body++]);
    }
  }
  return vocab;
}

inline std::vector<std::string> HandPickedCases() {
  std::vector<std::string> c = {
      "Hello, world!",
      "Héllo Wörld, CAFÉ naïve über Straße",
      "He\u0301llo cafe\u0301 nai\u0308ve",  // decomposed accents
      "我爱北京天安门",
      "我爱you and 你",
      "mix中文and English字",
      "wow!!! really??? ...yes... --- ,,,",
      "tab\tseparated\twords\nand\nnewlines\r\nand\rreturns",
      "nbsp\u00A0ideographic\u3000ogham\u1680space en\u2002em\u2003",
      "line\u2028separator para\u2029separator",
      "zero\u200Bwidth zw\u200Cnj zw\u200Dj bom\uFEFFinside soft\u00ADhyphen",
      "emoji 😀😃 family 👨\u200D👩\u200D👧 skin 👍🏽 flag 🇫🇷 keycap "
      "1\uFE0F\u20E3",
      std::string(101, 'a') + " " + std::string(100, 'a') + " " + std::string(99, 'b'),
      "İstanbul İSTANBUL ıi Iİ",
      "Straße STRASSE ẞ groß",
      "ΟΔΟΣ οδος Σ σ ς ΣΑΣ",
      "combining a\u0300\u0301\u0302 q\u0301 x\u0323\u0307 \u0301alone",
      "[CLS] hello [SEP] world [MASK] [PAD] [UNK]",
      "hello[MASK]world[SEP][CLS][CLS]",
      "[mask] [Mask] [MASK [MASK\u200B] [MA\x01SK] [CL\x00S] [[CLS]] [ [CLS"s,
      "1,234,567.89 and 3.14159 and 10,000",
      "$100 €50 ¥1000 £20 #hashtag @user 50% a&b a^b a`b a~b a|b",
      "«quotes» “curly” ‘single’ „low“ —dash– …ellipsis",
      "control\x01\x02\x03"
      "chars\x7F\u0080\u009Fhere",
      std::string("nul\0inside", 10),
      "replacement\uFFFDchar and private\uE000use \U000F0000",
      "Ωhm \u2126 Kelvin \u212A Ångström \u212B ﬁne ligature",
      "CJK compat \uF900\uF901 \U0002F800 radicals ⺀⻳",
      "Hangul 한국어 jamo \u1100\u1161\u11A8 composed",
      "Ǆemal ǅemal ǆemal",
      "ＦＵＬＬＷＩＤＴＨ ｆｕｌｌ！",
      "𐐀𐐁 Deseret 𐐨",
      "Arabic مرحبا Hebrew שלום Devanagari नमस्ते Thai สวัสดี",
      "Vietnamese Tiếng Việt có dấu",
      "Greek ᾈ ΐ ᾷ",
      "   leading and trailing   ",
      "",
      " ",
      "\t\n",
      "a",
      "unaffable",
      "ends with combining\u0301",
      // Dropped characters between a letter and its accent: the accent still composes.
      "cafe\x01\u0301 cafe\u200B\u0301 cafe\u0085\u0301 cafe \u0301 cafe\t\u0301",
      "new in Unicode 15: \U0001F6DC \U00031350 \U0002B739 \u0CF3 kawi \U00011F00",
      "unassigned \U0002A6E0 \U000E0001 noncharacter \uFFFE\uFFFF",
      "musical \U0001D15E\U0001D15F math \U0001D400\U0001D41A",
      "ypogegrammeni ᾼ \u0345 ΑΙ\u0345",
  };
  // Long inputs: over 512 pieces, so that truncation matters.
  std::string long_text;
  for (int i = 0; i < 700; ++i) long_text += (i % 7 == 0 ? "hello, " : "world ");
  c.push_back(long_text);
  std::string long_cjk;
  for (int i = 0; i < 600; ++i) long_cjk += U8(0x4E00 + (i % 200));
  c.push_back(long_cjk);
  return c;
}

inline std::string RandomWord(Rng& rng, const OracleData& d) {
  const int kind = static_cast<int>(rng.Below(100));
  if (kind < 35) {  // a vocab word, maybe recased, maybe with accents or a fragment
    std::string w = rng.Pick(d.words);
    if (rng.Chance(20)) w += rng.Pick(d.fragments);
    if (rng.Chance(25)) {
      w[0] = static_cast<char>(w[0] - 'a' + 'A');
    } else if (rng.Chance(10)) {
      for (char& ch : w) ch = static_cast<char>(ch - 'a' + 'A');
    }
    if (rng.Chance(20)) {
      // Accent one letter, composed or decomposed.
      size_t at = rng.Below(w.size());
      std::string mark = U8(rng.Pick(std::vector<char32_t>{0x300, 0x301, 0x308, 0x327, 0x303}));
      if (rng.Chance(50)) {
        w.insert(at + 1, mark);
      } else {
        w.replace(at, 1, U8(rng.Pick(std::vector<char32_t>{0xE9, 0xC9, 0xFC, 0xF1, 0xE7, 0x130})));
      }
    }
    return w;
  }
  if (kind < 65) {  // random code points, mostly from one block
    const CpRange& r = rng.Pick(FuzzRanges());
    std::string w;
    int n = static_cast<int>(rng.Between(1, 6));
    for (int i = 0; i < n; ++i) {
      const CpRange& rr = rng.Chance(85) ? r : rng.Pick(FuzzRanges());
      char32_t cp = static_cast<char32_t>(rng.Between(rr.lo, rr.hi));
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
      AppendUtf8(cp, &w);
    }
    return w;
  }
  if (kind < 72) {  // punctuation runs
    static const std::vector<std::string> kPunct = {"!", "?", ".", ",", "-", "'",  "\"", "(",
                                                    ")", "…", "—", "«", "»", "、", "。", "＃"};
    std::string w;
    int n = static_cast<int>(rng.Between(1, 4));
    for (int i = 0; i < n; ++i) w += rng.Pick(kPunct);
    return w;
  }
  if (kind < 77) {  // special tokens, whole and broken
    static const std::vector<std::string> kSpecial = {
        "[CLS]", "[SEP]", "[UNK]",    "[PAD]",        "[MASK]",    "[mask]",
        "[MASK", "MASK]", "[[MASK]]", "[MA\u200BSK]", "[CL\x01S]", "x[SEP]y"};
    return rng.Pick(kSpecial);
  }
  if (kind < 82) {  // numbers
    std::string w = std::to_string(rng.Between(0, 999));
    // Appended in two steps: `"," + std::string` trips a GCC 12 -Wrestrict false positive.
    while (rng.Chance(40)) {
      w += ',';
      w += std::to_string(rng.Between(100, 999));
    }
    if (rng.Chance(30)) {
      w += '.';
      w += std::to_string(rng.Between(0, 99));
    }
    return w;
  }
  if (kind < 90) {  // CJK runs the vocab mostly knows
    std::string w;
    int n = static_cast<int>(rng.Between(1, 5));
    for (int i = 0; i < n; ++i) AppendUtf8(static_cast<char32_t>(rng.Between(0x4E00, 0x4F10)), &w);
    return w;
  }
  if (kind < 93) {  // over-long words around the 100-character limit
    std::string w;
    int n = static_cast<int>(rng.Between(95, 105));
    const std::string unit = rng.Chance(50) ? "a" : "é";
    for (int i = 0; i < n; ++i) w += unit;
    return w;
  }
  return U8(rng.Pick(TrapChars()));
}

inline std::string RandomSentence(Rng& rng, const OracleData& d) {
  static const std::vector<std::string> kSeparators = {
      " ",    " ",      " ",      " ",      " ",      "  ", "\t",   "\n",
      "\r\n", "\u00A0", "\u3000", "\u2028", "\u200B", "",   "\x01", "\u0085"};
  std::string s;
  int n = static_cast<int>(rng.Between(1, 25));
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += rng.Pick(kSeparators);
    s += RandomWord(rng, d);
  }
  return s;
}

// Breaks valid UTF-8: stray continuation bytes, truncated sequences, invalid leads, encoded
// surrogates and overlongs.
inline std::string Corrupt(Rng& rng, std::string s) {
  static const std::vector<std::string> kBad = {
      "\x80",     "\xBF",         "\xC0\xAF",         "\xC1", "\xE0\x80", "\xED\xA0\x80",
      "\xF0\x9F", "\xF0\x9F\x98", "\xF4\x90\x80\x80", "\xF5", "\xFF",     "\xFE",
      "\xE4\xB8", "\xC3"};
  int edits = static_cast<int>(rng.Between(1, 3));
  for (int i = 0; i < edits; ++i) {
    size_t at = s.empty() ? 0 : rng.Below(s.size() + 1);
    if (rng.Chance(50) || s.empty()) {
      s.insert(at, rng.Pick(kBad));
    } else if (at < s.size()) {
      s.erase(at, 1);  // often cuts a multi-byte character
    }
  }
  return s;
}

inline std::string Getenv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// RINGMASTER_WORDPIECE_FUZZ_SEED / _CASES allow a deeper run by hand; the defaults are fixed.
inline OracleData MakeOracleData() {
  OracleData d;
  Rng vocab_rng(20240611);
  d.vocab = BuildVocab(vocab_rng, &d.words, &d.fragments);
  d.cases = HandPickedCases();
  const std::string seed = Getenv("RINGMASTER_WORDPIECE_FUZZ_SEED");
  const std::string count = Getenv("RINGMASTER_WORDPIECE_FUZZ_CASES");
  Rng rng(seed.empty() ? 7 : std::stoull(seed));
  const int n = count.empty() ? 2000 : std::stoi(count);
  for (int i = 0; i < n; ++i) d.cases.push_back(RandomSentence(rng, d));
  for (int i = 0; i < n / 10; ++i) d.cases.push_back(Corrupt(rng, RandomSentence(rng, d)));
  return d;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::vector<int32_t>> ParseIdLines(const std::string& data) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(data);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    int64_t id;
    while (ids >> id) v.push_back(static_cast<int32_t>(id));
    out.push_back(std::move(v));
  }
  return out;
}

inline bool HasNewUnicode15Char(const std::string& text) {
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp;
    pos += DecodeUtf8Char(text, pos, &cp);
    if (IsNewInUnicode15(cp)) return true;
  }
  return false;
}

// Ids with their tokens ("12(he) 40(##llo) "), for failure messages; any tokenizer with
// vocab_size() and token(id).
template <typename Tokenizer>
std::string Describe(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    out += std::to_string(id);
    if (id >= 0 && id < t.vocab_size()) out += "(" + t.token(id) + ")";
    out += " ";
  }
  return out;
}

// A test against a Python oracle script in tests/oracle/: skips where RINGMASTER_PYTHON or
// RINGMASTER_SOURCE_DIR is unset, gives each test a scratch directory `dir_` (removed after), and
// `script_` the script's path.
class OracleScriptTest : public ::testing::Test {
 protected:
  // The script's file name under tests/oracle/ and the scratch directory's prefix.
  virtual const char* ScriptName() const = 0;
  virtual const char* Tag() const = 0;

  void SetUp() override {
    python_ = Getenv("RINGMASTER_PYTHON");
    source_dir_ = Getenv("RINGMASTER_SOURCE_DIR");
    if (python_.empty()) GTEST_SKIP() << "RINGMASTER_PYTHON is not set";
    if (source_dir_.empty()) GTEST_SKIP() << "RINGMASTER_SOURCE_DIR is not set";
    dir_ = std::filesystem::temp_directory_path() /
           (std::string(Tag()) + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    script_ = source_dir_ + "/tests/oracle/" + ScriptName();
    ASSERT_TRUE(std::filesystem::exists(script_)) << script_;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string python_, source_dir_, script_;
  std::filesystem::path dir_;
};

}  // namespace ringmaster::trainer::oracle_corpus
