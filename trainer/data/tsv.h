// Readers for the data files a job trains and evaluates on, in three formats:
// - TSV, as the GLUE files (SST-2): one header line naming the columns, then one example per
//   line. Fields are split on tabs with no quoting, so a sentence may contain quote characters
//   but never a tab or a newline.
// - CSV (RFC 4180): a header record naming the columns, then one example per record. A field may
//   be quoted ("..."), with "" for a quote and line breaks inside (read as "\n"); a quote inside
//   an unquoted field is kept literally, as Python's csv module does.
// - JSON Lines: one JSON object per line, the text and label found by key; other keys ignored.
// The text and label columns are named by TableOptions (data.text_column, data.label_column).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jobspec/job_settings.h"

namespace ringmaster::trainer {

using jobspec::DataFormat;

// How a data file is read: its format (kAuto: by the file's extension, ResolveDataFormat) and the
// names of the columns (JSON keys) that hold the text and the label.
struct TableOptions {
  DataFormat format = DataFormat::kAuto;
  std::string text_column = "sentence";
  std::string label_column = "label";
  std::string text_pair_column;  // the second text of sentence pairs; empty: single texts
  // Class names in id order (data.labels): a label cell is one of them. Empty: see
  // TsvLineParser::label_names.
  std::vector<std::string> labels;
  // Without `labels`: whether a first label that is not a number makes every label a name
  // (TsvLineParser::label_names). The *Tsv readers below do not: their labels are ids.
  bool infer_labels = true;
};

// A row's text and, for sentence pairs, its second text.
struct RowText {
  std::string text, text_pair;
};

// `format`, or for kAuto the format `path`'s extension names: .csv is CSV, .jsonl, .ndjson and
// .json are JSON Lines, anything else (.tsv, .txt, none) TSV. Never returns kAuto.
DataFormat ResolveDataFormat(DataFormat format, std::string_view path);

struct Example {
  std::string sentence;
  float label = 0;  // class id for classification, real value when num_labels == 1 (regression)
  std::string text_pair;  // sentence pairs only (TableOptions::text_pair_column)
};

// Reads the text and label columns of `options` from `path`, in its format. The rules below (the
// TSV readers') hold for every format, with "line" the line a record starts on.
absl::StatusOr<std::vector<Example>> ReadTable(const std::string& path, const TableOptions& options,
                                               int num_labels);
absl::StatusOr<std::vector<Example>> ReadTableForPredict(const std::string& path,
                                                         const TableOptions& options);

// Reads the "sentence" and "label" columns, found by name in the header; other columns are
// allowed and ignored. Labels must be integers in [0, num_labels) when num_labels > 1 and
// finite reals when num_labels == 1. Accepts CRLF line ends, a UTF-8 byte order mark, and a
// missing final newline; blank lines are allowed only at the end of the file. Every error names
// "<path>:<line>: <problem>" (line 1 is the header). Files over 4 GiB and files with no
// examples are refused.
absl::StatusOr<std::vector<Example>> ReadTsv(const std::string& path, int num_labels);

// The same for prediction inputs, where the number of labels is not known: only "sentence" is
// required. When a "label" column exists it must hold finite numbers (kept as they are, so a
// caller can score predictions); when it does not, every label is 0. In an input of one column
// (TSV or CSV) every line after the header is a row, a blank one the empty sentence.
absl::StatusOr<std::vector<Example>> ReadTsvForPredict(const std::string& path);

// The same two on file contents already in memory; `source` stands for the path in errors.
absl::StatusOr<std::vector<Example>> ParseTsv(std::string_view data, std::string_view source,
                                              int num_labels);
absl::StatusOr<std::vector<Example>> ParseTsvForPredict(std::string_view data,
                                                        std::string_view source);

// RFC 4180 fields of one CSV record (lines joined by '\n'). *open is set when the record ends
// inside a quoted field (more lines belong to it); otherwise a malformed record (a character
// after a closing quote) is an error naming the field.
absl::Status SplitCsvRecord(absl::string_view record, std::vector<std::string>* fields, bool* open);

// Files larger than this are refused by every reader here.
inline constexpr size_t kMaxTsvBytes = size_t{1} << 32;  // 4 GiB

// The line-by-line rules behind the readers above, for callers that stream a file instead of
// holding it (TsvRowIndex): feed every line in order and call Finish after the last one, and
// the errors are exactly ReadTable's. Lines are split on '\n' only; the text after the last '\n'
// is a line when it is not empty.
class TsvLineParser {
 public:
  // A data row. In TSV (text_is_span()) the text is a slice of the line that was fed (valid as
  // long as that line is); in CSV and JSON Lines it is decoded into `text`.
  struct Row {
    size_t sentence_begin = 0;  // TSV: byte offset of the text field in the line
    size_t sentence_size = 0;
    std::string text;       // CSV, JSON Lines, TSV pairs: the decoded text
    std::string text_pair;  // sentence pairs: the second text
    float label = 0;        // 0 when the label column is optional and absent
  };

  // As ReadTable(source, options, num_labels): refuses num_labels < 1. options.format kAuto is
  // resolved from `source`'s extension.
  static absl::StatusOr<TsvLineParser> ForTraining(std::string source, int num_labels,
                                                   const TableOptions& options = {});
  // As ReadTableForPredict.
  static TsvLineParser ForPredict(std::string source, const TableOptions& options = {});

  // The next line without its '\n' (a '\r' before it is dropped here, and a byte order mark at
  // the start of the first line). Sets *row for a data row; leaves it empty for the header, for
  // blank lines (allowed only at the end: the next non-blank line is the error) and for a line
  // that ends inside a quoted CSV field (the record goes on: in_record()).
  absl::Status Feed(absl::string_view line, std::optional<Row>* row);
  // After the last line: refuses a file without a header or without data rows, and a CSV file
  // that ends inside a quoted field. With inferred label names, sorts them (their ids change:
  // FinalLabel) and refuses a count other than num_labels.
  absl::Status Finish();
  // Class labels are ids unless named: by TableOptions::labels, or else inferred when the first
  // data row's label is not a number (and TableOptions::infer_labels); then every label is a
  // name, and the names found, in sorted (byte) order, are the classes. After Finish: the names
  // (empty: ids).
  const std::vector<std::string>& label_names() const { return names_; }
  // A row's label as Feed gave it, as the class id it is after Finish (inferred names are
  // numbered in the order first seen until Finish sorts them).
  float FinalLabel(float label) const {
    return remap_.empty() ? label : static_cast<float>(remap_[static_cast<size_t>(label)]);
  }

  int64_t line_no() const { return line_no_; }  // lines fed so far (1-based number of the last)
  // Whether the lines fed so far end inside a record (CSV: an open quoted field).
  bool in_record() const { return record_line_ != 0; }
  // TSV of single texts: rows are slices of their line (Row::sentence_begin/size). Otherwise a
  // row's text must be decoded from its record with TextOfRecord.
  bool text_is_span() const { return format_ == DataFormat::kTsv && pair_column_.empty(); }
  bool has_pairs() const { return !pair_column_.empty(); }
  DataFormat format() const { return format_; }
  // The text of a data record as it lies in the file (its lines with their '\n' and '\r'),
  // decoded as Feed decoded it; for a parser that has read the header. Errors name `source`.
  absl::StatusOr<RowText> TextOfRecord(absl::string_view raw) const;

 private:
  enum class LabelMode {
    kClass,       // required, integer in [0, num_labels)
    kRegression,  // required, finite real
    kOptional,    // may be absent; when present, finite real
  };
  TsvLineParser(std::string source, LabelMode mode, int num_labels, const TableOptions& options);
  absl::Status LineError(int64_t line, absl::string_view problem) const;
  // The header's column names: finds the text and label columns.
  absl::Status ReadHeader(const std::vector<absl::string_view>& names);
  // A record's label cell (already stripped) as the label mode wants it.
  absl::StatusOr<float> ParseLabel(absl::string_view text, int64_t line);
  absl::Status FeedJson(absl::string_view line, std::optional<Row>* row);
  absl::Status FeedCsv(absl::string_view line, std::optional<Row>* row);

  std::string source_;
  LabelMode mode_;
  int num_labels_;
  DataFormat format_;
  std::string text_column_, label_column_, pair_column_;
  bool infer_labels_ = true;
  std::string record_;       // CSV: the lines of a record still open, joined by '\n'
  int64_t record_line_ = 0;  // CSV: the line the open record started on; 0: none open
  enum class LabelKind { kUndecided, kIds, kNames, kInferring };
  LabelKind label_kind_ = LabelKind::kUndecided;
  std::vector<std::string> names_;       // given, or inferred (first-seen order until Finish)
  std::map<std::string, int> name_ids_;  // names_ -> id
  std::vector<int> remap_;               // inferred: first-seen id -> sorted id
  int64_t line_no_ = 0;
  int64_t pending_blank_ = 0;  // first blank line seen since the last non-blank one
  int64_t rows_ = 0;
  size_t num_columns_ = 0;
  int sentence_col_ = -1;
  int label_col_ = -1;
  int pair_col_ = -1;
  bool have_header_ = false;
};

}  // namespace ringmaster::trainer
