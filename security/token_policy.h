// Which token each control-plane call needs (docs/operations.md, "Security"):
//   kAgent  (AgentService Register, Heartbeat)                  the join token
//   kSubmit (Coordinator SubmitJob, CancelJob, ForgetNode)      the submit token
//   kLogs   (Coordinator GetLogs: rank logs may hold data)      the submit token
//   kRead   (GetJob, ListJobs, WatchJob, ListNodes)             either token
// A token the coordinator was not given is not checked: a default TokenPolicy allows every call.
// Tokens are compared in constant time; error messages name the token, never its value.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ringmaster::security {

enum class Access { kAgent, kSubmit, kLogs, kRead };

// The metadata key and scheme a client sends its token in: "authorization: Bearer <token>".
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// a == b, taking the same time wherever they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class TokenPolicy {
 public:
  TokenPolicy() = default;  // no tokens: every call allowed
  TokenPolicy(std::optional<std::string> join_token, std::optional<std::string> submit_token)
      : join_(std::move(join_token)), submit_(std::move(submit_token)) {}

  // `authorization`: the call's authorization metadata ("Bearer <token>"), empty when absent.
  // OK, or UNAUTHENTICATED saying which token is missing or wrong.
  absl::Status Check(Access access, std::string_view authorization) const;

  bool has_join_token() const { return join_.has_value(); }
  bool has_submit_token() const { return submit_.has_value(); }

 private:
  // True when `token` is `expected`, or when no token is expected.
  static bool Holds(const std::optional<std::string>& expected, std::string_view token);

  std::optional<std::string> join_;
  std::optional<std::string> submit_;
};

}  // namespace ringmaster::security
