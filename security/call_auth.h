// Tokens on gRPC calls: clients attach theirs as "authorization: Bearer <token>"; the
// coordinator's handlers check it against the TokenPolicy before doing anything else.
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

#include <string>
#include <string_view>

#include "security/refusals.h"
#include "security/token_policy.h"

namespace ringmaster::security {

// Adds the token to the call's metadata; nothing when `token` is empty.
void AttachToken(grpc::ClientContext* context, const std::string& token);

// OK when the call may go on. Otherwise UNAUTHENTICATED naming the missing or wrong token, counted
// in `refusals` (missing_token or wrong_token), with a WARNING line naming the peer's address and
// `method` (never a token) unless that peer has had its lines for now (security/refusals.h).
grpc::Status AuthorizeCall(const TokenPolicy& policy, const grpc::ServerContext& context,
                           Access access, std::string_view method,
                           Refusals& refusals = ProcessRefusals());

// The policy of services built without one (tests, fuzzers): every call allowed.
const TokenPolicy& OpenPolicy();

}  // namespace ringmaster::security
