// Node names bound to mutual-TLS client certificates (issue #31, item 3; opt-in with
// `--bind-node-names-to-certs`). With it, an agent may register node name X only when the client
// certificate of its connection names X — as its subject CN or as one of its subjectAltNames —
// or names a certificate name that the operator's map (`--node-cert-map FILE`) allows for X.
// Anything else is PERMISSION_DENIED naming the node name and the names the certificate carries,
// so a join-token holder with one node's certificate cannot register (or take) another node's
// name. Without it, a client certificate only lets a connection through (the node secret is what
// tells agents apart).
#pragma once

#include <grpcpp/server_context.h>

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::coordinator {

struct NodeCertBinding {
  bool enabled = false;
  // Node name -> further certificate names that may register it (the map file's lines).
  std::map<std::string, std::set<std::string>> allowed;
};

// Reads a map file: one `NODE_NAME CERT_NAME` pair a line (blank lines and `#` comments
// ignored; a node name may have several lines). Errors name the file and line. The result is
// enabled.
absl::StatusOr<NodeCertBinding> LoadNodeCertMap(const std::string& path);
// The same from text; `source` names it in errors.
absl::StatusOr<NodeCertBinding> ParseNodeCertMap(std::string_view text, std::string_view source);

// OK when `binding` is off, or when `cert_names` (the peer certificate's CN and SANs) hold
// `node_name` or a name the map allows for it; else PermissionDenied naming both.
absl::Status CheckNodeCertificate(const NodeCertBinding& binding, std::string_view node_name,
                                  const std::vector<std::string>& cert_names);

// The subject CN and subjectAltNames of the call's verified client certificate (empty without
// one), from gRPC's auth context.
std::vector<std::string> PeerCertificateNames(const grpc::ServerContext& context);

}  // namespace ringmaster::coordinator
