// Which files a job may name: with `--allowed-root DIR` the agent confines every path of a job
// spec (data, model, output) to those directories, so a StartRanks cannot make the trainer read
// or write elsewhere on the node.
//
// A path is inside a root when its canonical form (std::filesystem::weakly_canonical: symlinks
// of the existing prefix followed, `.` and `..` removed; a part that does not exist yet, such as
// a new output.dir, is normalised lexically) equals the root's canonical form or lies below it,
// compared component by component (/data2 is not inside /data). So `..` and a symlink inside a
// root that points outside are both refused; a symlink to somewhere inside a root is fine.
//
// The check is made when the ranks are started: a symlink swapped in afterwards is not seen by
// it. What the trainer writes is safe from that too: the agent creates output.dir below its
// root with MakeDirsBeneath (no link followed), passes the root to the trainer
// (RINGMASTER_ALLOWED_ROOT), and the trainer opens everything it writes below output.dir
// without following links (common/file_util.h). A path holding a control character (a NUL
// would make C calls open another path than the one checked) is refused.
// Pure functions of the filesystem; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jobspec/job_spec.h"

namespace ringmaster::agent {

// OK when `path` (absolute) lies inside one of `roots`, or `roots` is empty (no restriction).
// Otherwise InvalidArgument naming `field`, the path, what it resolves to and the roots.
absl::Status CheckPathWithinRoots(const std::string& field, const std::string& path,
                                  const std::vector<std::string>& roots);

// The root of `roots` (as given, or its canonical form) that `path` lies lexically below, for
// opening `path` relative to it (MakeDirsBeneath); empty when none does.
std::string RootHolding(const std::string& path, const std::vector<std::string>& roots);

// Every path `spec` names (resolved against the job's base dir by the parser): model.init_from
// and the files the trainer reads from it, model.vocab, data.train, data.eval, output.dir,
// output.tensorboard_dir (the trainer writes there; outside a root the job fails at start rather
// than training without its events).
// Empty fields are skipped. The first path outside the roots is the error.
absl::Status CheckJobPaths(const trainer::JobSpec& spec, const std::vector<std::string>& roots);

}  // namespace ringmaster::agent
