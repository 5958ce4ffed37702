#include "agent/rotating_log.h"

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ringmaster::agent {

RotatingLog::RotatingLog(std::string path, size_t max_bytes, int keep)
    : path_(std::move(path)), max_bytes_(max_bytes == 0 ? 1 : max_bytes), keep_(keep) {}

RotatingLog::~RotatingLog() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status RotatingLog::Open() {
  file_ = std::fopen(path_.c_str(), "ae");
  if (file_ == nullptr) return ErrnoError("cannot open log", path_);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  size_ = ec ? 0 : static_cast<size_t>(size);
  return absl::OkStatus();
}

absl::Status RotatingLog::Rotate() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  std::error_code ec;
  if (keep_ <= 0) {
    std::filesystem::remove(path_, ec);
  } else {
    std::filesystem::remove(absl::StrCat(path_, ".", keep_), ec);
    for (int i = keep_ - 1; i >= 1; --i) {
      const std::string from = absl::StrCat(path_, ".", i);
      if (std::filesystem::exists(from, ec)) {
        std::filesystem::rename(from, absl::StrCat(path_, ".", i + 1), ec);
      }
    }
    std::filesystem::rename(path_, absl::StrCat(path_, ".1"), ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot rotate ", path_, ": ", ec.message()));
  }
  file_ = std::fopen(path_.c_str(), "we");
  if (file_ == nullptr) return ErrnoError("cannot open log", path_);
  size_ = 0;
  return absl::OkStatus();
}

absl::Status RotatingLog::Write(std::string_view data) {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, ": not open"));
  ScanLines(data);
  if (size_ > 0 && size_ + data.size() > max_bytes_) {
    if (absl::Status s = Rotate(); !s.ok()) return s;
  }
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size() || std::fflush(file_) != 0) {
    return ErrnoError("cannot write log", path_);
  }
  size_ += data.size();
  return absl::OkStatus();
}

void RotatingLog::ScanLines(std::string_view data) {
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t nl = data.find('\n', pos);
    const std::string_view piece =
        data.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (partial_.size() < kMaxErrorLineBytes) {
      partial_.append(piece.substr(0, kMaxErrorLineBytes - partial_.size()));
    }
    if (nl == std::string_view::npos) break;
    if (!partial_.empty()) {
      if (partial_.find(" ERROR ") != std::string::npos) last_error_ = partial_;
      last_line_ = std::move(partial_);
    }
    partial_.clear();
    pos = nl + 1;
  }
}

std::string RotatingLog::LastErrorLine() const {
  if (!last_error_.empty()) return last_error_;
  if (!partial_.empty()) return partial_;
  return last_line_;
}

}  // namespace ringmaster::agent
