#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/open_beneath.h"
#include "common/status_macros.h"

namespace ringmaster {

absl::Status ErrnoError(std::string_view what, std::string_view path) {
  int err = errno;
  std::string msg =
      absl::StrCat(std::string(what), " ", std::string(path), ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == ENOSPC) return absl::ResourceExhaustedError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

const char* FileTypeName(unsigned int st_mode) {
  const mode_t m = static_cast<mode_t>(st_mode);
  return S_ISREG(m)    ? "a regular file"
         : S_ISDIR(m)  ? "a directory"
         : S_ISLNK(m)  ? "a symbolic link"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

absl::Status CheckReplaceableByRename(int dirfd, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError("cannot stat", path);
  }
  if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      path, ": is ", FileTypeName(st.st_mode),
      "; a new file is not renamed over it (that would replace it with a regular file)"));
}

absl::StatusOr<int> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever, before
  // fstat could say what the file is. O_NOCTTY: a terminal given as input stays no one's tty.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return ErrnoError("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoError("cannot stat", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is ", FileTypeName(st.st_mode), ", expected a regular file"));
  }
  // Under an allowed root, a hard link may be one to a file outside it (issue #31).
  if (absl::Status s = CheckInputLinks(path, st.st_nlink); !s.ok()) {
    ::close(fd);
    return s;
  }
  // Reads of a regular file never block anyway; clear the flag so nothing downstream sees EAGAIN.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  absl::StatusOr<int> opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  return ReadOpenedFile(*opened, path, max_bytes);
}

absl::StatusOr<std::string> ReadOpenedFile(int fd, const std::string& path, size_t max_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoError("cannot stat", path);
    ::close(fd);
    return s;
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": file is ", st.st_size, " bytes, over the limit of ", max_bytes));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = ErrnoError("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": file is over the limit of ", max_bytes, " bytes"));
    }
  }
  ::close(fd);
  return out;
}

absl::Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open directory", dir);
  int rc = ::fsync(fd);
  absl::Status s = rc == 0 ? absl::OkStatus() : ErrnoError("cannot fsync directory", dir);
  ::close(fd);
  return s;
}

absl::Status FsyncFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  int rc = ::fsync(fd);
  absl::Status s = rc == 0 ? absl::OkStatus() : ErrnoError("cannot fsync", path);
  ::close(fd);
  return s;
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot create directory ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path, std::string_view data) {
  RM_RETURN_IF_ERROR(CheckReplaceableByRename(AT_FDCWD, path, path));
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  RM_RETURN_IF_ERROR(WriteSyncClose(fd, AT_FDCWD, tmp, data));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = ErrnoError("cannot rename into", path);
    ::unlink(tmp.c_str());
    return s;
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return FsyncDir(dir.empty() ? "." : dir);
}

}  // namespace ringmaster
