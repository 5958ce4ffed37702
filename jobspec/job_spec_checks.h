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
    reported_.insert(other.reported_.begin(), other.reported_.end());
  }
  const std::string& source() const { return source_; }

  // Key paths whose value is already reported as unreadable (wrong type, misspelt setting, a
  // section that is not a mapping): the checks after parsing skip them and what lies under
  // them, so that one mistake is reported once while every other mistake is still reported.
  void NoteReported(absl::string_view path) { reported_.emplace(path); }
  bool Reported(absl::string_view path) const {
    std::string p(path);
    while (true) {
      if (reported_.contains(p)) return true;
      size_t dot = p.rfind('.');
      if (dot == std::string::npos) return false;
      p.resize(dot);
    }
  }
  // Whether anything at or under `prefix` is reported.
  bool ReportedUnder(absl::string_view prefix) const {
    for (auto it = reported_.lower_bound(prefix); it != reported_.end(); ++it) {
      absl::string_view p = *it;
      if (p.substr(0, prefix.size()) != prefix) break;
      if (p.size() == prefix.size() || p[prefix.size()] == '.' || p[prefix.size()] == '[') {
        return true;
      }
    }
    return Reported(prefix);
  }

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
  std::set<std::string, std::less<>> reported_;
};

// A job or node name: 1-128 of [A-Za-z0-9._-], starting with a letter or digit.
bool ValidName(absl::string_view name);

// The checks behind ValidateJobSpec; `marks` (may be null) adds line numbers; `unknown` (may be
// null) names the settings already reported as misspelt. A key path `errors` already holds as
// reported (Errors::NoteReported) is not checked again.
void Validate(const JobSpec& s, const Marks* marks,
              const std::set<std::string, std::less<>>* unknown, Errors& errors);

}  // namespace ringmaster::trainer::job_spec_internal
