// A log file that rotates at a size limit: `path` is the live file, `path.1` the previous one,
// up to `path.<keep>`; older ones are deleted. Remembers the last error line written (a line
// containing " ERROR ", as common/log.h formats it, else the last non-empty line) so that a
// failed rank can be explained in one line.
//
// Not thread safe: one writer (the launcher's pipe reader for that process).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ringmaster::agent {

inline constexpr size_t kMaxErrorLineBytes = 4096;

class RotatingLog {
 public:
  RotatingLog(std::string path, size_t max_bytes, int keep);
  ~RotatingLog();
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;

  // Opens (appends to) the live file.
  absl::Status Open();
  // Appends `data`, rotating first when the live file would pass max_bytes (a single write larger
  // than the limit goes into a fresh file whole).
  absl::Status Write(std::string_view data);

  // The last " ERROR " line seen, else the last non-empty line; at most kMaxErrorLineBytes.
  std::string LastErrorLine() const;

 private:
  absl::Status Rotate();
  void ScanLines(std::string_view data);

  std::string path_;
  size_t max_bytes_;
  int keep_;
  std::FILE* file_ = nullptr;
  size_t size_ = 0;
  std::string partial_;  // an unfinished line, bounded
  std::string last_error_;
  std::string last_line_;
};

}  // namespace ringmaster::agent
