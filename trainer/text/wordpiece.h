// BERT WordPiece tokenization that reproduces Hugging Face's slow `BertTokenizer` (transformers
// 4.40 on CPython 3.11) token for token, so that a model fine-tuned here sees the ids it would
// see under HF. The pipeline, in HF's order:
//   1. (uncased) lowercase every character except inside the literal special tokens;
//   2. cut the literal special tokens [UNK] [SEP] [PAD] [CLS] [MASK] out of the text;
//   3. per remaining piece: drop NUL, U+FFFD and control/format/unassigned/private-use
//      characters, turn whitespace into spaces, put spaces around CJK ideographs, NFC, split on
//      whitespace; per word: (uncased) lowercase, NFD and drop nonspacing marks, split off
//      punctuation characters;
//   4. WordPiece: greedy longest-match-first with "##" continuations; a word over 100 code
//      points, or one with a part that matches nothing, becomes a single [UNK].
//
// TokenizerCompat::kFast reproduces the fast tokenizer instead (BertTokenizerFast, tokenizers
// 0.19, what AutoTokenizer returns), which differs from the slow one in step 3 and in one rule of
// step 2:
//   - cleaning keeps unassigned code points (they make their word [UNK]) and uses older Unicode
//     tables for format characters, punctuation and nonspacing marks (fast_char_classes.h);
//   - U+2B820-U+2B91F are not CJK ideographs;
//   - no NFC: cased text is not normalised at all; uncased text is NFD'd, stripped of marks and
//     then lowercased (the same result as lowercasing first, measured over all code points);
//   - a word that becomes a special token only after cleaning ("[MA\x01SK]") is not one: it
//     splits at its brackets like any other text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "jobspec/job_settings.h"

namespace ringmaster::trainer {

struct SpecialTokenIds {
  int32_t pad = -1, unk = -1, cls = -1, sep = -1, mask = -1;  // mask may stay -1
};

// How a vocabulary is applied: casing (HF's do_lower_case, with accent stripping) and which of
// HF's two BERT tokenizers to reproduce.
struct WordPieceOptions {
  bool do_lower_case = true;
  jobspec::TokenizerCompat compat = jobspec::TokenizerCompat::kSlow;
};

class WordPieceTokenizer {
 public:
  // Real vocabularies are a few MB at most (multilingual BERT's is under 1 MB).
  static constexpr size_t kMaxVocabFileBytes = size_t{64} << 20;

  // Reads vocab.txt: one token per line, id = 0-based line number. Lines end at "\n", "\r\n" or
  // "\r" (Python's universal newlines, which HF's load_vocab reads with); an empty line is the
  // token "". Errors name the file: a missing or empty file, a line that is not UTF-8
  // ("<path>:<line>: invalid UTF-8"), a vocab without [CLS], [SEP], [UNK] or [PAD].
  // Files over kMaxVocabFileBytes are refused.
  static absl::StatusOr<WordPieceTokenizer> FromVocabFile(const std::string& path,
                                                          const WordPieceOptions& options);
  // The same on the contents of a vocab file already in memory; `source` names it in errors.
  static absl::StatusOr<WordPieceTokenizer> FromVocabText(std::string_view text,
                                                          const WordPieceOptions& options,
                                                          std::string_view source);
  // The same from tokens already split into lines; `source` names them in errors. When a token
  // appears twice the later id wins for lookups (HF builds a dict), as with the file.
  static absl::StatusOr<WordPieceTokenizer> FromVocabTokens(std::vector<std::string> tokens,
                                                            const WordPieceOptions& options,
                                                            std::string_view source);
  // The same three with the slow tokenizer's behaviour and only the casing given.
  static absl::StatusOr<WordPieceTokenizer> FromVocabFile(const std::string& path,
                                                          bool do_lower_case) {
    return FromVocabFile(path, WordPieceOptions{.do_lower_case = do_lower_case});
  }
  static absl::StatusOr<WordPieceTokenizer> FromVocabText(std::string_view text, bool do_lower_case,
                                                          std::string_view source) {
    return FromVocabText(text, WordPieceOptions{.do_lower_case = do_lower_case}, source);
  }
  static absl::StatusOr<WordPieceTokenizer> FromVocabTokens(std::vector<std::string> tokens,
                                                            bool do_lower_case,
                                                            std::string_view source) {
    return FromVocabTokens(std::move(tokens), WordPieceOptions{.do_lower_case = do_lower_case},
                           source);
  }

  // Word pieces, without [CLS]/[SEP]. Literal special tokens in the text come out as themselves
  // (a literal [MASK] as [UNK] when the vocab has no [MASK]). Ill-formed UTF-8 is read as
  // U+FFFD, which the cleaning drops. Thread-safe: working buffers are per thread.
  std::vector<std::string> Tokenize(std::string_view text) const;
  std::vector<int32_t> TokenizeToIds(std::string_view text) const;
  // [CLS] pieces [SEP], pieces cut from the end so that the result has at most `max_len` ids
  // (max_len >= 2). Not padded.
  std::vector<int32_t> Encode(std::string_view text, int max_len) const;
  // A sentence pair, [CLS] a [SEP] b [SEP], with at most `max_len` ids (max_len >= 3), and its
  // token type ids into *type_ids: 0 up to the first [SEP], 1 after. Too long a pair loses
  // pieces from the end of the longer of a and b, one at a time (b when they are as long): HF's
  // truncation="longest_first". Not padded.
  std::vector<int32_t> EncodePair(std::string_view a, std::string_view b, int max_len,
                                  std::vector<int32_t>* type_ids) const;

  const SpecialTokenIds& special() const { return special_; }
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }  // lines
  const std::string& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  int32_t TokenId(std::string_view token) const;  // -1 when absent
  bool do_lower_case() const { return do_lower_case_; }
  jobspec::TokenizerCompat compat() const {
    return fast_ ? jobspec::TokenizerCompat::kFast : jobspec::TokenizerCompat::kSlow;
  }

 private:
  WordPieceTokenizer() = default;

  // Calls emit(id) for each piece of `text`.
  template <typename Emit>
  void Run(std::string_view text, Emit&& emit) const;
  template <typename Emit>
  void RunSegment(std::string_view seg, Emit& emit) const;
  template <typename Emit>
  void RunAsciiChunk(std::string_view chunk, Emit& emit) const;
  template <typename Emit>
  void RunUnicodeChunk(std::string_view chunk, Emit& emit) const;
  // RunUnicodeChunk's steps: the slow tokenizer's lowering, cleaning, CJK spacing and NFC of
  // `chunk`, and the split of the result into words.
  void CleanSlow(std::string_view chunk) const;
  template <typename Emit>
  void SplitWords(Emit& emit) const;
  template <typename Emit>
  void RunWord(std::string_view word, bool ascii, Emit& emit) const;
  template <typename Emit>
  void RunWordPiece(std::string_view piece, Emit& emit) const;

  std::vector<std::string> tokens_;
  absl::flat_hash_map<std::string, int32_t> vocab_;
  SpecialTokenIds special_;
  // Id for each literal special token in the text, in the order of kSpecialLiterals; [MASK]
  // falls back to [UNK] when the vocab has none (HF would append it past the vocab instead).
  int32_t literal_ids_[5] = {-1, -1, -1, -1, -1};
  bool do_lower_case_ = true;
  bool fast_ = false;  // TokenizerCompat::kFast
  // Longest token in bytes, and longest "##" token without its "##": no match can be longer,
  // so the greedy search starts there instead of at the end of a long word.
  size_t max_token_bytes_ = 0;
  size_t max_suffix_bytes_ = 0;
};

}  // namespace ringmaster::trainer
