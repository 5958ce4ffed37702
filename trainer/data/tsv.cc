#include "trainer/data/tsv.h"

#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {
namespace {

// Strict UTF-8 check (no overlong forms, no surrogates, nothing above U+10FFFF), so that the
// tokenizer never sees bytes it would silently mangle. Returns the byte offset of the first bad
// sequence, or npos.
size_t FindInvalidUtf8(absl::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;  // continuation byte in lead position, C0/C1 overlong lead, or F5..FF
    }
    if (i + len > n) return i;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = p[i + k];
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return absl::string_view::npos;
}

absl::StatusOr<std::vector<Example>> ParseTsvImpl(absl::string_view data, TsvLineParser parser) {
  std::vector<Example> out;
  absl::string_view rest(data);
  std::optional<TsvLineParser::Row> row;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    absl::string_view line = rest.substr(0, nl);
    rest = nl == absl::string_view::npos ? absl::string_view() : rest.substr(nl + 1);
    RM_RETURN_IF_ERROR(parser.Feed(line, &row));
    if (!row) continue;
    Example ex;
    ex.sentence = std::string(line.substr(row->sentence_begin, row->sentence_size));
    ex.label = row->label;
    out.push_back(std::move(ex));
  }
  RM_RETURN_IF_ERROR(parser.Finish());
  return out;
}

// The file-size limit ReadFile applies, for data that did not come through ReadFile.
absl::Status CheckSize(size_t size, absl::string_view source) {
  if (size > kMaxTsvBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", size, " bytes exceeds the limit of ", kMaxTsvBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckNumLabels(absl::string_view source, int num_labels) {
  if (num_labels < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": num_labels must be at least 1, got ", num_labels));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TsvLineParser> TsvLineParser::ForTraining(std::string source, int num_labels) {
  RM_RETURN_IF_ERROR(CheckNumLabels(source, num_labels));
  return TsvLineParser(std::move(source),
                       num_labels == 1 ? LabelMode::kRegression : LabelMode::kClass, num_labels);
}

TsvLineParser TsvLineParser::ForPredict(std::string source) {
  return TsvLineParser(std::move(source), LabelMode::kOptional, 0);
}

absl::Status TsvLineParser::LineError(int64_t line, absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", problem));
}

absl::Status TsvLineParser::Feed(absl::string_view line, std::optional<Row>* row) {
  row->reset();
  ++line_no_;
  size_t skipped = 0;  // bytes dropped from the front of `line` (a byte order mark)
  // Spreadsheet exports often start with a byte order mark; it is not part of the header name.
  if (line_no_ == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") {
    line.remove_prefix(3);
    skipped = 3;
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

  if (size_t bad = FindInvalidUtf8(line); bad != absl::string_view::npos) {
    return LineError(line_no_, absl::StrCat("invalid UTF-8 at byte ", bad + 1));
  }
  // Blank lines are tolerated only as trailing padding (editors add them); one in the middle
  // would otherwise be a silently dropped or empty example.
  if (line.empty()) {
    if (pending_blank_ == 0) pending_blank_ = line_no_;
    return absl::OkStatus();
  }
  if (pending_blank_ != 0) {
    return LineError(pending_blank_, have_header_ ? "empty line before the end of the file"
                                                  : "empty line where the header was expected");
  }

  std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
  if (!have_header_) {
    have_header_ = true;
    num_columns_ = fields.size();
    for (size_t c = 0; c < fields.size(); ++c) {
      absl::string_view name = absl::StripAsciiWhitespace(fields[c]);
      int* slot = name == "sentence" ? &sentence_col_ : name == "label" ? &label_col_ : nullptr;
      if (slot == nullptr) continue;
      if (*slot >= 0) {
        return LineError(line_no_, absl::StrCat("duplicate column \"", name, "\""));
      }
      *slot = static_cast<int>(c);
    }
    if (sentence_col_ < 0) {
      return LineError(line_no_, "missing column \"sentence\" in the header");
    }
    if (label_col_ < 0 && mode_ != LabelMode::kOptional) {
      return LineError(line_no_, "missing column \"label\" in the header");
    }
    return absl::OkStatus();
  }

  if (fields.size() != num_columns_) {
    return LineError(line_no_, absl::StrCat("wrong column count: expected ", num_columns_,
                                            " (as in the header), got ", fields.size()));
  }
  Row r;
  const absl::string_view sentence = fields[sentence_col_];
  r.sentence_begin = skipped + static_cast<size_t>(sentence.data() - line.data());
  r.sentence_size = sentence.size();
  if (label_col_ >= 0) {
    absl::string_view text = absl::StripAsciiWhitespace(fields[label_col_]);
    if (mode_ == LabelMode::kClass) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) {
        return LineError(line_no_, absl::StrCat("label \"", text, "\" is not an integer"));
      }
      if (v < 0 || v >= num_labels_) {
        return LineError(line_no_,
                         absl::StrCat("label ", v, " is out of range [0, ", num_labels_, ")"));
      }
      r.label = static_cast<float>(v);
    } else {
      float v = 0;
      if (!absl::SimpleAtof(text, &v) || !std::isfinite(v)) {
        return LineError(line_no_, absl::StrCat("label \"", text, "\" is not a finite number"));
      }
      r.label = v;
    }
  }
  ++rows_;
  *row = r;
  return absl::OkStatus();
}

absl::Status TsvLineParser::Finish() const {
  if (!have_header_) {
    return LineError(1, "empty file: expected a header line naming the columns");
  }
  if (rows_ == 0) return LineError(2, "no examples after the header");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Example>> ReadTsv(const std::string& path, int num_labels) {
  RM_ASSIGN_OR_RETURN(TsvLineParser parser, TsvLineParser::ForTraining(path, num_labels));
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxTsvBytes));
  return ParseTsvImpl(data, std::move(parser));
}

absl::StatusOr<std::vector<Example>> ReadTsvForPredict(const std::string& path) {
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxTsvBytes));
  return ParseTsvImpl(data, TsvLineParser::ForPredict(path));
}

absl::StatusOr<std::vector<Example>> ParseTsv(std::string_view data, std::string_view source,
                                              int num_labels) {
  RM_ASSIGN_OR_RETURN(TsvLineParser parser,
                      TsvLineParser::ForTraining(std::string(source), num_labels));
  RM_RETURN_IF_ERROR(CheckSize(data.size(), std::string(source)));
  return ParseTsvImpl(absl::string_view(data.data(), data.size()), std::move(parser));
}

absl::StatusOr<std::vector<Example>> ParseTsvForPredict(std::string_view data,
                                                        std::string_view source) {
  RM_RETURN_IF_ERROR(CheckSize(data.size(), std::string(source)));
  return ParseTsvImpl(absl::string_view(data.data(), data.size()),
                      TsvLineParser::ForPredict(std::string(source)));
}

}  // namespace ringmaster::trainer
