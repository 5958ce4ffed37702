// Writing the output a user named on a command line (`predict --output FILE`, `gen-data --out`'s
// files; issue #33). Every such write goes through WriteUserOutput, so that a device, FIFO or
// socket given as the output is written to, never replaced by a regular file (renaming over
// `/dev/null` as root destroyed the machine's /dev/null).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ringmaster {

// Writes `data` to the output `path` names:
// - "-": standard output (stdio's buffer is flushed first). /dev/stdout, /dev/stderr, /dev/fd/N
//   and /proc/self/fd/N, or a link straight to one of them, are that open descriptor, written
//   where it stands (a file the shell sent stdout to is appended to, not replaced).
// - an existing FIFO or character device: written in place, opened for writing without O_CREAT
//   or O_TRUNC; it is never renamed over or removed. A FIFO waits for its reader, as a shell's
//   `>` does.
// - an existing socket (AF_UNIX, stream): connected to and written to.
// - a regular file, or a name that does not exist yet: WriteFileAtomic (a temporary file renamed
//   over it), so a reader sees the old file or the new one, never half of one.
// - a directory or a block device: InvalidArgument naming the path and what it is.
// Links: with `root` empty a symbolic link is followed, and its target is written as above (a
// regular target is replaced atomically, the link stays a link); a link to nothing is refused.
// With `root` non-empty (an agent's --allowed-root, RINGMASTER_ALLOWED_ROOT) `path` (made
// absolute) must lie below `root` and no link on the way is followed (open_beneath.h).
absl::Status WriteUserOutput(const std::string& path, std::string_view data,
                             const std::string& root = "");

}  // namespace ringmaster
