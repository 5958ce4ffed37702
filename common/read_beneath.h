// Reading below a directory that must not be left (issue #31): what the trainer reads back from
// its own output directory — the checkpoints it resumes from, the reports ranks hand to rank 0
// during a save — is opened the way its writes are (open_beneath.h): relative to a handle on
// `root` (the pinned one when `root` was given to PinRoot), following no symbolic link and no
// `..` below it. A checkpoint file or directory replaced by a link between runs, or a directory
// swapped for one during a run, is refused with InvalidArgument naming the path and the root,
// instead of making the run read another directory's files.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

// Opens the regular file `path` below `root` for reading; the caller closes the descriptor. A
// directory, FIFO, device or socket is InvalidArgument naming what it is (a FIFO does not block
// the open); a file with more than one link is refused as OpenRegularFile does
// (CheckInputLinks).
absl::StatusOr<int> OpenRegularFileBeneath(const std::string& root, const std::string& path);

// The whole regular file `path` below `root`; one over `max_bytes` is refused.
absl::StatusOr<std::string> ReadFileBeneath(const std::string& root, const std::string& path,
                                            size_t max_bytes);

// lstat(2) of `path` below `root`: its directory reached as OpenParentBeneath does, the entry
// itself not followed (a link is S_IFLNK). NotFound when it does not exist.
absl::StatusOr<struct stat> StatBeneath(const std::string& root, const std::string& path);

struct DirEntryBeneath {
  std::string name;
  mode_t type = 0;  // st_mode & S_IFMT of the entry itself (a link is S_IFLNK)
};

// The entries of the directory `dir` below `root` ("." and ".." left out), sorted by name.
// NotFound when `dir` does not exist.
absl::StatusOr<std::vector<DirEntryBeneath>> ListDirBeneath(const std::string& root,
                                                            const std::string& dir);

}  // namespace ringmaster
