// Node names bound to client certificates: the map file and the check.
#include "coordinator/service/node_cert_binding.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/log_escape.h"

namespace ringmaster::coordinator {

absl::StatusOr<NodeCertBinding> ParseNodeCertMap(std::string_view text, std::string_view source) {
  NodeCertBinding b;
  b.enabled = true;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_no;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(source), ":", line_no,
                                                     ": expected 'NODE_NAME CERT_NAME', got ",
                                                     fields.size(), " field(s)"));
    }
    b.allowed[std::string(fields[0])].insert(std::string(fields[1]));
  }
  return b;
}

absl::StatusOr<NodeCertBinding> LoadNodeCertMap(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, size_t{4} << 20);
  if (!text.ok()) return text.status();
  return ParseNodeCertMap(*text, path);
}

absl::Status CheckNodeCertificate(const NodeCertBinding& binding, std::string_view node_name,
                                  const std::vector<std::string>& cert_names) {
  if (!binding.enabled) return absl::OkStatus();
  const std::string name(node_name);
  auto named = [&](const std::string& n) {
    return std::find(cert_names.begin(), cert_names.end(), n) != cert_names.end();
  };
  if (named(name)) return absl::OkStatus();
  if (auto it = binding.allowed.find(name); it != binding.allowed.end()) {
    for (const std::string& n : it->second) {
      if (named(n)) return absl::OkStatus();
    }
  }
  std::vector<std::string> shown;
  for (const std::string& n : cert_names) shown.push_back("'" + EscapeControlCharacters(n) + "'");
  return absl::PermissionDeniedError(absl::StrCat(
      "node name '", EscapeControlCharacters(name), "' is not named by the client certificate (",
      shown.empty() ? std::string("it names nothing")
                    : absl::StrCat("CN and subjectAltNames ", absl::StrJoin(shown, ", ")),
      "); with --bind-node-names-to-certs a node registers only under its certificate's name or "
      "one --node-cert-map gives it"));
}

std::vector<std::string> PeerCertificateNames(const grpc::ServerContext& context) {
  std::vector<std::string> out;
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return out;
  for (const char* property : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(property)) {
      std::string s(v.data(), v.size());
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace ringmaster::coordinator
