// Writing below a directory that must not be left (issue #20, item 2: --allowed-root bypasses).
//
// `path` lies lexically inside `root` (it starts with `root`); it is opened relative to a
// handle on `root`, component by component, so that neither a symbolic link planted below
// `root` nor a `..` can take the open elsewhere. Linux openat2(2) with RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS does it in one call; on kernels without openat2 (before 5.6) each
// component is opened with O_NOFOLLOW from the previous one's descriptor. `root` itself is
// trusted (it may be reached through links). A link, `..`, a path outside `root` or a control
// character in `path` is InvalidArgument naming the path and the root.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

// Opens `path` below `root` with open(2) `flags` (O_CLOEXEC added) and `mode`; the caller
// closes the descriptor.
absl::StatusOr<int> OpenBeneath(const std::string& root, const std::string& path, int flags,
                                mode_t mode = 0);

// mkdir -p of `dir` below `root`: each missing component is created with mkdirat(2) and entered
// with O_NOFOLLOW, so an existing link on the way is refused. `dir` == `root` just checks it.
absl::Status MakeDirsBeneath(const std::string& root, const std::string& dir);

// WriteFileAtomic of `path` below `root`: the temporary file is created (O_NOFOLLOW) and renamed
// inside the parent directory's descriptor opened with OpenBeneath. An empty `root` is plain
// WriteFileAtomic.
absl::Status WriteFileAtomicBeneath(const std::string& root, const std::string& path,
                                    std::string_view data);

// Appends `data` to `path` below `root` (created 0644 when missing) through OpenBeneath.
absl::Status AppendFileBeneath(const std::string& root, const std::string& path,
                               std::string_view data);

// Offset of the first control character (a byte below 0x20, or 0x7f; NUL included) in `s`.
// A NUL cuts a path short in C calls, so a path holding one checks as one file and opens as
// another.
std::optional<size_t> FindControlCharacter(std::string_view s);

// Writes all of `data` to `fd`, fsyncs and closes it; on failure also unlinks `tmp` (named
// relative to `dirfd`, or a path with AT_FDCWD). The write step of every atomic file write
// (WriteFileAtomic in file_util.h and the ones here).
absl::Status WriteSyncClose(int fd, int dirfd, const std::string& tmp, std::string_view data);

// ---- Directory handles opened once (issue #31, finding 6) ----
// A root named by path is opened again at every call above, so a directory swapped for a
// symbolic link while the program runs redirects every later write. PinRoot opens `dir` once
// (below `allowed_root` following no link when that is not empty, else by path) and keeps the
// descriptor for the life of the process: every *Beneath call whose `root` is `dir` (the same
// string, trailing '/' aside) resolves from that descriptor instead of the path. Pinning the
// same `dir` again replaces the handle.
absl::Status PinRoot(const std::string& dir, const std::string& allowed_root);
bool IsPinnedRoot(const std::string& dir);
// Drops every pinned root (tests).
void UnpinRootsForTest();

// The directory holding `path` below `root`, opened O_RDONLY | O_DIRECTORY through OpenBeneath
// (through open(2) when `root` is empty), and the last component in *name; the caller closes it.
absl::StatusOr<int> OpenParentBeneath(const std::string& root, const std::string& path,
                                      std::string* name);

// renameat(2) of `from` to `to`, both below `root`: neither parent is reached through a link,
// and the names themselves are renamed, never followed.
absl::Status RenameBeneath(const std::string& root, const std::string& from, const std::string& to);

// rm -rf of `path` below `root` through directory descriptors (O_NOFOLLOW at every level): a
// link met on the way is removed, never followed. A missing `path` is not an error.
absl::Status RemoveAllBeneath(const std::string& root, const std::string& path);

// fsync of the directory `dir` below `root`.
absl::Status FsyncDirBeneath(const std::string& root, const std::string& dir);

// Hard links (issue #31, finding 6b). A hard link to a file elsewhere cannot be told from the
// file itself; a regular file with more than one link may be one. Appends (AppendFileBeneath)
// always refuse such a file. Inputs are refused too once SetRefuseHardLinkedInputs(true) was
// called (the trainer does when RINGMASTER_ALLOWED_ROOT confines it): OpenRegularFile then calls
// CheckInputLinks on what it opened.
void SetRefuseHardLinkedInputs(bool refuse);
absl::Status CheckInputLinks(const std::string& path, nlink_t links);

// The root this process is confined to (the trainer under an agent's --allowed-root: its
// RINGMASTER_ALLOWED_ROOT, read by the program's one environment reader and set here once at
// start-up); empty: unconfined.
void SetAllowedRoot(const std::string& root);
std::string AllowedRoot();

namespace internal {
// OpenBeneath without openat2 (the fallback walk), for tests on kernels that have it.
absl::StatusOr<int> OpenBeneathByWalk(const std::string& root, const std::string& path, int flags,
                                      mode_t mode);
}  // namespace internal

}  // namespace ringmaster
