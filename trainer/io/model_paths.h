// What a model directory names is read only from beneath it (issue #31, finding 2): a
// sentence-transformers modules.json entry "../../../outside/secretmodel" made the trainer read
// and fine-tune a model from outside the agent's --allowed-root, and export it into the job's
// output. The agent checks the entries inside model.init_from before the ranks start; these
// check, where the trainer opens them, the paths that the model's own files name and every file
// read from the directory.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace ringmaster::trainer {

// `entry`, a path that a file of a model directory names (`named_by`, e.g. "DIR/modules.json:
// module 0 \"path\""), relative to that directory: refused (InvalidArgument naming `named_by`
// and the entry) when it is absolute, has a ".." component or holds a control character.
absl::Status CheckModelEntry(const std::string& entry, const std::string& named_by);

// A file or folder of a model directory, just before the trainer opens it. Under an agent with
// --allowed-root (RINGMASTER_ALLOWED_ROOT set) its canonical path, links followed, must lie
// beneath the root (a link to another place inside the root is fine, as the agent's check
// allows); else InvalidArgument naming `path`, where it leads, `named_by` when not empty, and
// the root. A path that does not exist passes (the caller reports it as missing). Without a
// root nothing is refused: a trainer run by hand reads what its user can read.
absl::Status CheckModelPathBeneathRoot(const std::string& path, const std::string& named_by = "");

}  // namespace ringmaster::trainer
