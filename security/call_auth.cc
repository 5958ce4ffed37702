// Bearer tokens on gRPC calls.
#include "security/call_auth.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::security {

void AttachToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata(kAuthorizationKey, absl::StrCat(kBearerPrefix, token));
}

grpc::Status AuthorizeCall(const TokenPolicy& policy, const grpc::ServerContext& context,
                           Access access, std::string_view method, Refusals& refusals) {
  std::string_view authorization;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kAuthorizationKey); it != metadata.end()) {
    authorization = std::string_view(it->second.data(), it->second.size());
  }
  absl::Status s = policy.Check(access, authorization);
  if (s.ok()) return grpc::Status::OK;
  const std::string peer = context.peer();
  refusals.Refuse(authorization.empty() ? Refusal::kMissingToken : Refusal::kWrongToken, peer,
                  absl::StrCat("refused ", absl::string_view(method.data(), method.size()),
                               " from ", peer, ": ", s.message()));
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(s.message()));
}

const TokenPolicy& OpenPolicy() {
  static const TokenPolicy* const open = new TokenPolicy();
  return *open;
}

}  // namespace ringmaster::security
