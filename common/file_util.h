// Whole-file reads and crash-safe writes (temp file, fsync, rename, fsync dir).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

// Opens `path` for reading and returns the descriptor (the caller closes it). Only a regular file
// (or a symlink to one) is accepted: a directory, FIFO, device or socket is InvalidArgument naming
// the path and what it is, without blocking (a FIFO with no writer would hang a plain open()).
absl::StatusOr<int> OpenRegularFile(const std::string& path);

// Reads a whole regular file (OpenRegularFile); errors name the path. Files over `max_bytes` are
// refused.
absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes = size_t{1} << 32);

// ReadFile's reading part, for a descriptor the caller opened (and this call closes); `path`
// names it in errors.
absl::StatusOr<std::string> ReadOpenedFile(int fd, const std::string& path, size_t max_bytes);

// Writes `data` to `path` so that a crash leaves either the old file or the new one:
// writes `path.tmp.<pid>`, fsyncs it, renames it over `path`, fsyncs the directory. An existing
// `path` that is a device, FIFO, socket or directory is refused (CheckReplaceableByRename): for
// an output a user named, use WriteUserOutput (user_output.h), which writes those in place.
absl::Status WriteFileAtomic(const std::string& path, std::string_view data);

// OK when `name` (relative to `dirfd`, or a path with AT_FDCWD) does not exist, is a regular file
// or is a symbolic link (a rename replaces the link itself, not its target). A character or block
// device, FIFO, socket or directory is FailedPrecondition naming `path` and what it is: renaming
// a new file over it would destroy the node (issue #33: `/dev/null` replaced by a regular file).
absl::Status CheckReplaceableByRename(int dirfd, const std::string& name, const std::string& path);

// "a FIFO", "a character device", "a block device", "a socket", "a directory", "a symbolic link",
// "a regular file", else "not a regular file": what st_mode's type is, for messages.
const char* FileTypeName(unsigned int st_mode);

// fsync on a directory, so that renames inside it are durable.
absl::Status FsyncDir(const std::string& dir);

// fsync on a file that is already written and closed.
absl::Status FsyncFile(const std::string& path);

// mkdir -p.
absl::Status MakeDirs(const std::string& dir);

// An error Status carrying errno's text: "<what> <path>: <strerror>".
absl::Status ErrnoError(std::string_view what, std::string_view path);

}  // namespace ringmaster
