#include "trainer/data/tsv.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/json_limits.h"
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
    ex.sentence = parser.text_is_span()
                      ? std::string(line.substr(row->sentence_begin, row->sentence_size))
                      : std::move(row->text);
    ex.text_pair = std::move(row->text_pair);
    ex.label = row->label;
    out.push_back(std::move(ex));
  }
  RM_RETURN_IF_ERROR(parser.Finish());
  for (Example& ex : out) ex.label = parser.FinalLabel(ex.label);
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

// The *Tsv readers' options: TSV whatever the file is called, the GLUE column names.
const TableOptions kTsv{DataFormat::kTsv, "sentence", "label", "", {}, /*infer_labels=*/false};

DataFormat ResolveDataFormat(DataFormat format, std::string_view path) {
  if (format != DataFormat::kAuto) return format;
  const std::string lower = absl::AsciiStrToLower(absl::string_view(path.data(), path.size()));
  if (absl::EndsWith(lower, ".csv")) return DataFormat::kCsv;
  if (absl::EndsWith(lower, ".jsonl") || absl::EndsWith(lower, ".ndjson") ||
      absl::EndsWith(lower, ".json")) {
    return DataFormat::kJsonl;
  }
  return DataFormat::kTsv;
}

absl::Status SplitCsvRecord(absl::string_view record, std::vector<std::string>* fields,
                            bool* open) {
  fields->clear();
  *open = false;
  size_t i = 0;
  const size_t n = record.size();
  for (;;) {
    std::string field;
    if (i < n && record[i] == '"') {
      ++i;
      for (;;) {
        if (i >= n) {
          *open = true;
          return absl::OkStatus();
        }
        if (record[i] == '"') {
          if (i + 1 < n && record[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;  // the closing quote
          break;
        }
        field.push_back(record[i++]);
      }
      if (i < n && record[i] != ',') {
        return absl::InvalidArgumentError(absl::StrCat(
            "field ", fields->size() + 1, ": '", record.substr(i, 1),
            "' after a closing quote (a quote inside a quoted field is written \"\")"));
      }
    } else {
      const size_t comma = std::min(record.find(',', i), n);
      field.assign(record.data() + i, comma - i);
      i = comma;
    }
    fields->push_back(std::move(field));
    if (i >= n) return absl::OkStatus();
    ++i;  // the comma; a record ending in one has an empty last field
    if (i == n) {
      fields->emplace_back();
      return absl::OkStatus();
    }
  }
}

TsvLineParser::TsvLineParser(std::string source, LabelMode mode, int num_labels,
                             const TableOptions& options)
    : source_(std::move(source)),
      mode_(mode),
      num_labels_(num_labels),
      format_(ResolveDataFormat(options.format, source_)),
      text_column_(options.text_column),
      label_column_(options.label_column),
      pair_column_(options.text_pair_column),
      infer_labels_(options.infer_labels) {
  if (!options.labels.empty()) {
    label_kind_ = LabelKind::kNames;
    names_ = options.labels;
    for (size_t i = 0; i < names_.size(); ++i) name_ids_.emplace(names_[i], static_cast<int>(i));
  }
}

absl::StatusOr<TsvLineParser> TsvLineParser::ForTraining(std::string source, int num_labels,
                                                         const TableOptions& options) {
  RM_RETURN_IF_ERROR(CheckNumLabels(source, num_labels));
  return TsvLineParser(std::move(source),
                       num_labels == 1 ? LabelMode::kRegression : LabelMode::kClass, num_labels,
                       options);
}

TsvLineParser TsvLineParser::ForPredict(std::string source, const TableOptions& options) {
  return TsvLineParser(std::move(source), LabelMode::kOptional, 0, options);
}

absl::Status TsvLineParser::LineError(int64_t line, absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", problem));
}

absl::Status TsvLineParser::ReadHeader(const std::vector<absl::string_view>& names) {
  have_header_ = true;
  num_columns_ = names.size();
  for (size_t c = 0; c < names.size(); ++c) {
    absl::string_view name = absl::StripAsciiWhitespace(names[c]);
    int* slot = name == text_column_                            ? &sentence_col_
                : name == label_column_                         ? &label_col_
                : !pair_column_.empty() && name == pair_column_ ? &pair_col_
                                                                : nullptr;
    if (slot == nullptr) continue;
    if (*slot >= 0) {
      return LineError(line_no_, absl::StrCat("duplicate column \"", name, "\""));
    }
    *slot = static_cast<int>(c);
  }
  if (sentence_col_ < 0) {
    return LineError(line_no_, absl::StrCat("missing column \"", text_column_, "\" in the header"));
  }
  if (!pair_column_.empty() && pair_col_ < 0) {
    return LineError(line_no_, absl::StrCat("missing column \"", pair_column_, "\" in the header"));
  }
  if (label_col_ < 0 && mode_ != LabelMode::kOptional) {
    return LineError(line_no_,
                     absl::StrCat("missing column \"", label_column_, "\" in the header"));
  }
  return absl::OkStatus();
}

absl::StatusOr<float> TsvLineParser::ParseLabel(absl::string_view text, int64_t line) {
  if (mode_ == LabelMode::kClass && label_kind_ == LabelKind::kUndecided) {
    // A number (1.5 included, an error below) means ids; anything else names a class.
    double v = 0;
    label_kind_ =
        absl::SimpleAtod(text, &v) || !infer_labels_ ? LabelKind::kIds : LabelKind::kInferring;
  }
  if (label_kind_ == LabelKind::kNames || (mode_ == LabelMode::kOptional && !name_ids_.empty())) {
    auto it = name_ids_.find(std::string(text));
    if (it != name_ids_.end()) return static_cast<float>(it->second);
    if (mode_ == LabelMode::kClass) {
      return LineError(line, absl::StrCat("label \"", text, "\" is not one of data.labels (",
                                          absl::StrJoin(names_, ", "), ")"));
    }
  }
  if (mode_ == LabelMode::kClass && label_kind_ == LabelKind::kInferring) {
    if (text.empty()) return LineError(line, "empty label");
    auto [it, added] = name_ids_.try_emplace(std::string(text), static_cast<int>(names_.size()));
    if (added) {
      names_.push_back(std::string(text));
      if (names_.size() > static_cast<size_t>(num_labels_)) {
        return LineError(
            line, absl::StrCat("label \"", text, "\" is a class beyond num_labels ", num_labels_,
                               " (labels so far: ", absl::StrJoin(names_, ", "), ")"));
      }
    }
    return static_cast<float>(it->second);
  }
  if (mode_ == LabelMode::kClass) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(text, &v)) {
      return LineError(line, absl::StrCat("label \"", text, "\" is not an integer"));
    }
    if (v < 0 || v >= num_labels_) {
      return LineError(line, absl::StrCat("label ", v, " is out of range [0, ", num_labels_, ")"));
    }
    return static_cast<float>(v);
  }
  float v = 0;
  if (!absl::SimpleAtof(text, &v) || !std::isfinite(v)) {
    return LineError(line, absl::StrCat("label \"", text, "\" is not a finite number"));
  }
  return v;
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
  // A line inside a quoted CSV field is content, blank or not.
  if (in_record()) return FeedCsv(line, row);
  // In a prediction input of one column, a blank line is a row: the empty sentence, which is
  // predicted as transformers would ([CLS] [SEP]), so that the output keeps one line per input
  // line.
  const bool blank_is_row = line.empty() && have_header_ && mode_ == LabelMode::kOptional &&
                            num_columns_ == 1 && format_ != DataFormat::kJsonl;
  // Otherwise blank lines are tolerated only as trailing padding (editors add them); one in the
  // middle would be a silently dropped or empty example.
  if (line.empty() && !blank_is_row) {
    if (pending_blank_ == 0) pending_blank_ = line_no_;
    return absl::OkStatus();
  }
  if (pending_blank_ != 0) {
    return LineError(pending_blank_, have_header_ || format_ == DataFormat::kJsonl
                                         ? "empty line before the end of the file"
                                         : "empty line where the header was expected");
  }
  if (format_ == DataFormat::kJsonl) return FeedJson(line, row);
  if (format_ == DataFormat::kCsv) return FeedCsv(line, row);

  std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
  if (!have_header_) return ReadHeader(fields);

  if (fields.size() != num_columns_) {
    return LineError(line_no_, absl::StrCat("wrong column count: expected ", num_columns_,
                                            " (as in the header), got ", fields.size()));
  }
  Row r;
  const absl::string_view sentence = fields[sentence_col_];
  r.sentence_begin = skipped + static_cast<size_t>(sentence.data() - line.data());
  r.sentence_size = sentence.size();
  if (pair_col_ >= 0) {
    r.text = std::string(sentence);
    r.text_pair = std::string(fields[pair_col_]);
  }
  if (label_col_ >= 0) {
    RM_ASSIGN_OR_RETURN(r.label,
                        ParseLabel(absl::StripAsciiWhitespace(fields[label_col_]), line_no_));
  }
  ++rows_;
  *row = std::move(r);
  return absl::OkStatus();
}

absl::Status TsvLineParser::FeedCsv(absl::string_view line, std::optional<Row>* row) {
  if (record_line_ == 0) {
    record_line_ = line_no_;
    record_.assign(line.data(), line.size());
  } else {
    absl::StrAppend(&record_, "\n", line);
  }
  std::vector<std::string> fields;
  bool open = false;
  absl::Status split = SplitCsvRecord(record_, &fields, &open);
  if (open) return absl::OkStatus();
  const int64_t at = std::exchange(record_line_, 0);
  if (!split.ok()) return LineError(at, split.message());
  if (!have_header_) {
    std::vector<absl::string_view> names(fields.begin(), fields.end());
    return ReadHeader(names);
  }
  if (fields.size() != num_columns_) {
    return LineError(at, absl::StrCat("wrong column count: expected ", num_columns_,
                                      " (as in the header), got ", fields.size()));
  }
  Row r;
  r.text = std::move(fields[sentence_col_]);
  if (pair_col_ >= 0) r.text_pair = std::move(fields[pair_col_]);
  if (label_col_ >= 0) {
    RM_ASSIGN_OR_RETURN(r.label, ParseLabel(absl::StripAsciiWhitespace(fields[label_col_]), at));
  }
  ++rows_;
  *row = std::move(r);
  return absl::OkStatus();
}

absl::Status TsvLineParser::FeedJson(absl::string_view line, std::optional<Row>* row) {
  have_header_ = true;  // JSON Lines has none: every line is a record
  if (absl::Status s = CheckJsonDepth(std::string_view(line.data(), line.size()), "record");
      !s.ok()) {
    return LineError(line_no_, std::string(s.message()));
  }
  const nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return LineError(line_no_, j.is_discarded() ? "not valid JSON" : "not a JSON object");
  }
  auto text = j.find(text_column_);
  if (text == j.end()) {
    return LineError(line_no_, absl::StrCat("missing key \"", text_column_, "\""));
  }
  if (!text->is_string()) {
    return LineError(line_no_, absl::StrCat("\"", text_column_, "\" is not a string"));
  }
  Row r;
  r.text = text->get<std::string>();
  // \u escapes can spell what the raw line could not (a lone surrogate is refused by the parser).
  if (size_t bad = FindInvalidUtf8(r.text); bad != absl::string_view::npos) {
    return LineError(line_no_, absl::StrCat("invalid UTF-8 in \"", text_column_, "\""));
  }
  if (!pair_column_.empty()) {
    auto pair = j.find(pair_column_);
    if (pair == j.end()) {
      return LineError(line_no_, absl::StrCat("missing key \"", pair_column_, "\""));
    }
    if (!pair->is_string()) {
      return LineError(line_no_, absl::StrCat("\"", pair_column_, "\" is not a string"));
    }
    r.text_pair = pair->get<std::string>();
    if (FindInvalidUtf8(r.text_pair) != absl::string_view::npos) {
      return LineError(line_no_, absl::StrCat("invalid UTF-8 in \"", pair_column_, "\""));
    }
  }
  auto label = j.find(label_column_);
  if (label == j.end() || label->is_null()) {
    if (mode_ != LabelMode::kOptional) {
      return LineError(line_no_, absl::StrCat("missing key \"", label_column_, "\""));
    }
  } else if (label->is_string()) {
    RM_ASSIGN_OR_RETURN(r.label, ParseLabel(label->get<std::string>(), line_no_));
  } else if (label->is_number()) {
    std::string cell = label->dump();
    // 1.0 is a class id in JSON as much as 1 is; 1.5 is refused by ParseLabel.
    if (mode_ == LabelMode::kClass && label->is_number_float()) {
      const double d = label->get<double>();
      if (d == std::floor(d) && std::fabs(d) < 1e15) cell = absl::StrCat(static_cast<int64_t>(d));
    }
    RM_ASSIGN_OR_RETURN(r.label, ParseLabel(cell, line_no_));
  } else {
    return LineError(line_no_,
                     absl::StrCat("label ", JsonExcerpt(*label), " is not a number or a string"));
  }
  ++rows_;
  *row = std::move(r);
  return absl::OkStatus();
}

absl::StatusOr<RowText> TsvLineParser::TextOfRecord(absl::string_view raw) const {
  if (raw.substr(0, 3) == "\xEF\xBB\xBF") raw.remove_prefix(3);
  // Feed's view of the record: its lines without their '\r', joined by '\n'.
  std::string record;
  record.reserve(raw.size());
  bool first = true;
  for (absl::string_view part : absl::StrSplit(raw, '\n')) {
    if (!part.empty() && part.back() == '\r') part.remove_suffix(1);
    if (!first) record.push_back('\n');
    first = false;
    record.append(part.data(), part.size());
  }
  if (format_ == DataFormat::kJsonl) {
    const nlohmann::json j = CheckJsonDepth(record, "record").ok()
                                 ? nlohmann::json::parse(record, nullptr, false)
                                 : nlohmann::json();
    auto string_at = [&j](const std::string& key) -> const nlohmann::json* {
      auto it = j.find(key);
      return it != j.end() && it->is_string() ? &*it : nullptr;
    };
    if (j.is_object()) {
      const nlohmann::json* text = string_at(text_column_);
      const nlohmann::json* pair = pair_column_.empty() ? nullptr : string_at(pair_column_);
      if (text != nullptr && (pair_column_.empty() || pair != nullptr)) {
        return RowText{text->get<std::string>(), pair ? pair->get<std::string>() : ""};
      }
    }
  } else if (format_ == DataFormat::kCsv) {
    std::vector<std::string> fields;
    bool open = false;
    if (SplitCsvRecord(record, &fields, &open).ok() && !open && fields.size() == num_columns_) {
      return RowText{std::move(fields[sentence_col_]),
                     pair_col_ >= 0 ? std::move(fields[pair_col_]) : ""};
    }
  } else {
    std::vector<absl::string_view> fields = absl::StrSplit(record, '\t');
    if (fields.size() == num_columns_) {
      return RowText{std::string(fields[sentence_col_]),
                     pair_col_ >= 0 ? std::string(fields[pair_col_]) : ""};
    }
  }
  return absl::DataLossError(
      absl::StrCat(source_, ": a record changed since the file was indexed"));
}

absl::Status TsvLineParser::Finish() {
  if (in_record()) return LineError(record_line_, "quoted field not closed by the end of the file");
  if (!have_header_) {
    return LineError(1, "empty file: expected a header line naming the columns");
  }
  if (rows_ == 0) return LineError(2, "no examples after the header");
  if (label_kind_ == LabelKind::kInferring && remap_.empty()) {
    if (names_.size() != static_cast<size_t>(num_labels_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": ", names_.size(), " distinct labels (", absl::StrJoin(names_, ", "),
          ") but num_labels is ", num_labels_, "; list every class in data.labels"));
    }
    std::vector<std::string> sorted = names_;
    std::sort(sorted.begin(), sorted.end());
    remap_.resize(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) {
      remap_[i] = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), names_[i]) -
                                   sorted.begin());
    }
    names_ = std::move(sorted);
    for (size_t i = 0; i < names_.size(); ++i) name_ids_[names_[i]] = static_cast<int>(i);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Example>> ReadTable(const std::string& path, const TableOptions& options,
                                               int num_labels) {
  RM_ASSIGN_OR_RETURN(TsvLineParser parser, TsvLineParser::ForTraining(path, num_labels, options));
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxTsvBytes));
  return ParseTsvImpl(data, std::move(parser));
}

absl::StatusOr<std::vector<Example>> ReadTableForPredict(const std::string& path,
                                                         const TableOptions& options) {
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxTsvBytes));
  return ParseTsvImpl(data, TsvLineParser::ForPredict(path, options));
}

absl::StatusOr<std::vector<Example>> ReadTsv(const std::string& path, int num_labels) {
  RM_ASSIGN_OR_RETURN(TsvLineParser parser, TsvLineParser::ForTraining(path, num_labels, kTsv));
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxTsvBytes));
  return ParseTsvImpl(data, std::move(parser));
}

absl::StatusOr<std::vector<Example>> ReadTsvForPredict(const std::string& path) {
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxTsvBytes));
  return ParseTsvImpl(data, TsvLineParser::ForPredict(path, kTsv));
}

absl::StatusOr<std::vector<Example>> ParseTsv(std::string_view data, std::string_view source,
                                              int num_labels) {
  RM_ASSIGN_OR_RETURN(TsvLineParser parser,
                      TsvLineParser::ForTraining(std::string(source), num_labels, kTsv));
  RM_RETURN_IF_ERROR(CheckSize(data.size(), std::string(source)));
  return ParseTsvImpl(absl::string_view(data.data(), data.size()), std::move(parser));
}

absl::StatusOr<std::vector<Example>> ParseTsvForPredict(std::string_view data,
                                                        std::string_view source) {
  RM_RETURN_IF_ERROR(CheckSize(data.size(), std::string(source)));
  return ParseTsvImpl(absl::string_view(data.data(), data.size()),
                      TsvLineParser::ForPredict(std::string(source), kTsv));
}

}  // namespace ringmaster::trainer
