#include "common/read_beneath.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/open_beneath.h"
#include "common/status_macros.h"

namespace ringmaster {

absl::StatusOr<int> OpenRegularFileBeneath(const std::string& root, const std::string& path) {
  // O_NONBLOCK: a FIFO opened for reading would wait for a writer; cleared below for a file.
  RM_ASSIGN_OR_RETURN(const int fd, OpenBeneath(root, path, O_RDONLY | O_NONBLOCK | O_NOCTTY));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoError("cannot stat", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is ", FileTypeName(st.st_mode), ", expected a regular file"));
  }
  if (absl::Status s = CheckInputLinks(path, st.st_nlink); !s.ok()) {
    ::close(fd);
    return s;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

absl::StatusOr<std::string> ReadFileBeneath(const std::string& root, const std::string& path,
                                            size_t max_bytes) {
  RM_ASSIGN_OR_RETURN(const int fd, OpenRegularFileBeneath(root, path));
  return ReadOpenedFile(fd, path, max_bytes);
}

absl::StatusOr<struct stat> StatBeneath(const std::string& root, const std::string& path) {
  std::string name;
  RM_ASSIGN_OR_RETURN(const int dir, OpenParentBeneath(root, path, &name));
  struct stat st {};
  const int rc = ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW);
  absl::Status s = rc == 0 ? absl::OkStatus() : ErrnoError("cannot stat", path);
  ::close(dir);
  if (!s.ok()) return s;
  return st;
}

absl::StatusOr<std::vector<DirEntryBeneath>> ListDirBeneath(const std::string& root,
                                                            const std::string& dir) {
  RM_ASSIGN_OR_RETURN(const int fd, OpenBeneath(root, dir, O_RDONLY | O_DIRECTORY));
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    absl::Status s = ErrnoError("cannot list", dir);
    ::close(fd);
    return s;
  }
  std::vector<DirEntryBeneath> out;
  absl::Status s = absl::OkStatus();
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed since it was listed
      s = ErrnoError("cannot stat", absl::StrCat(dir, "/", name));
      break;
    }
    out.push_back({name, static_cast<mode_t>(st.st_mode & S_IFMT)});
  }
  ::closedir(d);
  if (!s.ok()) return s;
  std::sort(out.begin(), out.end(),
            [](const DirEntryBeneath& a, const DirEntryBeneath& b) { return a.name < b.name; });
  return out;
}

}  // namespace ringmaster
