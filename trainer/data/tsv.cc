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

constexpr size_t kMaxFileBytes = size_t{1} << 32;  // 4 GiB

// How the label column is read.
enum class LabelMode {
  kClass,       // required, integer in [0, num_labels)
  kRegression,  // required, finite real
  kOptional,    // may be absent; when present, finite real
};

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

absl::Status LineError(const std::string& path, int64_t line, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", problem));
}

absl::StatusOr<std::vector<Example>> ParseTsvImpl(absl::string_view data, const std::string& path,
                                                  LabelMode mode, int num_labels) {
  absl::string_view rest(data);
  // Spreadsheet exports often start with a byte order mark; it is not part of the header name.
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);

  std::vector<Example> out;
  int64_t line_no = 0;
  int64_t pending_blank = 0;  // first blank line seen since the last non-blank one
  size_t num_columns = 0;
  int sentence_col = -1;
  int label_col = -1;
  bool have_header = false;

  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    absl::string_view line = rest.substr(0, nl);
    rest = nl == absl::string_view::npos ? absl::string_view() : rest.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

    if (size_t bad = FindInvalidUtf8(line); bad != absl::string_view::npos) {
      return LineError(path, line_no, absl::StrCat("invalid UTF-8 at byte ", bad + 1));
    }
    // Blank lines are tolerated only as trailing padding (editors add them); one in the middle
    // would otherwise be a silently dropped or empty example.
    if (line.empty()) {
      if (pending_blank == 0) pending_blank = line_no;
      continue;
    }
    if (pending_blank != 0) {
      return LineError(path, pending_blank,
                       have_header ? "empty line before the end of the file"
                                   : "empty line where the header was expected");
    }

    std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    if (!have_header) {
      have_header = true;
      num_columns = fields.size();
      for (size_t c = 0; c < fields.size(); ++c) {
        absl::string_view name = absl::StripAsciiWhitespace(fields[c]);
        int* slot = name == "sentence" ? &sentence_col : name == "label" ? &label_col : nullptr;
        if (slot == nullptr) continue;
        if (*slot >= 0) {
          return LineError(path, line_no, absl::StrCat("duplicate column \"", name, "\""));
        }
        *slot = static_cast<int>(c);
      }
      if (sentence_col < 0) {
        return LineError(path, line_no, "missing column \"sentence\" in the header");
      }
      if (label_col < 0 && mode != LabelMode::kOptional) {
        return LineError(path, line_no, "missing column \"label\" in the header");
      }
      continue;
    }

    if (fields.size() != num_columns) {
      return LineError(path, line_no,
                       absl::StrCat("wrong column count: expected ", num_columns,
                                    " (as in the "
                                    "header), got ",
                                    fields.size()));
    }
    Example ex;
    ex.sentence = std::string(fields[sentence_col]);
    if (label_col >= 0) {
      absl::string_view text = absl::StripAsciiWhitespace(fields[label_col]);
      if (mode == LabelMode::kClass) {
        int64_t v = 0;
        if (!absl::SimpleAtoi(text, &v)) {
          return LineError(path, line_no, absl::StrCat("label \"", text, "\" is not an integer"));
        }
        if (v < 0 || v >= num_labels) {
          return LineError(path, line_no,
                           absl::StrCat("label ", v, " is out of range [0, ", num_labels, ")"));
        }
        ex.label = static_cast<float>(v);
      } else {
        float v = 0;
        if (!absl::SimpleAtof(text, &v) || !std::isfinite(v)) {
          return LineError(path, line_no,
                           absl::StrCat("label \"", text, "\" is not a finite number"));
        }
        ex.label = v;
      }
    }
    out.push_back(std::move(ex));
  }

  if (!have_header) {
    return LineError(path, 1, "empty file: expected a header line naming the columns");
  }
  if (out.empty()) return LineError(path, 2, "no examples after the header");
  return out;
}

// The file-size limit ReadFile applies, for data that did not come through ReadFile.
absl::Status CheckSize(size_t size, absl::string_view source) {
  if (size > kMaxFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", size, " bytes exceeds the limit of ", kMaxFileBytes));
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

LabelMode ModeFor(int num_labels) {
  return num_labels == 1 ? LabelMode::kRegression : LabelMode::kClass;
}

}  // namespace

absl::StatusOr<std::vector<Example>> ReadTsv(const std::string& path, int num_labels) {
  RM_RETURN_IF_ERROR(CheckNumLabels(path, num_labels));
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxFileBytes));
  return ParseTsvImpl(data, path, ModeFor(num_labels), num_labels);
}

absl::StatusOr<std::vector<Example>> ReadTsvForPredict(const std::string& path) {
  RM_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxFileBytes));
  return ParseTsvImpl(data, path, LabelMode::kOptional, 0);
}

absl::StatusOr<std::vector<Example>> ParseTsv(std::string_view data, std::string_view source,
                                              int num_labels) {
  const std::string src(source);
  RM_RETURN_IF_ERROR(CheckNumLabels(src, num_labels));
  RM_RETURN_IF_ERROR(CheckSize(data.size(), src));
  return ParseTsvImpl(absl::string_view(data.data(), data.size()), src, ModeFor(num_labels),
                      num_labels);
}

absl::StatusOr<std::vector<Example>> ParseTsvForPredict(std::string_view data,
                                                        std::string_view source) {
  const std::string src(source);
  RM_RETURN_IF_ERROR(CheckSize(data.size(), src));
  return ParseTsvImpl(absl::string_view(data.data(), data.size()), src, LabelMode::kOptional, 0);
}

}  // namespace ringmaster::trainer
