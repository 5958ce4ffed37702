#include "common/user_output.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/open_beneath.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

// Writes all of `data` to `fd` (send(2) without SIGPIPE for a socket); errors name `what`.
absl::Status WriteAll(int fd, std::string_view data, const std::string& what, bool socket) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = socket ? ::send(fd, p, left, MSG_NOSIGNAL) : ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write to", what);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// The descriptor a name of one of this process's open files stands for: /dev/stdout,
// /dev/stderr, /dev/fd/N, /proc/self/fd/N; -1 for any other name.
int DescriptorNamed(absl::string_view path) {
  if (path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (absl::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    int fd = -1;
    if (absl::ConsumePrefix(&path, prefix) && absl::SimpleAtoi(path, &fd) && fd >= 0) return fd;
  }
  return -1;
}

// Writes to an open descriptor, in place: a file the shell redirected stdout to is appended to
// where it stands, not replaced.
absl::Status WriteDescriptor(int fd, std::string_view data, const std::string& what) {
  std::fflush(fd == STDERR_FILENO ? stderr : stdout);  // what was printed before comes first
  return WriteAll(fd, data, what, false);
}

// Writes to the FIFO or device `path`, opened without O_CREAT or O_TRUNC; `want` is what it was
// found to be, and the open must reach that same node.
absl::Status WriteInPlace(const std::string& path, const std::string& root, const struct stat& want,
                          std::string_view data) {
  // O_NOCTTY: a terminal named as the output becomes no one's controlling tty.
  int fd = -1;
  if (root.empty()) {
    fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("cannot open for writing", path);
  } else {
    absl::StatusOr<int> opened = OpenBeneath(root, path, O_WRONLY | O_NOCTTY);
    if (!opened.ok()) return opened.status();
    fd = *opened;
  }
  struct stat got {};
  if (::fstat(fd, &got) != 0) {
    absl::Status s = ErrnoError("cannot stat", path);
    ::close(fd);
    return s;
  }
  if (got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
    ::close(fd);
    return absl::AbortedError(absl::StrCat(path, ": changed while being opened; not written"));
  }
  absl::Status s = WriteAll(fd, data, path, false);
  if (::close(fd) != 0 && s.ok()) s = ErrnoError("cannot close", path);
  return s;
}

// Connects to the AF_UNIX stream socket `path` and writes `data` to it.
absl::Status WriteToSocket(const std::string& path, std::string_view data) {
  struct sockaddr_un addr {};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a socket whose path is over ",
                                                   sizeof(addr.sun_path) - 1,
                                                   " bytes; connect to it by a shorter path"));
  }
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("cannot create a socket for", path);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status s = ErrnoError("cannot connect to the socket", path);
    ::close(fd);
    return s;
  }
  absl::Status s = WriteAll(fd, data, path, true);
  ::close(fd);
  return s;
}

}  // namespace

absl::Status WriteUserOutput(const std::string& path_arg, std::string_view data,
                             const std::string& root) {
  if (path_arg == "-") return WriteDescriptor(STDOUT_FILENO, data, "standard output");
  if (path_arg.empty()) {
    return absl::InvalidArgumentError("the output path is empty ('-' is standard output)");
  }
  // /dev/stdout and the like, or a link to one: that descriptor itself (following the link to
  // /proc/self/fd/1 and renaming over its target would replace the file stdout was sent to).
  if (int fd = DescriptorNamed(path_arg); fd >= 0) return WriteDescriptor(fd, data, path_arg);
  if (root.empty()) {
    std::error_code ec;
    if (fs::is_symlink(path_arg, ec)) {
      const std::string to = fs::read_symlink(path_arg, ec).string();
      if (int fd = ec ? -1 : DescriptorNamed(to); fd >= 0) {
        return WriteDescriptor(fd, data, absl::StrCat(path_arg, " (", to, ")"));
      }
    }
  }
  // With an absolute root: lexically absolute (a `..` stays, for OpenBeneath to refuse).
  const std::string path =
      root.empty() || root[0] != '/' ? path_arg : fs::absolute(path_arg).string();
  std::string target = path;  // the file an atomic write replaces: a link's target, if one
  struct stat st {};
  bool exists = true;
  if (!root.empty()) {
    // O_PATH reaches the node itself (a FIFO is not opened); no link on the way is followed.
    absl::StatusOr<int> node = OpenBeneath(root, path, O_PATH);
    if (!node.ok()) {
      if (node.status().code() != absl::StatusCode::kNotFound) return node.status();
      exists = false;
    } else {
      const int rc = ::fstat(*node, &st);
      const int err = errno;
      ::close(*node);
      errno = err;
      if (rc != 0) return ErrnoError("cannot stat", path);
      // The component-by-component fallback opens a final link itself (O_PATH | O_NOFOLLOW).
      if (S_ISLNK(st.st_mode)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", path, "' is a symbolic link below ", root,
            "; writes there do not follow links (name the target itself, or remove the link)"));
      }
    }
  } else if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoError("cannot stat", path);
    exists = false;
  } else if (S_ISLNK(st.st_mode)) {
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) {
        return absl::InvalidArgumentError(absl::StrCat(
            path,
            ": is a symbolic link to a file that does not exist; name the output file itself"));
      }
      return ErrnoError("cannot follow the symbolic link", path);
    }
    std::error_code ec;
    target = fs::canonical(path, ec).string();
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot resolve the symbolic link ", path, ": ", ec.message()));
    }
  }
  if (!exists || S_ISREG(st.st_mode)) {
    return root.empty() ? WriteFileAtomic(target, data) : WriteFileAtomicBeneath(root, path, data);
  }
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) return WriteInPlace(path, root, st, data);
  // Checked above through OpenBeneath where a root applies; connect(2) resolves the path again.
  if (S_ISSOCK(st.st_mode)) return WriteToSocket(path, data);
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": is ", FileTypeName(st.st_mode),
      "; the output must be a file, a FIFO, a character device or a socket ('-' is standard "
      "output)"));
}

}  // namespace ringmaster
