// An index of a training file (TSV, CSV or JSON Lines: tsv.h), so that a rank can keep and
// tokenise only the rows it trains on: one sequential pass records where each data row's text
// (in CSV and JSON Lines: its whole record, decoded again when read) lies in the file, its label,
// its byte length and its number of words (whence the bucketing keys PlanEpoch sorts by),
// validating the file exactly as ReadTsv does (the same rules and "<path>:<line>: <problem>"
// errors) without holding its text or tokenising it. Sentences are read back with pread when a
// batch needs them. The index costs 20 bytes a row; the text stays in the file (and the page
// cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/data/batcher.h"
#include "trainer/data/tsv.h"

namespace ringmaster::trainer {

class TsvRowIndex {
 public:
  // Reads `path` once, in fixed-size chunks (memory does not grow with the file beyond the
  // index and the longest line). Errors as ReadTsv(path, num_labels), including the 4 GiB limit.
  // The file stays open: rows are read from the file that was indexed even if it is renamed
  // over later; it must not be rewritten in place while the index is used.
  static absl::StatusOr<TsvRowIndex> Build(const std::string& path, int num_labels,
                                           const TableOptions& options = {});

  TsvRowIndex(TsvRowIndex&& other) noexcept;
  TsvRowIndex& operator=(TsvRowIndex&& other) noexcept;
  TsvRowIndex(const TsvRowIndex&) = delete;
  TsvRowIndex& operator=(const TsvRowIndex&) = delete;
  ~TsvRowIndex();

  size_t size() const { return labels_.size(); }
  const std::string& path() const { return path_; }
  float label(int64_t row) const { return labels_[static_cast<size_t>(row)]; }
  // The class names (TsvLineParser::label_names): given, inferred from the file, or empty (ids).
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Each row's length in bytes in the file: its text's in TSV, its record's otherwise.
  const std::vector<uint32_t>& text_bytes() const { return text_bytes_; }
  // Each row's number of words as BERT's basic tokenizer splits them (CountWords).
  const std::vector<uint32_t>& words() const { return words_; }
  // Whether rows are sentence pairs (TableOptions::text_pair_column); words() then counts both.
  bool has_pairs() const { return has_pairs_; }
  // The bucketing keys for PlanEpoch, the same on every rank: min(words + 2, max_len) (+ 3 for
  // pairs), the
  // encoded length ([CLS] and [SEP] included) when every word is one WordPiece, and a close
  // estimate otherwise (a word split into pieces adds tokens).
  std::vector<uint32_t> LengthKeys(int max_len) const;
  // Heap bytes the index holds.
  size_t memory_bytes() const;

  // Row `row`'s text, read from the file (pread: safe to call from several threads) and, in CSV
  // and JSON Lines, decoded from its record.
  absl::StatusOr<std::string> ReadText(int64_t row) const;
  // Both texts of row `row` (text_pair empty unless has_pairs()).
  absl::StatusOr<RowText> ReadRow(int64_t row) const;

 private:
  TsvRowIndex() = default;

  std::string path_;
  int fd_ = -1;
  // Decodes records (CSV, JSON Lines); has read the header. Null for TSV: rows are read verbatim.
  std::unique_ptr<TsvLineParser> decoder_;
  std::vector<uint64_t> offsets_;     // file offset of each row's text (or record)
  std::vector<uint32_t> text_bytes_;  // its length
  std::vector<uint32_t> words_;       // its words (CountWords)
  std::vector<float> labels_;
  bool has_pairs_ = false;
  std::vector<std::string> label_names_;
};

// The number of words BERT's basic tokenizer splits `text` into before WordPiece: runs of
// characters between whitespace, with each ASCII punctuation character a word of its own and
// each CJK ideograph too (as the tokenizer does). Other Unicode punctuation counts as a word
// character: an estimate for a bucketing key, not a tokenizer.
uint32_t CountWords(std::string_view text);

// Reads and encodes rows `rows` of `index` (and only those: `encode` is called once per row)
// and pads them into a batch whose example_index is `rows`. Equal to MakeBatch over the whole
// file encoded with the same `encode`.
absl::StatusOr<Batch> MakeIndexedBatch(
    const TsvRowIndex& index, const std::vector<int64_t>& rows,
    const std::function<std::vector<int32_t>(std::string_view)>& encode, int32_t pad_id);
// The same for an index of sentence pairs.
absl::StatusOr<Batch> MakeIndexedBatch(const TsvRowIndex& index, const std::vector<int64_t>& rows,
                                       const PairEncoder& encode, int32_t pad_id);

}  // namespace ringmaster::trainer
