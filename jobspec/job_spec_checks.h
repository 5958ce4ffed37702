// The job file's error collection and its checks after parsing, shared by the parser
// (job_spec.cc) and ValidateJobSpec: internal to jobspec/.
#pragma once

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "jobspec/job_spec.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::trainer::job_spec_internal {

// Enough to read every problem in a bad file, few enough not to bury the first one.
constexpr size_t kMaxErrors = 20;

// Where each key path's value was written, so that range checks after parsing can still point
// at a line. Sections are recorded too ("train"), for "required" errors.
using Marks = std::map<std::string, YAML::Mark, std::less<>>;
using KeySet = std::set<std::string, std::less<>>;

inline bool ValidMark(const YAML::Mark& m) { return m.line >= 0 && m.column >= 0; }

class Errors {
 public:
  explicit Errors(std::string source) : source_(std::move(source)) {}

  // "<source>:<line>:<col>: <msg>", or "<source>: <msg>" without a position.
  void Add(const YAML::Mark* mark, absl::string_view msg) {
    if (mark != nullptr && ValidMark(*mark)) {
      AddRaw(mark, absl::StrCat(source_, ":", mark->line + 1, ":", mark->column + 1, ": ", msg));
    } else {
      AddRaw(nullptr, absl::StrCat(source_, ": ", msg));
    }
  }
  // `text` is already prefixed; `mark` (may be null) only orders it.
  void AddRaw(const YAML::Mark* mark, std::string text) {
    Line line{std::numeric_limits<int>::max(), 0, std::move(text)};
    if (mark != nullptr && ValidMark(*mark)) {
      line.line = mark->line;
      line.column = mark->column;
    }
    lines_.push_back(std::move(line));
  }
  bool empty() const { return lines_.empty(); }
  void Append(const Errors& other) {
    lines_.insert(lines_.end(), other.lines_.begin(), other.lines_.end());
  }
  const std::string& source() const { return source_; }

  // All problems in file order (the order they are found in is the parser's, not the reader's);
  // problems without a position come last.
  absl::Status ToStatus() const {
    if (lines_.empty()) return absl::OkStatus();
    std::vector<Line> sorted = lines_;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Line& a, const Line& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
    std::string msg;
    for (size_t i = 0; i < sorted.size() && i < kMaxErrors; ++i) {
      absl::StrAppend(&msg, i == 0 ? "" : "\n", sorted[i].text);
    }
    if (sorted.size() > kMaxErrors) {
      absl::StrAppend(&msg, "\n(", sorted.size() - kMaxErrors, " more errors not shown)");
    }
    return absl::InvalidArgumentError(msg);
  }

 private:
  struct Line {
    int line;
    int column;
    std::string text;
  };
  std::string source_;
  std::vector<Line> lines_;
};

// A job or node name: 1-128 of [A-Za-z0-9._-], starting with a letter or digit.
bool ValidName(absl::string_view name);

// The checks behind ValidateJobSpec; `marks` (may be null) adds line numbers; `unknown` (may be
// null) names the settings already reported as misspelt.
void Validate(const JobSpec& s, const Marks* marks,
              const std::set<std::string, std::less<>>* unknown, Errors& errors);

}  // namespace ringmaster::trainer::job_spec_internal
