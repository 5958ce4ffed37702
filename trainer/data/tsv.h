// Readers for SST-2 style TSV files (GLUE layout): one header line naming the columns, then one
// example per line. Fields are split on tabs with no quoting, as in the GLUE files, so a
// sentence may contain quote characters but never a tab or a newline.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

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

}  // namespace ringmaster::trainer
