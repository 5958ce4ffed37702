// GPT-2 / RoBERTa byte-level BPE that reproduces Hugging Face's RobertaTokenizer (transformers
// 4.40, slow) and RobertaTokenizerFast (tokenizers 0.19) id for id. The pipeline, in HF's order:
//   1. cut the special tokens <s> </s> <unk> <pad> <mask> out of the text (the added-tokens
//      trie); <mask> swallows the whitespace before it (HF's lstrip=True for RoBERTa's mask);
//   2. (add_prefix_space only) put a space before text that does not start with whitespace;
//   3. split each remaining piece with GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      evaluated by hand over code points (no regex engine);
//   4. map each piece's UTF-8 bytes to the 256 printable stand-ins of GPT-2's bytes_to_unicode
//      and apply the merges of merges.txt, lowest rank first, to each piece.
// Ill-formed UTF-8 is read as U+FFFD, as Python's bytes.decode("utf-8", "replace") reads it
// (HF takes str, so that is how such bytes reach it); its three bytes then go through BPE.
//
// The letter and number classes of step 3 are the Unicode 14 ones (PyCategory in
// unicode_util.h), which are exactly those of the fast tokenizer's regex engine (measured over
// all code points). The slow tokenizer uses the `regex` module, whose tables are newer: it also
// counts the letters and digits assigned since Unicode 15 as \p{L} / \p{N}, which this class
// (and the fast tokenizer) treat as unassigned, i.e. as [^\s\p{L}\p{N}]. That is the one known
// difference from the slow tokenizer; \s is the same 25 characters in both.
//
// TokenizerCompat::kFast reproduces the fast tokenizer in the two places where it differs:
//   - <mask> swallows Rust's whitespace (char::is_whitespace) where the slow tokenizer swallows
//     Python's (str.isspace, which adds U+001C-U+001F);
//   - an empty second text of a pair makes no pair (see EncodePair);
//   - add_prefix_space puts a space before every piece between special tokens that does not start
//     with ' ', where the slow tokenizer puts one before the whole text unless it starts with
//     whitespace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "jobspec/job_settings.h"

namespace ringmaster::trainer {

// RoBERTa's special tokens: <s> is its [CLS], </s> its [SEP].
struct ByteBpeSpecialIds {
  int32_t bos = -1, eos = -1, pad = -1, unk = -1, mask = -1;  // mask may stay -1
};

struct ByteBpeOptions {
  // HF's add_prefix_space; RobertaTokenizer's default is false.
  bool add_prefix_space = false;
  jobspec::TokenizerCompat compat = jobspec::TokenizerCompat::kSlow;
};

class ByteBpeTokenizer {
 public:
  // RoBERTa's vocab.json is under 1 MB and its merges.txt under 500 KB.
  static constexpr size_t kMaxFileBytes = size_t{64} << 20;

  // Reads vocab.json (a JSON object token -> id, ids distinct and >= 0) and merges.txt (one merge
  // "a b" per line, rank = order; lines starting with "#version" are skipped, "\r\n" is read as
  // "\n": the fast tokenizer's reading. The slow one drops the first line whatever it holds,
  // which is the same for every merges.txt that starts with its "#version" line, as the
  // tokenizers library and transformers write them). Errors name the file and, where there is one,
  // the line: a missing file, malformed JSON, an id that is not a non-negative integer or is used
  // twice, a merge line that is not two tokens separated by one space, a merge naming a token (or
  // making one) that vocab.json lacks, a vocab without <s>, </s>, <pad> or <unk>, or without one of
  // the 256 byte symbols.
  static absl::StatusOr<ByteBpeTokenizer> FromFiles(const std::string& vocab_json_path,
                                                    const std::string& merges_path,
                                                    const ByteBpeOptions& options = {});
  // The same on file contents already in memory; the sources name them in errors.
  static absl::StatusOr<ByteBpeTokenizer> FromText(std::string_view vocab_json,
                                                   std::string_view vocab_source,
                                                   std::string_view merges_text,
                                                   std::string_view merges_source,
                                                   const ByteBpeOptions& options = {});
  // tokenizer.json's "model" section when it is {"type": "BPE", "vocab": {...}, "merges": [...]}
  // with merges as "a b" strings or [a, b] pairs, no dropout, no continuing-subword prefix or
  // end-of-word suffix. Anything else is refused with the key named.
  static absl::StatusOr<ByteBpeTokenizer> FromTokenizerJson(const std::string& path,
                                                            const ByteBpeOptions& options = {});

  // BPE pieces (the byte-symbol strings of vocab.json), without <s>/</s>. Literal special
  // tokens in the text come out as themselves. Thread-safe.
  std::vector<std::string> Tokenize(std::string_view text) const;
  std::vector<int32_t> TokenizeToIds(std::string_view text) const;
  // <s> pieces </s>, pieces cut from the end so that the result has at most `max_len` ids
  // (max_len >= 2). Not padded.
  std::vector<int32_t> Encode(std::string_view text, int max_len) const;
  // A sentence pair, <s> a </s></s> b </s>, with at most `max_len` ids (max_len >= 4). Too long
  // a pair loses pieces from the end of the longer of a and b, one at a time (b when they are as
  // long): HF's truncation="longest_first". *type_ids gets all zeros (RoBERTa has one token
  // type). Not padded. In kFast mode an empty b gives Encode(a, max_len): transformers' fast
  // tokenizers treat (a, "") as a single text, the slow one as a pair.
  std::vector<int32_t> EncodePair(std::string_view a, std::string_view b, int max_len,
                                  std::vector<int32_t>* type_ids) const;

  const ByteBpeSpecialIds& special() const { return special_; }
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }  // max id + 1
  const std::string& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  int32_t TokenId(std::string_view token) const;  // -1 when absent
  size_t merge_count() const { return merges_.size(); }
  const ByteBpeOptions& options() const { return options_; }

  // Step 3 alone: the pieces (UTF-8, ill-formed bytes read as U+FFFD) GPT-2's pattern splits
  // `text` into, before the byte mapping. No special-token handling.
  static std::vector<std::string> PreTokenize(std::string_view text);

  // GPT-2's bytes_to_unicode: the code point that stands for byte `b` in vocab and merges.
  static char32_t ByteSymbol(uint8_t b);

  struct Cache;  // pieces already merged, keyed by their bytes

 private:
  ByteBpeTokenizer() = default;

  struct MergeSpec {
    std::string left, right;
    std::string where;  // "file:line" or "file: model.merges[i]", for errors
  };
  // Checks the merges against the vocab already in t.vocab_ and fills the other tables.
  static absl::StatusOr<ByteBpeTokenizer> Build(ByteBpeTokenizer t,
                                                const std::vector<MergeSpec>& merges,
                                                std::string_view vocab_source,
                                                const ByteBpeOptions& options);

  template <typename Emit>
  void Run(std::string_view text, Emit&& emit) const;
  // Run after the slow tokenizer's prefix space: cuts out the special tokens.
  template <typename Emit>
  void RunSpecials(std::string_view text, Emit& emit) const;
  template <typename Emit>
  void RunSegment(std::string_view seg, bool prefix_space, Emit& emit) const;
  // BPE of one pre-tokenized piece (its UTF-8 bytes); appends the ids to *out.
  void Merge(std::string_view piece, std::vector<int32_t>* out) const;

  std::vector<std::string> tokens_;  // by id; "" where vocab.json skips an id
  absl::flat_hash_map<std::string, int32_t> vocab_;
  // (left id, right id) -> (rank, merged id), keyed as left << 32 | right.
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  int32_t byte_ids_[256] = {};
  ByteBpeSpecialIds special_;
  ByteBpeOptions options_;
  std::shared_ptr<Cache> cache_;
};

}  // namespace ringmaster::trainer
