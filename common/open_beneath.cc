#include "common/open_beneath.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/log_escape.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

// PinRoot's table: directory (as named, trailing '/' dropped) -> its descriptor, kept open.
struct PinnedRoot {
  std::string dir;
  int fd;
};
std::mutex g_pins_mu;
std::vector<PinnedRoot>& Pins() {
  static auto* pins = new std::vector<PinnedRoot>;
  return *pins;
}
std::atomic<bool> g_refuse_linked_inputs{false};

std::string PinKey(absl::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  return std::string(dir);
}

// A descriptor of `root`: a duplicate of the pinned one, else opened by path (O_PATH).
int OpenRootFd(const std::string& root) {
  {
    const std::string key = PinKey(root);
    std::lock_guard<std::mutex> lock(g_pins_mu);
    for (const PinnedRoot& p : Pins()) {
      if (p.dir == key) return ::fcntl(p.fd, F_DUPFD_CLOEXEC, 0);
    }
  }
  return ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

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
  return absl::InvalidArgumentError(absl::StrCat(
      "'", EscapeControlCharacters(path), "' passes through a symbolic link below ", root,
      "; files there are read and written without following links (remove "
      "the link)"));
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
  const int rootfd = OpenRootFd(root);
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
  int fd = OpenRootFd(root);
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
  // O_NONBLOCK: a FIFO planted here fails (ENXIO) instead of waiting for a reader.
  absl::StatusOr<int> fd =
      OpenBeneath(root, path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_NOCTTY, 0644);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    absl::Status s = ErrnoError("cannot stat", path);
    ::close(*fd);
    return s;
  }
  // The inode is fixed once opened: a file with one link is reachable only through `path`, so
  // what is appended cannot land in a file elsewhere (issue #31, finding 6b).
  if (!S_ISREG(st.st_mode) || st.st_nlink > 1) {
    ::close(*fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "'", EscapeControlCharacters(path), "' ",
        S_ISREG(st.st_mode)
            ? absl::StrCat("has ", st.st_nlink,
                           " hard links; it may be a link to a file elsewhere and is not "
                           "appended to (remove it)")
            : std::string("is not a regular file; it is not appended to (remove it)")));
  }
  const int flags = ::fcntl(*fd, F_GETFL);
  if (flags >= 0) ::fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK);
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

absl::Status PinRoot(const std::string& dir, const std::string& allowed_root) {
  int fd = -1;
  if (!allowed_root.empty()) {
    RM_ASSIGN_OR_RETURN(fd, OpenBeneath(allowed_root, dir, O_RDONLY | O_DIRECTORY));
  } else {
    fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("cannot open directory", dir);
  }
  const std::string key = PinKey(dir);
  std::lock_guard<std::mutex> lock(g_pins_mu);
  for (PinnedRoot& p : Pins()) {
    if (p.dir == key) {
      ::close(p.fd);
      p.fd = fd;
      return absl::OkStatus();
    }
  }
  Pins().push_back({key, fd});
  return absl::OkStatus();
}

bool IsPinnedRoot(const std::string& dir) {
  const std::string key = PinKey(dir);
  std::lock_guard<std::mutex> lock(g_pins_mu);
  for (const PinnedRoot& p : Pins()) {
    if (p.dir == key) return true;
  }
  return false;
}

void UnpinRootsForTest() {
  std::lock_guard<std::mutex> lock(g_pins_mu);
  for (const PinnedRoot& p : Pins()) ::close(p.fd);
  Pins().clear();
}

absl::StatusOr<int> OpenParentBeneath(const std::string& root, const std::string& path,
                                      std::string* name) {
  const std::filesystem::path p(path);
  *name = p.filename().string();
  if (name->empty() || *name == "." || *name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", EscapeControlCharacters(path), "' names no file"));
  }
  std::string parent = p.parent_path().string();
  if (parent.empty()) parent = ".";
  if (root.empty()) {
    const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("cannot open directory", parent);
    return fd;
  }
  return OpenBeneath(root, parent, O_RDONLY | O_DIRECTORY);
}

absl::Status RenameBeneath(const std::string& root, const std::string& from,
                           const std::string& to) {
  std::string from_name, to_name;
  RM_ASSIGN_OR_RETURN(const int from_dir, OpenParentBeneath(root, from, &from_name));
  absl::StatusOr<int> to_dir = OpenParentBeneath(root, to, &to_name);
  if (!to_dir.ok()) {
    ::close(from_dir);
    return to_dir.status();
  }
  absl::Status s = absl::OkStatus();
  if (::renameat(from_dir, from_name.c_str(), *to_dir, to_name.c_str()) != 0) {
    s = ErrnoError(absl::StrCat("cannot rename ", from, " to"), to);
  }
  ::close(from_dir);
  ::close(*to_dir);
  return s;
}

namespace {

// rm -rf of the entry `name` of `dirfd`; `shown` names it in errors.
absl::Status RemoveAt(int dirfd, const std::string& name, const std::string& shown) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError("cannot stat", shown);
  }
  if (S_ISDIR(st.st_mode)) {
    const int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return ErrnoError("cannot open directory", shown);
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      absl::Status s = ErrnoError("cannot list", shown);
      ::close(fd);
      return s;
    }
    std::vector<std::string> children;
    while (const dirent* e = ::readdir(d)) {
      const std::string child = e->d_name;
      if (child != "." && child != "..") children.push_back(child);
    }
    absl::Status s = absl::OkStatus();
    for (const std::string& child : children) {
      s.Update(RemoveAt(::dirfd(d), child, absl::StrCat(shown, "/", child)));
    }
    ::closedir(d);
    if (!s.ok()) return s;
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return ErrnoError("cannot remove directory", shown);
    }
    return absl::OkStatus();
  }
  if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoError("cannot remove", shown);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RemoveAllBeneath(const std::string& root, const std::string& path) {
  std::string name;
  absl::StatusOr<int> dir = OpenParentBeneath(root, path, &name);
  if (!dir.ok()) {
    // No parent, nothing to remove.
    return absl::IsNotFound(dir.status()) ? absl::OkStatus() : dir.status();
  }
  absl::Status s = RemoveAt(*dir, name, path);
  ::close(*dir);
  return s;
}

absl::Status FsyncDirBeneath(const std::string& root, const std::string& dir) {
  if (root.empty()) return FsyncDir(dir);
  RM_ASSIGN_OR_RETURN(const int fd, OpenBeneath(root, dir, O_RDONLY | O_DIRECTORY));
  absl::Status s = ::fsync(fd) == 0 ? absl::OkStatus() : ErrnoError("cannot fsync directory", dir);
  ::close(fd);
  return s;
}

void SetRefuseHardLinkedInputs(bool refuse) { g_refuse_linked_inputs.store(refuse); }

namespace {
std::mutex g_allowed_root_mu;
std::string& AllowedRootSlot() {
  static std::string* root = new std::string();
  return *root;
}
}  // namespace

void SetAllowedRoot(const std::string& root) {
  {
    std::lock_guard<std::mutex> lock(g_allowed_root_mu);
    AllowedRootSlot() = root;
  }
}

std::string AllowedRoot() {
  std::lock_guard<std::mutex> lock(g_allowed_root_mu);
  return AllowedRootSlot();
}

absl::Status CheckInputLinks(const std::string& path, nlink_t links) {
  if (links <= 1 || !g_refuse_linked_inputs.load()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(EscapeControlCharacters(path), ": has ", links,
                   " hard links; a confined run (--allowed-root) reads no file that may be a "
                   "hard link to one outside its root (copy the file instead of linking it)"));
}

}  // namespace ringmaster
