// The join/submit token policy.
#include "security/token_policy.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::security {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Runs over the longer input; the secret's own length is all a timing attack could learn.
  const size_t n = std::max(a.size(), b.size());
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

bool TokenPolicy::Holds(const std::optional<std::string>& expected, std::string_view token) {
  return !expected.has_value() || ConstantTimeEquals(*expected, token);
}

absl::Status TokenPolicy::Check(Access access, std::string_view authorization) const {
  const bool sent = !authorization.empty();
  std::string_view token;
  if (sent) {
    if (authorization.size() <= sizeof(kBearerPrefix) - 1 ||
        !absl::StartsWithIgnoreCase(absl::string_view(authorization.data(), authorization.size()),
                                    kBearerPrefix)) {
      return absl::UnauthenticatedError("the authorization metadata is not 'Bearer <token>'");
    }
    token = authorization.substr(sizeof(kBearerPrefix) - 1);
  }
  const char* name = "";
  bool ok = false;
  switch (access) {
    case Access::kAgent:
      name = "the join token";
      ok = Holds(join_, token);
      break;
    case Access::kSubmit:
    case Access::kLogs:
      name = "the submit token";
      ok = Holds(submit_, token);
      break;
    case Access::kRead:
      name = "the submit token or the join token";
      // Evaluate both, so the time does not tell which one matched.
      ok = Holds(submit_, token) | Holds(join_, token);
      break;
  }
  if (ok) return absl::OkStatus();
  return absl::UnauthenticatedError(
      sent ? absl::StrCat("this call needs ", name, "; the token sent is wrong")
           : absl::StrCat("this call needs ", name, "; none was sent (authorization: Bearer)"));
}

}  // namespace ringmaster::security
