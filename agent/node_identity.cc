#include "agent/node_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace ringmaster::agent {

std::optional<NodeIdentity> LoadNodeIdentity(const std::string& path, const std::string& node_name,
                                             std::string* why) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) *why = absl::StrCat(path, ": ", std::strerror(errno));
    return std::nullopt;
  }
  absl::StatusOr<std::string> text = ReadFile(path, 4096);
  if (!text.ok()) {
    *why = std::string(text.status().message());
    return std::nullopt;
  }
  std::vector<std::string> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  if (lines.size() != 3 || lines[1].empty() || lines[2].empty()) {
    *why = absl::StrCat(path, ": not three lines (node name, node id, secret); ignored");
    return std::nullopt;
  }
  if (lines[0] != node_name) {
    *why = absl::StrCat(path, ": holds the identity of another node name; ignored");
    return std::nullopt;
  }
  return NodeIdentity{lines[1], lines[2]};
}

absl::Status SaveNodeIdentity(const std::string& path, const std::string& node_name,
                              const NodeIdentity& identity) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  const std::string data =
      absl::StrCat(node_name, "\n", identity.node_id, "\n", identity.secret, "\n");
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status st = ErrnoError("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return st;
    }
    done += static_cast<size_t>(n);
  }
  const int synced = ::fsync(fd);
  if (::close(fd) != 0 || synced != 0) {
    absl::Status st = ErrnoError("cannot sync", tmp);
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status st = ErrnoError("cannot rename over", path);
    ::unlink(tmp.c_str());
    return st;
  }
  const size_t slash = path.rfind('/');
  return FsyncDir(slash == std::string::npos ? "." : path.substr(0, slash));
}

}  // namespace ringmaster::agent
