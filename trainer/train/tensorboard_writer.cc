#include "trainer/train/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/open_beneath.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {
namespace fs = std::filesystem;

namespace {

constexpr char kPrefix[] = "events.out.tfevents.";

class FdSink : public ByteSink {
 public:
  FdSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FdSink() override { ::close(fd_); }
  FdSink(const FdSink&) = delete;
  FdSink& operator=(const FdSink&) = delete;

  absl::Status Write(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("cannot write", path_);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

std::string EventsFileName(int64_t unix_seconds, std::string_view host) {
  std::string h(host.empty() ? "localhost" : host);
  for (char& c : h) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      c = '_';
    }
  }
  return absl::StrCat(kPrefix, unix_seconds, ".", h);
}

int64_t NextEventsFileSeconds(int64_t now, const std::vector<std::string>& existing) {
  int64_t seconds = now;
  for (const std::string& name : existing) {
    if (!absl::StartsWith(name, kPrefix)) continue;
    const std::string rest = name.substr(sizeof kPrefix - 1);
    int64_t t = 0;
    if (absl::SimpleAtoi(rest.substr(0, rest.find('.')), &t)) seconds = std::max(seconds, t + 1);
  }
  return seconds;
}

TensorBoardWriter::TensorBoardWriter(std::unique_ptr<ByteSink> sink, std::string path,
                                     double wall_time)
    : sink_(std::move(sink)), path_(std::move(path)) {
  Add(EncodeFileVersionEvent(wall_time));
}

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Create(
    const std::string& root, const std::string& dir, double wall_time, std::string_view host) {
  RM_RETURN_IF_ERROR(root.empty() ? MakeDirs(dir) : MakeDirsBeneath(root, dir));
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  const int64_t seconds = NextEventsFileSeconds(static_cast<int64_t>(wall_time), names);
  const std::string path = (fs::path(dir) / EventsFileName(seconds, host)).string();
  // O_EXCL: a name already taken (a second writer in the directory) fails rather than
  // overwriting that writer's file.
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_APPEND;
  int fd = -1;
  if (root.empty()) {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError("cannot create", path);
  } else {
    RM_ASSIGN_OR_RETURN(fd, OpenBeneath(root, path, flags, 0644));
  }
  return std::make_unique<TensorBoardWriter>(std::make_unique<FdSink>(fd, path), path, wall_time);
}

void TensorBoardWriter::Add(std::string_view event) {
  if (!failed_) buffer_ += FrameRecord(event);
}

void TensorBoardWriter::AddScalars(int64_t step, double wall_time,
                                   const std::vector<ScalarValue>& values) {
  if (!values.empty()) Add(EncodeScalarsEvent(wall_time, step, values));
}

void TensorBoardWriter::AddSessionStart(int64_t step, double wall_time) {
  Add(EncodeSessionStartEvent(wall_time, step));
}

void TensorBoardWriter::Flush() {
  if (failed_ || buffer_.empty()) return;
  if (absl::Status s = sink_->Write(buffer_); !s.ok()) {
    failed_ = true;
    LogWarning(absl::StrCat("TensorBoard events ", path_, ": ", s.message(),
                            "; no more TensorBoard events are written (training goes on; "
                            "metrics.jsonl has every figure)"));
  }
  buffer_.clear();
}

}  // namespace ringmaster::trainer
