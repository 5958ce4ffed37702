#include "trainer/text/byte_bpe.h"

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/json_limits.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "trainer/text/unicode_util.h"

namespace ringmaster::trainer {

struct ByteBpeTokenizer::Cache {
  std::mutex mu;
  absl::flat_hash_map<std::string, std::vector<int32_t>> pieces;
};

namespace {

// The cache is cleared when it reaches this many pieces, so odd text cannot grow it unbounded.
constexpr size_t kMaxCachedPieces = size_t{1} << 17;

// RobertaTokenizer's special tokens, which HF cuts out of the text first (its added-tokens trie).
// None is a prefix of another, so the first match at a '<' is the longest one.
enum SpecialIndex { kBos, kEos, kUnk, kPad, kMask };
constexpr std::string_view kSpecialLiterals[5] = {"<s>", "</s>", "<unk>", "<pad>", "<mask>"};

absl::string_view AbslView(std::string_view v) { return absl::string_view(v.data(), v.size()); }

// GPT-2's pre-tokenizer classes.
enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

// \s of both HF tokenizers' regex engines (the same 25 code points, measured): Unicode
// White_Space less U+001C-U+001F, which Python's str.isspace adds.
bool IsRegexSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// What <mask> swallows before it: Python's str.isspace (slow) or Rust's char::is_whitespace
// (fast, the same as \s here).
bool IsStripSpace(char32_t c, bool fast) {
  return IsRegexSpace(c) || (!fast && c >= 0x1C && c <= 0x1F);
}

CharClass Classify(char32_t c) {
  if (IsRegexSpace(c)) return CharClass::kSpace;
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::kLetter;
    if (c >= '0' && c <= '9') return CharClass::kNumber;
    return CharClass::kOther;
  }
  const int cat = PyCategory(c);  // Unicode 14, as the fast tokenizer's tables
  if (cat >= 1 && cat <= 5) return CharClass::kLetter;   // Lu Ll Lt Lm Lo
  if (cat >= 9 && cat <= 11) return CharClass::kNumber;  // Nd Nl No
  return CharClass::kOther;
}

// The contractions GPT-2's pattern tries first: 's 't 're 've 'm 'll 'd (case-sensitive).
size_t ContractionLength(const std::u32string& t, size_t i) {
  if (t[i] != '\'' || i + 1 >= t.size()) return 0;
  const char32_t a = t[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= t.size()) return 0;
  const char32_t b = t[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// The end of the match of GPT-2's pattern that starts at `i` (< t.size()). Every position
// matches one of the alternatives, so the matches tile the text.
size_t MatchEnd(const std::u32string& t, const std::vector<CharClass>& cls, size_t i) {
  const size_t n = t.size();
  if (size_t len = ContractionLength(t, i); len > 0) return i + len;
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional ' ' then a run of one class.
  const size_t start = (t[i] == ' ' && i + 1 < n && cls[i + 1] != CharClass::kSpace) ? i + 1 : i;
  if (cls[start] != CharClass::kSpace) {
    size_t j = start + 1;
    while (j < n && cls[j] == cls[start]) ++j;
    return j;
  }
  // "\s+(?!\S)": the whitespace run, less its last character when text follows it (that
  // character then starts the next match, e.g. " word"); "\s+" when the run is one character.
  size_t j = i + 1;
  while (j < n && cls[j] == CharClass::kSpace) ++j;
  if (j < n && j - i >= 2) return j - 1;
  return j;
}

// Line and column (1-based) of byte `offset` in `text`.
std::pair<size_t, size_t> LineOf(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

absl::Status Invalid(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(AbslView(source), ": ", AbslView(what)));
}

absl::StatusOr<nlohmann::json> ParseJsonWithLine(std::string_view text, std::string_view source) {
  RM_RETURN_IF_ERROR(CheckJsonDepth(text, std::string(source)));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    auto [line, col] = LineOf(text, e.byte > 0 ? e.byte - 1 : 0);
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ":", line, ":", col, ": malformed JSON (", e.what(), ")"));
  }
}

using Vocab = absl::flat_hash_map<std::string, int32_t>;

// vocab.json's object into *vocab; the line of a bad entry is found by searching for its key.
absl::Status ReadVocabObject(const nlohmann::json& j, std::string_view text,
                             std::string_view source, Vocab* vocab) {
  if (!j.is_object()) return Invalid(source, "not a JSON object of token -> id");
  if (j.empty()) return Invalid(source, "vocab is empty");
  absl::flat_hash_map<int32_t, std::string> by_id;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& v = it.value();
    auto where = [&]() {
      const size_t at = text.find(nlohmann::json(it.key()).dump());
      if (at == std::string_view::npos) return std::string(source);
      return absl::StrCat(AbslView(source), ":", LineOf(text, at).first);
    };
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() >= std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": token ", JsonExcerpt(nlohmann::json(it.key())), " has id ",
                       JsonExcerpt(v), ", not a non-negative integer"));
    }
    const int32_t id = static_cast<int32_t>(v.get<int64_t>());
    auto [prev, fresh] = by_id.emplace(id, it.key());
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": id ", id, " is used by both ", JsonExcerpt(nlohmann::json(prev->second)),
          " and ", JsonExcerpt(nlohmann::json(it.key()))));
    }
    (*vocab)[it.key()] = id;
  }
  return absl::OkStatus();
}

}  // namespace

char32_t ByteBpeTokenizer::ByteSymbol(uint8_t b) {
  // bytes_to_unicode: '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves; the
  // other 68 bytes, in order, become U+0100, U+0101, ...
  static const auto kTable = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 0x100;
    for (int c = 0; c < 256; ++c) {
      const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      t[static_cast<size_t>(c)] = printable ? static_cast<char32_t>(c) : next++;
    }
    return t;
  }();
  return kTable[b];
}

absl::StatusOr<ByteBpeTokenizer> ByteBpeTokenizer::FromFiles(const std::string& vocab_json_path,
                                                             const std::string& merges_path,
                                                             const ByteBpeOptions& options) {
  RM_ASSIGN_OR_RETURN(std::string vocab, ReadFile(vocab_json_path, kMaxFileBytes));
  RM_ASSIGN_OR_RETURN(std::string merges, ReadFile(merges_path, kMaxFileBytes));
  return FromText(vocab, vocab_json_path, merges, merges_path, options);
}

absl::StatusOr<ByteBpeTokenizer> ByteBpeTokenizer::FromText(std::string_view vocab_json,
                                                            std::string_view vocab_source,
                                                            std::string_view merges_text,
                                                            std::string_view merges_source,
                                                            const ByteBpeOptions& options) {
  RM_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJsonWithLine(vocab_json, vocab_source));
  ByteBpeTokenizer t;
  RM_RETURN_IF_ERROR(ReadVocabObject(j, vocab_json, vocab_source, &t.vocab_));

  std::vector<MergeSpec> merges;
  size_t line_no = 0;
  for (size_t start = 0; start < merges_text.size();) {
    size_t end = merges_text.find('\n', start);
    if (end == std::string_view::npos) end = merges_text.size();
    std::string_view line = merges_text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("#version")) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(merges_source), ":", line_no,
                       ": a merge is two tokens separated by one space, got ",
                       JsonExcerpt(nlohmann::json(std::string(line)))));
    }
    merges.push_back({std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)),
                      absl::StrCat(AbslView(merges_source), ":", line_no)});
  }
  if (merges.empty()) return Invalid(merges_source, "no merges");
  return Build(std::move(t), merges, vocab_source, options);
}

absl::StatusOr<ByteBpeTokenizer> ByteBpeTokenizer::Build(ByteBpeTokenizer t,
                                                         const std::vector<MergeSpec>& merges,
                                                         std::string_view vocab_source,
                                                         const ByteBpeOptions& options) {
  t.options_ = options;
  int32_t max_id = -1;
  for (const auto& [tok, id] : t.vocab_) max_id = std::max(max_id, id);
  t.tokens_.assign(static_cast<size_t>(max_id) + 1, std::string());
  for (const auto& [tok, id] : t.vocab_) t.tokens_[static_cast<size_t>(id)] = tok;

  const struct {
    SpecialIndex index;
    int32_t* id;
    bool required;
  } specials[] = {{kBos, &t.special_.bos, true},
                  {kEos, &t.special_.eos, true},
                  {kUnk, &t.special_.unk, true},
                  {kPad, &t.special_.pad, true},
                  {kMask, &t.special_.mask, false}};
  for (const auto& s : specials) {
    *s.id = t.TokenId(kSpecialLiterals[s.index]);
    if (*s.id < 0 && s.required) {
      return Invalid(vocab_source,
                     absl::StrCat("vocab has no ", AbslView(kSpecialLiterals[s.index]), " token"));
    }
  }
  for (int b = 0; b < 256; ++b) {
    std::string sym;
    AppendUtf8(ByteSymbol(static_cast<uint8_t>(b)), &sym);
    t.byte_ids_[b] = t.TokenId(sym);
    if (t.byte_ids_[b] < 0) {
      return Invalid(vocab_source, absl::StrCat("vocab has no symbol for byte ", b, " (\"", sym,
                                                "\"): not a byte-level BPE vocab"));
    }
  }

  t.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const MergeSpec& m = merges[rank];
    const int32_t left = t.TokenId(m.left), right = t.TokenId(m.right);
    const int32_t merged = t.TokenId(m.left + m.right);
    for (const auto& [tok, id] : {std::pair(&m.left, left), std::pair(&m.right, right),
                                  std::pair((const std::string*)nullptr, merged)}) {
      if (id >= 0) continue;
      const std::string name = tok != nullptr ? *tok : m.left + m.right;
      return absl::InvalidArgumentError(
          absl::StrCat(m.where, ": merge ", JsonExcerpt(nlohmann::json(m.left + " " + m.right)),
                       tok != nullptr ? " names " : " makes ", JsonExcerpt(nlohmann::json(name)),
                       ", which is not in ", AbslView(vocab_source)));
    }
    // A pair listed twice keeps its later rank, as both HF tokenizers' dicts do.
    t.merges_[(uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right)] = {
        static_cast<int32_t>(rank), merged};
  }
  t.cache_ = std::make_shared<Cache>();
  return t;
}

absl::StatusOr<ByteBpeTokenizer> ByteBpeTokenizer::FromTokenizerJson(
    const std::string& path, const ByteBpeOptions& options) {
  RM_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxFileBytes));
  RM_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJsonWithLine(text, path));
  auto bad = [&path](const std::string& what) { return Invalid(path, what); };
  if (!j.is_object()) return bad("not a JSON object");
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object()) return bad("has no \"model\" object");
  const std::string type = model->value("type", std::string());
  if (type != "BPE") return bad(absl::StrCat("model.type is '", type, "', not BPE"));
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model->find(key);
    if (it != model->end() && !it->is_null() &&
        !(it->is_string() && it->get<std::string>().empty())) {
      return bad(absl::StrCat("model.", key, " is ", JsonExcerpt(*it),
                              "; only plain byte-level BPE (RoBERTa's, GPT-2's) is supported"));
    }
  }
  const auto vocab = model->find("vocab");
  if (vocab == model->end()) return bad("has no model.vocab");
  ByteBpeTokenizer t;
  RM_RETURN_IF_ERROR(ReadVocabObject(*vocab, text, absl::StrCat(path, ": model.vocab"), &t.vocab_));
  const auto list = model->find("merges");
  if (list == model->end() || !list->is_array()) return bad("has no model.merges list");
  std::vector<MergeSpec> merges;
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& m = (*list)[i];
    std::string where = absl::StrCat(path, ": model.merges[", i, "]");
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp != std::string::npos && sp > 0 && sp + 1 < s.size() &&
          s.find(' ', sp + 1) == std::string::npos) {
        merges.push_back({s.substr(0, sp), s.substr(sp + 1), std::move(where)});
        continue;
      }
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.push_back({m[0].get<std::string>(), m[1].get<std::string>(), std::move(where)});
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a merge is \"a b\" or [\"a\", \"b\"], got ", JsonExcerpt(m)));
  }
  if (merges.empty()) return bad("model.merges is empty");
  return Build(std::move(t), merges, absl::StrCat(path, ": model.vocab"), options);
}

int32_t ByteBpeTokenizer::TokenId(std::string_view token) const {
  auto it = vocab_.find(AbslView(token));
  return it == vocab_.end() ? -1 : it->second;
}

void ByteBpeTokenizer::Merge(std::string_view piece, std::vector<int32_t>* out) const {
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = cache_->pieces.find(AbslView(piece));
    if (it != cache_->pieces.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // HF's bpe(): repeatedly merge the adjacent pair of lowest rank, every occurrence of it from
  // left to right, until no adjacent pair is a merge.
  std::vector<int32_t> word;
  word.reserve(piece.size());
  for (char c : piece) word.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  auto lookup = [this](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t>* {
    auto it = merges_.find((uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  while (word.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max(), left = -1, right = -1, merged = -1;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const auto* m = lookup(word[i], word[i + 1]);
      if (m != nullptr && m->first < best_rank) {
        best_rank = m->first;
        left = word[i];
        right = word[i + 1];
        merged = m->second;
      }
    }
    if (merged < 0) break;
    size_t w = 0;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        word[w++] = merged;
        i += 2;
      } else {
        word[w++] = word[i++];
      }
    }
    word.resize(w);
  }
  out->insert(out->end(), word.begin(), word.end());
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (cache_->pieces.size() >= kMaxCachedPieces) cache_->pieces.clear();
  cache_->pieces.emplace(std::string(piece), std::move(word));
}

template <typename Emit>
void ByteBpeTokenizer::RunSegment(std::string_view seg, bool prefix_space, Emit& emit) const {
  thread_local std::u32string cps;
  thread_local std::vector<CharClass> cls;
  thread_local std::string piece;
  thread_local std::vector<int32_t> ids;
  cps.clear();
  if (prefix_space) cps.push_back(' ');
  for (size_t pos = 0; pos < seg.size();) {
    char32_t cp;
    pos += DecodeUtf8Char(seg, pos, &cp);  // ill-formed bytes become U+FFFD
    cps.push_back(cp);
  }
  cls.resize(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) cls[i] = Classify(cps[i]);
  for (size_t i = 0; i < cps.size();) {
    const size_t end = MatchEnd(cps, cls, i);
    piece.clear();
    for (size_t k = i; k < end; ++k) AppendUtf8(cps[k], &piece);
    ids.clear();
    Merge(piece, &ids);
    for (int32_t id : ids) emit(id);
    i = end;
  }
}

template <typename Emit>
void ByteBpeTokenizer::Run(std::string_view text, Emit&& emit) const {
  const bool fast = options_.compat == jobspec::TokenizerCompat::kFast;
  if (options_.add_prefix_space && !fast && !text.empty()) {
    // The slow tokenizer puts the space before the whole text, special tokens and all, unless it
    // starts with whitespace (str.isspace).
    char32_t first;
    DecodeUtf8Char(text, 0, &first);
    if (!IsStripSpace(first, /*fast=*/false)) {
      std::string spaced = " ";
      spaced += text;
      RunSpecials(spaced, emit);
      return;
    }
  }
  RunSpecials(text, emit);
}

template <typename Emit>
void ByteBpeTokenizer::RunSpecials(std::string_view text, Emit& emit) const {
  const bool fast = options_.compat == jobspec::TokenizerCompat::kFast;
  auto segment = [&](std::string_view seg) {
    if (seg.empty()) return;
    // The fast tokenizer's ByteLevel pre-tokenizer prefixes each piece that lacks a ' '.
    RunSegment(seg, options_.add_prefix_space && fast && seg.front() != ' ', emit);
  };
  const int32_t literal_ids[5] = {special_.bos, special_.eos, special_.unk, special_.pad,
                                  special_.mask};
  size_t start = 0;  // start of the text not yet emitted
  for (size_t pos = text.find('<'); pos != std::string_view::npos; pos = text.find('<', pos)) {
    int found = -1;
    for (int k = 0; k < 5; ++k) {
      if (literal_ids[k] >= 0 && text.substr(pos).starts_with(kSpecialLiterals[k])) found = k;
    }
    if (found < 0) {
      ++pos;
      continue;
    }
    std::string_view before = text.substr(start, pos - start);
    if (found == kMask) {
      // lstrip: the whitespace before <mask> goes with it.
      while (!before.empty()) {
        size_t last = before.size() - 1;
        while (last > 0 && (static_cast<unsigned char>(before[last]) & 0xC0) == 0x80) --last;
        char32_t cp;
        const size_t len = DecodeUtf8Char(before, last, &cp);
        if (last + len != before.size() || !IsStripSpace(cp, fast)) break;
        before.remove_suffix(len);
      }
    }
    segment(before);
    emit(literal_ids[found]);
    pos += kSpecialLiterals[found].size();
    start = pos;
  }
  segment(text.substr(start));
}

std::vector<std::string> ByteBpeTokenizer::PreTokenize(std::string_view text) {
  std::u32string cps;
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp;
    pos += DecodeUtf8Char(text, pos, &cp);
    cps.push_back(cp);
  }
  std::vector<CharClass> cls(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) cls[i] = Classify(cps[i]);
  std::vector<std::string> out;
  for (size_t i = 0; i < cps.size();) {
    const size_t end = MatchEnd(cps, cls, i);
    out.emplace_back();
    for (size_t k = i; k < end; ++k) AppendUtf8(cps[k], &out.back());
    i = end;
  }
  return out;
}

std::vector<std::string> ByteBpeTokenizer::Tokenize(std::string_view text) const {
  std::vector<std::string> out;
  Run(text, [&](int32_t id) { out.push_back(tokens_[static_cast<size_t>(id)]); });
  return out;
}

std::vector<int32_t> ByteBpeTokenizer::TokenizeToIds(std::string_view text) const {
  std::vector<int32_t> out;
  Run(text, [&](int32_t id) { out.push_back(id); });
  return out;
}

std::vector<int32_t> ByteBpeTokenizer::Encode(std::string_view text, int max_len) const {
  const size_t limit = static_cast<size_t>(std::max(max_len, 2));
  std::vector<int32_t> out;
  out.push_back(special_.bos);
  Run(text, [&](int32_t id) {
    if (out.size() + 1 < limit) out.push_back(id);
  });
  out.push_back(special_.eos);
  return out;
}

std::vector<int32_t> ByteBpeTokenizer::EncodePair(std::string_view a, std::string_view b,
                                                  int max_len,
                                                  std::vector<int32_t>* type_ids) const {
  if (b.empty() && options_.compat == jobspec::TokenizerCompat::kFast) {
    // transformers' fast tokenizers encode (a, "") as a alone (`if text_pair` is false).
    std::vector<int32_t> out = Encode(a, max_len);
    type_ids->assign(out.size(), 0);
    return out;
  }
  std::vector<int32_t> pa = TokenizeToIds(a), pb = TokenizeToIds(b);
  const size_t budget = static_cast<size_t>(std::max(max_len, 4)) - 4;
  const size_t na = pa.size(), nb = pb.size();
  if (na + nb > budget) {
    // One piece at a time from the longer (b on a tie), in closed form as in WordPieceTokenizer.
    const size_t remove = na + nb - budget;
    const size_t first = std::min(na > nb ? na - nb : nb - na, remove);
    const size_t second = remove - first;
    const size_t from_a = (na > nb ? first : 0) + second / 2;
    pa.resize(na - from_a);
    pb.resize(nb - (remove - from_a));
  }
  std::vector<int32_t> out;
  out.reserve(pa.size() + pb.size() + 4);
  out.push_back(special_.bos);
  out.insert(out.end(), pa.begin(), pa.end());
  out.push_back(special_.eos);
  out.push_back(special_.eos);
  out.insert(out.end(), pb.begin(), pb.end());
  out.push_back(special_.eos);
  type_ids->assign(out.size(), 0);
  return out;
}

}  // namespace ringmaster::trainer
