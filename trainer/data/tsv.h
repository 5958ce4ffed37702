// Readers for SST-2 style TSV files (GLUE layout): one header line naming the columns, then one
// example per line. Fields are split on tabs with no quoting, as in the GLUE files, so a
// sentence may contain quote characters but never a tab or a newline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::trainer {

struct Example {
  std::string sentence;
  float label = 0;  // class id for classification, real value when num_labels == 1 (regression)
};

// Reads the "sentence" and "label" columns, found by name in the header; other columns are
// allowed and ignored. Labels must be integers in [0, num_labels) when num_labels > 1 and
// finite reals when num_labels == 1. Accepts CRLF line ends, a UTF-8 byte order mark, and a
// missing final newline; blank lines are allowed only at the end of the file. Every error names
// "<path>:<line>: <problem>" (line 1 is the header). Files over 4 GiB and files with no
// examples are refused.
absl::StatusOr<std::vector<Example>> ReadTsv(const std::string& path, int num_labels);

// The same for prediction inputs, where the number of labels is not known: only "sentence" is
// required. When a "label" column exists it must hold finite numbers (kept as they are, so a
// caller can score predictions); when it does not, every label is 0.
absl::StatusOr<std::vector<Example>> ReadTsvForPredict(const std::string& path);

// The same two on file contents already in memory; `source` stands for the path in errors.
absl::StatusOr<std::vector<Example>> ParseTsv(std::string_view data, std::string_view source,
                                              int num_labels);
absl::StatusOr<std::vector<Example>> ParseTsvForPredict(std::string_view data,
                                                        std::string_view source);

// Files larger than this are refused by every reader here.
inline constexpr size_t kMaxTsvBytes = size_t{1} << 32;  // 4 GiB

// The line-by-line rules behind the readers above, for callers that stream a file instead of
// holding it (TsvRowIndex): feed every line in order and call Finish after the last one, and
// the errors are exactly ReadTsv's. Lines are split on '\n' only; the text after the last '\n'
// is a line when it is not empty.
class TsvLineParser {
 public:
  // A data row, as positions inside the line that was fed (valid as long as that line is).
  struct Row {
    size_t sentence_begin = 0;  // byte offset of the sentence field in the line
    size_t sentence_size = 0;
    float label = 0;  // 0 when the label column is optional and absent
  };

  // As ReadTsv(source, num_labels): refuses num_labels < 1.
  static absl::StatusOr<TsvLineParser> ForTraining(std::string source, int num_labels);
  // As ReadTsvForPredict.
  static TsvLineParser ForPredict(std::string source);

  // The next line without its '\n' (a '\r' before it is dropped here, and a byte order mark at
  // the start of the first line). Sets *row for a data row; leaves it empty for the header and
  // for blank lines (allowed only at the end: the next non-blank line is the error).
  absl::Status Feed(absl::string_view line, std::optional<Row>* row);
  // After the last line: refuses a file without a header or without data rows.
  absl::Status Finish() const;

  int64_t line_no() const { return line_no_; }  // lines fed so far (1-based number of the last)

 private:
  enum class LabelMode {
    kClass,       // required, integer in [0, num_labels)
    kRegression,  // required, finite real
    kOptional,    // may be absent; when present, finite real
  };
  TsvLineParser(std::string source, LabelMode mode, int num_labels)
      : source_(std::move(source)), mode_(mode), num_labels_(num_labels) {}
  absl::Status LineError(int64_t line, absl::string_view problem) const;

  std::string source_;
  LabelMode mode_;
  int num_labels_;
  int64_t line_no_ = 0;
  int64_t pending_blank_ = 0;  // first blank line seen since the last non-blank one
  int64_t rows_ = 0;
  size_t num_columns_ = 0;
  int sentence_col_ = -1;
  int label_col_ = -1;
  bool have_header_ = false;
};

}  // namespace ringmaster::trainer
