#include "common/open_beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/log_escape.h"

namespace ringmaster {
namespace {

// The components of `path` below `root` ("a/b/c" -> {"a", "b", "c"}; `root` itself -> {}).
absl::StatusOr<std::vector<std::string>> ComponentsBeneath(const std::string& root,
                                                           const std::string& path) {
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("'", EscapeControlCharacters(path), "' ", why,
                                                   " (writes stay below ", root, ")"));
  };
  if (std::optional<size_t> at = FindControlCharacter(path)) {
    return refuse(absl::StrFormat("holds a control character (byte 0x%02x at offset %d)",
                                  static_cast<unsigned char>(path[*at]), *at));
  }
  absl::string_view rel = path;
  absl::string_view r = root;
  while (r.size() > 1 && r.back() == '/') r.remove_suffix(1);
  const bool inside = r.empty()  ? false
                      : r == "." ? (rel.empty() || rel[0] != '/')  // any relative path is below "."
                      : r == "/"
                          ? (!rel.empty() && rel[0] == '/')
                          : (rel == r || (rel.size() > r.size() && rel.substr(0, r.size()) == r &&
                                          rel[r.size()] == '/'));
  if (!inside) return refuse("is not below the directory");
  if (r != ".") rel.remove_prefix(r == "/" ? 1 : r.size());
  std::vector<std::string> parts;
  for (absl::string_view c : absl::StrSplit(rel, '/', absl::SkipEmpty())) {
    if (c == ".") continue;
    if (c == "..") return refuse("has a '..' component");
    parts.emplace_back(c);
  }
  return parts;
}

absl::Status LinkRefused(const std::string& root, const std::string& path) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", EscapeControlCharacters(path), "' passes through a symbolic link below ",
                   root, "; writes there do not follow links (remove the link)"));
}

// Is the entry `name` in `dirfd` a symbolic link (not following it)?
bool IsLinkAt(int dirfd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

// One component at a time with O_NOFOLLOW; -1 with errno set on failure (ELOOP for a link).
int WalkOpen(int rootfd, const std::vector<std::string>& parts, int flags, mode_t mode) {
  if (parts.empty()) return ::openat(rootfd, ".", flags | O_CLOEXEC, mode);
  int fd = rootfd;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const int next = ::openat(fd, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int open_err = errno;
    const int err = (next < 0 && IsLinkAt(fd, parts[i])) ? ELOOP : open_err;
    if (fd != rootfd) ::close(fd);
    if (next < 0) {
      errno = err;
      return -1;
    }
    fd = next;
  }
  const int out = ::openat(fd, parts.back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  const int open_err = errno;
  const int err = (out < 0 && IsLinkAt(fd, parts.back())) ? ELOOP : open_err;
  if (fd != rootfd) ::close(fd);
  errno = err;
  return out;
}

int OpenAt2(int rootfd, const std::vector<std::string>& parts, int flags, mode_t mode) {
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  // openat2 refuses a mode without O_CREAT/O_TMPFILE.
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const std::string rel = parts.empty() ? "." : absl::StrJoin(parts, "/");
  return static_cast<int>(::syscall(SYS_openat2, rootfd, rel.c_str(), &how, sizeof(how)));
}

absl::StatusOr<int> OpenBeneathWith(bool walk, const std::string& root, const std::string& path,
                                    int flags, mode_t mode) {
  absl::StatusOr<std::vector<std::string>> parts = ComponentsBeneath(root, path);
  if (!parts.ok()) return parts.status();
  const int rootfd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) return ErrnoError("cannot open directory", root);
  int fd = walk ? -1 : OpenAt2(rootfd, *parts, flags, mode);
  if (walk || (fd < 0 && errno == ENOSYS)) fd = WalkOpen(rootfd, *parts, flags, mode);
  const int err = errno;
  ::close(rootfd);
  if (fd >= 0) return fd;
  // ELOOP: a link (RESOLVE_NO_SYMLINKS, O_NOFOLLOW); EXDEV: openat2 would have left `root`.
  if (err == ELOOP || err == EXDEV) return LinkRefused(root, path);
  errno = err;
  return ErrnoError("cannot open", path);
}

}  // namespace

absl::Status WriteSyncClose(int fd, int dirfd, const std::string& tmp, std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = ErrnoError("cannot write", tmp);
      ::close(fd);
      ::unlinkat(dirfd, tmp.c_str(), 0);
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status s = ErrnoError("cannot fsync", tmp);
    ::close(fd);
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return s;
  }
  ::close(fd);
  return absl::OkStatus();
}

std::optional<size_t> FindControlCharacter(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return i;
  }
  return std::nullopt;
}

absl::StatusOr<int> OpenBeneath(const std::string& root, const std::string& path, int flags,
                                mode_t mode) {
  return OpenBeneathWith(false, root, path, flags, mode);
}

namespace internal {
absl::StatusOr<int> OpenBeneathByWalk(const std::string& root, const std::string& path, int flags,
                                      mode_t mode) {
  return OpenBeneathWith(true, root, path, flags, mode);
}
}  // namespace internal

absl::Status MakeDirsBeneath(const std::string& root, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> parts = ComponentsBeneath(root, dir);
  if (!parts.ok()) return parts.status();
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open directory", root);
  for (const std::string& part : *parts) {
    if (::mkdirat(fd, part.c_str(), 0755) != 0 && errno != EEXIST) {
      absl::Status s = ErrnoError("cannot create directory", dir);
      ::close(fd);
      return s;
    }
    const int next = ::openat(fd, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    const bool link = next < 0 && IsLinkAt(fd, part);
    ::close(fd);
    if (link) return LinkRefused(root, dir);
    if (next < 0) {
      errno = err;
      return ErrnoError("cannot enter directory", dir);
    }
    fd = next;
  }
  ::close(fd);
  return absl::OkStatus();
}

absl::Status WriteFileAtomicBeneath(const std::string& root, const std::string& path,
                                    std::string_view data) {
  if (root.empty()) return WriteFileAtomic(path, data);
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' names no file"));
  }
  absl::StatusOr<int> dir = OpenBeneath(root, p.parent_path().string(), O_RDONLY | O_DIRECTORY);
  if (!dir.ok()) return dir.status();
  if (absl::Status s = CheckReplaceableByRename(*dir, name, path); !s.ok()) {
    ::close(*dir);
    return s;
  }
  const std::string tmp = absl::StrCat(name, ".tmp.", ::getpid());
  const int fd =
      ::openat(*dir, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    absl::Status s =
        IsLinkAt(*dir, tmp) ? LinkRefused(root, path) : ErrnoError("cannot create", tmp);
    ::close(*dir);
    return s;
  }
  absl::Status s = WriteSyncClose(fd, *dir, tmp, data);
  // renameat replaces `name` itself, a link there included: it never writes through one.
  if (s.ok() && ::renameat(*dir, tmp.c_str(), *dir, name.c_str()) != 0) {
    s = ErrnoError("cannot rename into", path);
    ::unlinkat(*dir, tmp.c_str(), 0);
  }
  if (s.ok() && ::fsync(*dir) != 0) s = ErrnoError("cannot fsync directory of", path);
  ::close(*dir);
  return s;
}

absl::Status AppendFileBeneath(const std::string& root, const std::string& path,
                               std::string_view data) {
  absl::StatusOr<int> fd = OpenBeneath(root, path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (!fd.ok()) return fd.status();
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(*fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = ErrnoError("cannot append to", path);
      ::close(*fd);
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(*fd);
  return absl::OkStatus();
}

}  // namespace ringmaster
