#include "trainer/text/wordpiece.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "trainer/text/fast_char_classes.h"
#include "trainer/text/unicode_util.h"

namespace ringmaster::trainer {
namespace {

// HF's WordpieceTokenizer.max_input_chars_per_word.
constexpr size_t kMaxInputCharsPerWord = 100;

// BertTokenizer's special tokens, which HF cuts out of the text before anything else (its
// added-tokens trie) and never lowercases. None is a prefix of another, so the first match at a
// '[' is the longest one.
constexpr std::string_view kSpecialLiterals[5] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"};

int MatchSpecialLiteral(std::string_view text) {
  for (int i = 0; i < 5; ++i) {
    if (text.starts_with(kSpecialLiterals[i])) return i;
  }
  return -1;
}

bool IsSpecialLiteral(std::string_view word) {
  return std::find(std::begin(kSpecialLiterals), std::end(kSpecialLiterals), word) !=
         std::end(kSpecialLiterals);
}

bool IsAsciiPunct(unsigned char c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126);
}

// The system Abseil is built with its own absl::string_view, which std::string_view does not
// convert to; heterogeneous map lookups and StrCat need it spelled out.
absl::string_view AbslView(std::string_view v) { return absl::string_view(v.data(), v.size()); }

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Working buffers, one set per thread, so that tokenizing a row allocates nothing once they
// have grown. Each pipeline level owns its own buffers, so a level never clobbers the input of
// the level that called it.
struct Scratch {
  std::u32string seg_cps;     // cleaned segment
  std::string seg_utf8;       // the same, encoded for utf8proc
  std::u32string seg_nfc;     // after NFC
  std::vector<int32_t> norm;  // utf8proc working buffer
  std::string word;           // current whitespace-separated word
  std::u32string word_cps;    // word after lowercasing / accent stripping
  std::string word_utf8;      // word encoded for NFD
  std::u32string word_nfd;    // word after NFD
  std::string piece;          // current punctuation-separated piece
  std::string cont;           // "##" + rest of the piece, for continuation lookups
  std::vector<int32_t> ids;   // pieces of the current WordPiece word until it is known good
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Splits a vocab file the way Python's text mode reads it: "\n", "\r\n" and "\r" all end a
// line, and a final line needs no terminator.
std::vector<std::string> SplitVocabLines(std::string_view data) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != '\n' && data[i] != '\r') continue;
    lines.emplace_back(data.substr(start, i - start));
    if (data[i] == '\r' && i + 1 < data.size() && data[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < data.size()) lines.emplace_back(data.substr(start));
  return lines;
}

// NFD as the fast tokenizer computes it: its tables predate U+11938's decomposition, which it
// leaves alone. U+11938 is a starter (combining class 0), so the text on either side of it
// normalises independently.
void FastNfd(const std::u32string& in, std::u32string* out) {
  Scratch& s = ThreadScratch();
  out->clear();
  std::u32string part;
  for (size_t start = 0;;) {
    size_t end = std::min(in.find(kFastUndecomposed, start), in.size());
    s.word_utf8.clear();
    for (size_t i = start; i < end; ++i) AppendUtf8(in[i], &s.word_utf8);
    NormalizeNfd(s.word_utf8, &s.norm, &part);
    out->append(part);
    if (end == in.size()) return;
    out->push_back(kFastUndecomposed);
    start = end + 1;
  }
}

}  // namespace

absl::StatusOr<WordPieceTokenizer> WordPieceTokenizer::FromVocabFile(
    const std::string& path, const WordPieceOptions& options) {
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxVocabFileBytes));
  return FromVocabTokens(SplitVocabLines(data), options, path);
}

absl::StatusOr<WordPieceTokenizer> WordPieceTokenizer::FromVocabText(
    std::string_view text, const WordPieceOptions& options, std::string_view source) {
  if (text.size() > kMaxVocabFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        AbslView(source), ": ", text.size(), " bytes exceeds the limit of ", kMaxVocabFileBytes));
  }
  return FromVocabTokens(SplitVocabLines(text), options, source);
}

absl::StatusOr<WordPieceTokenizer> WordPieceTokenizer::FromVocabTokens(
    std::vector<std::string> tokens, const WordPieceOptions& options, std::string_view source) {
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(AbslView(source), ": vocab is empty"));
  }
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ": vocab has too many tokens"));
  }
  WordPieceTokenizer t;
  t.do_lower_case_ = options.do_lower_case;
  t.fast_ = options.compat == jobspec::TokenizerCompat::kFast;
  t.vocab_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    if (!IsValidUtf8(tok)) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(source), ":", i + 1, ": invalid UTF-8"));
    }
    t.vocab_.insert_or_assign(tok, static_cast<int32_t>(i));  // later line wins, as in HF
    t.max_token_bytes_ = std::max(t.max_token_bytes_, tok.size());
    if (tok.starts_with("##")) t.max_suffix_bytes_ = std::max(t.max_suffix_bytes_, tok.size() - 2);
  }
  t.tokens_ = std::move(tokens);

  struct Required {
    std::string_view name;
    int32_t* id;
  };
  for (const Required& r :
       {Required{"[CLS]", &t.special_.cls}, Required{"[SEP]", &t.special_.sep},
        Required{"[UNK]", &t.special_.unk}, Required{"[PAD]", &t.special_.pad}}) {
    *r.id = t.TokenId(r.name);
    if (*r.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(source), ": vocab has no ", AbslView(r.name), " token"));
    }
  }
  t.special_.mask = t.TokenId("[MASK]");
  for (int i = 0; i < 5; ++i) {
    int32_t id = t.TokenId(kSpecialLiterals[i]);
    t.literal_ids_[i] = id >= 0 ? id : t.special_.unk;
  }
  return t;
}

int32_t WordPieceTokenizer::TokenId(std::string_view token) const {
  auto it = vocab_.find(AbslView(token));
  return it == vocab_.end() ? -1 : it->second;
}

template <typename Emit>
void WordPieceTokenizer::Run(std::string_view text, Emit&& emit) const {
  // Step 2 of the pipeline (the special tokens) comes first here: lowercasing never creates or
  // changes a special token, so cutting them out before lowering gives the same pieces.
  size_t seg_start = 0;
  size_t pos = 0;
  while ((pos = text.find('[', pos)) != std::string_view::npos) {
    int which = MatchSpecialLiteral(text.substr(pos));
    if (which < 0) {
      ++pos;
      continue;
    }
    RunSegment(text.substr(seg_start, pos - seg_start), emit);
    emit(literal_ids_[which]);
    pos += kSpecialLiterals[which].size();
    seg_start = pos;
  }
  RunSegment(text.substr(seg_start), emit);
}

template <typename Emit>
void WordPieceTokenizer::RunSegment(std::string_view seg, Emit& emit) const {
  // ASCII whitespace becomes a space in HF's cleaning, and a space neither composes nor reorders
  // under NFC, so the text between ASCII whitespace can be processed chunk by chunk. That keeps
  // the ASCII fast path for every all-ASCII chunk of a row with a few accents in it. (The
  // dropped control characters are no such boundary: "e\x01\u0301" composes to "é".)
  auto is_ascii_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t pos = 0;
  while (pos < seg.size()) {
    if (is_ascii_space(seg[pos])) {
      ++pos;
      continue;
    }
    size_t end = pos;
    bool ascii = true;
    while (end < seg.size() && !is_ascii_space(seg[end])) {
      ascii &= static_cast<unsigned char>(seg[end]) < 0x80;
      ++end;
    }
    if (ascii) {
      RunAsciiChunk(seg.substr(pos, end - pos), emit);
    } else {
      RunUnicodeChunk(seg.substr(pos, end - pos), emit);
    }
    pos = end;
  }
}

template <typename Emit>
void WordPieceTokenizer::RunAsciiChunk(std::string_view chunk, Emit& emit) const {
  // ASCII needs neither NFC nor CJK spacing, its only control characters are C0 and DEL, and
  // the chunk holds no whitespace: it is one word once the controls are gone.
  Scratch& s = ThreadScratch();
  s.word.clear();
  for (char ch : chunk) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7F) {
      s.word.push_back(do_lower_case_ && c >= 'A' && c <= 'Z' ? ch + ('a' - 'A') : ch);
    }
  }
  if (!s.word.empty()) RunWord(s.word, /*ascii=*/true, emit);
}

template <typename Emit>
void WordPieceTokenizer::RunUnicodeChunk(std::string_view chunk, Emit& emit) const {
  Scratch& s = ThreadScratch();
  if (fast_) {
    // The fast tokenizer cleans and spaces out CJK without lowering first (RunWord lowers
    // non-ASCII words after stripping accents) and applies no NFC. ASCII letters are lowered
    // here, which commutes with every later step, since RunWord takes all-ASCII words as such.
    s.seg_nfc.clear();
    for (size_t pos = 0; pos < chunk.size();) {
      char32_t cp;
      pos += DecodeUtf8Char(chunk, pos, &cp);
      if (IsFastDropped(cp)) continue;
      if (do_lower_case_ && cp >= 'A' && cp <= 'Z') cp += 'a' - 'A';
      if (IsHfWhitespace(cp)) {
        s.seg_nfc.push_back(' ');
      } else if (IsFastChineseChar(cp)) {
        s.seg_nfc.push_back(' ');
        s.seg_nfc.push_back(cp);
        s.seg_nfc.push_back(' ');
      } else {
        s.seg_nfc.push_back(cp);
      }
    }
  } else {
    CleanSlow(chunk);
  }
  SplitWords(emit);
}

void WordPieceTokenizer::CleanSlow(std::string_view chunk) const {
  Scratch& s = ThreadScratch();
  // Lowercase (HF does this to the raw text, before cleaning), clean, and space out CJK.
  s.seg_cps.clear();
  auto clean_append = [&s](char32_t cp) {
    if (cp == 0 || cp == kReplacementChar || IsHfControl(cp)) return;
    if (IsHfWhitespace(cp)) {
      s.seg_cps.push_back(' ');
    } else if (IsHfChineseChar(cp)) {
      s.seg_cps.push_back(' ');
      s.seg_cps.push_back(cp);
      s.seg_cps.push_back(' ');
    } else {
      s.seg_cps.push_back(cp);
    }
  };
  for (size_t pos = 0; pos < chunk.size();) {
    char32_t cp;
    pos += DecodeUtf8Char(chunk, pos, &cp);
    if (do_lower_case_ && cp == 0x130) {
      clean_append('i');
      clean_append(0x307);
    } else if (do_lower_case_) {
      clean_append(SimpleLower(cp));
    } else {
      clean_append(cp);
    }
  }
  s.seg_utf8.clear();
  for (char32_t cp : s.seg_cps) AppendUtf8(cp, &s.seg_utf8);
  NormalizeNfc(s.seg_utf8, &s.norm, &s.seg_nfc);
}

template <typename Emit>
void WordPieceTokenizer::SplitWords(Emit& emit) const {
  Scratch& s = ThreadScratch();
  s.word.clear();
  bool word_ascii = true;
  for (char32_t cp : s.seg_nfc) {
    if (IsSplitSpaceAfterClean(cp)) {
      if (!s.word.empty()) RunWord(s.word, word_ascii, emit);
      s.word.clear();
      word_ascii = true;
    } else {
      AppendUtf8(cp, &s.word);
      word_ascii &= cp < 0x80;
    }
  }
  if (!s.word.empty()) RunWord(s.word, word_ascii, emit);
}

template <typename Emit>
void WordPieceTokenizer::RunWord(std::string_view word, bool ascii, Emit& emit) const {
  // HF's never_split: a word that is exactly a special token (possible once cleaning removed
  // characters from inside it) skips lowercasing and punctuation splitting. The fast tokenizer
  // has no such rule.
  if (!fast_ && IsSpecialLiteral(word)) {
    RunWordPiece(word, emit);
    return;
  }
  if (ascii) {
    // Already lowercased with the segment; accents need no stripping.
    size_t start = 0;
    for (size_t i = 0; i < word.size(); ++i) {
      if (!IsAsciiPunct(static_cast<unsigned char>(word[i]))) continue;
      if (i > start) RunWordPiece(word.substr(start, i - start), emit);
      RunWordPiece(word.substr(i, 1), emit);
      start = i + 1;
    }
    if (start < word.size()) RunWordPiece(word.substr(start), emit);
    return;
  }

  Scratch& s = ThreadScratch();
  const std::u32string* chars = &s.word_cps;
  s.word_cps.clear();
  for (size_t pos = 0; pos < word.size();) {
    char32_t cp;
    pos += DecodeUtf8Char(word, pos, &cp);
    if (do_lower_case_ && !fast_) {
      AppendPyLower(cp, &s.word_cps);
    } else {
      s.word_cps.push_back(cp);
    }
  }
  if (do_lower_case_ && !fast_) {
    // Strip accents: NFD, then drop the nonspacing marks.
    s.word_utf8.clear();
    for (char32_t cp : s.word_cps) AppendUtf8(cp, &s.word_utf8);
    NormalizeNfd(s.word_utf8, &s.norm, &s.word_nfd);
    std::erase_if(s.word_nfd, IsNonspacingMark);
    chars = &s.word_nfd;
  } else if (do_lower_case_) {
    // The fast order: NFD, drop the marks its tables know, then lowercase.
    FastNfd(s.word_cps, &s.word_nfd);
    std::erase_if(s.word_nfd, IsFastNonspacingMark);
    s.word_cps.clear();
    for (char32_t cp : s.word_nfd) AppendPyLower(cp, &s.word_cps);
  }

  s.piece.clear();
  for (char32_t cp : *chars) {
    if (!(fast_ ? IsFastPunctuation(cp) : IsHfPunctuation(cp))) {
      AppendUtf8(cp, &s.piece);
      continue;
    }
    if (!s.piece.empty()) RunWordPiece(s.piece, emit);
    s.piece.clear();
    std::string punct;  // a punctuation character is its own piece; short strings stay inline
    AppendUtf8(cp, &punct);
    RunWordPiece(punct, emit);
  }
  if (!s.piece.empty()) RunWordPiece(s.piece, emit);
}

template <typename Emit>
void WordPieceTokenizer::RunWordPiece(std::string_view piece, Emit& emit) const {
  if (CountUtf8Chars(piece) > kMaxInputCharsPerWord) {
    emit(special_.unk);
    return;
  }
  Scratch& s = ThreadScratch();
  s.ids.clear();
  size_t start = 0;
  while (start < piece.size()) {
    if (start > 0) {
      s.cont.assign("##");
      s.cont.append(piece.substr(start));
    }
    const size_t longest = start == 0 ? max_token_bytes_ : max_suffix_bytes_;
    size_t end = piece.size();
    if (end - start > longest) {
      end = start + longest;
      while (end > start && IsUtf8Continuation(piece[end])) --end;
    }
    int32_t found = -1;
    while (end > start) {
      auto it = start == 0 ? vocab_.find(AbslView(piece.substr(0, end)))
                           : vocab_.find(absl::string_view(s.cont).substr(0, 2 + end - start));
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
      --end;
      while (end > start && IsUtf8Continuation(piece[end])) --end;
    }
    if (found < 0) {
      emit(special_.unk);
      return;
    }
    s.ids.push_back(found);
    start = end;
  }
  for (int32_t id : s.ids) emit(id);
}

std::vector<std::string> WordPieceTokenizer::Tokenize(std::string_view text) const {
  std::vector<std::string> out;
  Run(text, [&](int32_t id) { out.push_back(tokens_[static_cast<size_t>(id)]); });
  return out;
}

std::vector<int32_t> WordPieceTokenizer::TokenizeToIds(std::string_view text) const {
  std::vector<int32_t> out;
  Run(text, [&](int32_t id) { out.push_back(id); });
  return out;
}

std::vector<int32_t> WordPieceTokenizer::Encode(std::string_view text, int max_len) const {
  const size_t limit = static_cast<size_t>(std::max(max_len, 2));
  std::vector<int32_t> out;
  out.push_back(special_.cls);
  Run(text, [&](int32_t id) {
    if (out.size() + 1 < limit) out.push_back(id);
  });
  out.push_back(special_.sep);
  return out;
}

std::vector<int32_t> WordPieceTokenizer::EncodePair(std::string_view a, std::string_view b,
                                                    int max_len,
                                                    std::vector<int32_t>* type_ids) const {
  std::vector<int32_t> pa = TokenizeToIds(a), pb = TokenizeToIds(b);
  const size_t budget = static_cast<size_t>(std::max(max_len, 3)) - 3;
  const size_t na = pa.size(), nb = pb.size();
  if (na + nb > budget) {
    // Removing one piece at a time from the longer (b on a tie) first evens the two out, then
    // alternates b, a, b, ...: in closed form, as transformers computes it.
    const size_t remove = na + nb - budget;
    const size_t first = std::min(na > nb ? na - nb : nb - na, remove);
    const size_t second = remove - first;
    const size_t from_a = (na > nb ? first : 0) + second / 2;
    const size_t from_b = remove - from_a;
    pa.resize(na - from_a);
    pb.resize(nb - from_b);
  }
  std::vector<int32_t> out;
  out.reserve(pa.size() + pb.size() + 3);
  out.push_back(special_.cls);
  out.insert(out.end(), pa.begin(), pa.end());
  out.push_back(special_.sep);
  const size_t first_segment = out.size();
  out.insert(out.end(), pb.begin(), pb.end());
  out.push_back(special_.sep);
  type_ids->assign(out.size(), 0);
  std::fill(type_ids->begin() + static_cast<ptrdiff_t>(first_segment), type_ids->end(), 1);
  return out;
}

}  // namespace ringmaster::trainer
