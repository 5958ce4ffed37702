// The node id and secret of the agent's latest registration, kept in its work dir so that an
// agent restart takes its node back (issue #31): the coordinator gives a known node name only to
// a Register that carries that node's current secret. The file is `<work dir>/node-identity`,
// mode 0600, three lines: node name, node id, secret. Losing it (a new work dir) means an
// operator frees the name with `ringmaster nodes forget NAME`.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"

namespace ringmaster::agent {

struct NodeIdentity {
  std::string node_id;
  std::string secret;  // never logged
};

// The identity stored at `path` for `node_name`. Nullopt when there is no file, or it names
// another node or is malformed (`why` then says so, for a warning); never an error: the agent
// then registers as a new node.
std::optional<NodeIdentity> LoadNodeIdentity(const std::string& path, const std::string& node_name,
                                             std::string* why);

// Replaces the file at `path` (written 0600 beside it, fsynced, renamed over it).
absl::Status SaveNodeIdentity(const std::string& path, const std::string& node_name,
                              const NodeIdentity& identity);

}  // namespace ringmaster::agent
