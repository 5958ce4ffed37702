// Secrets from files or the environment.
#include "security/secret.h"

#include <sys/stat.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/log.h"

namespace ringmaster::security {
namespace {

constexpr size_t kMaxSecretBytes = 4096;

absl::StatusOr<std::string> Validate(const std::string& what, const std::string& source,
                                     std::string value) {
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (!value.empty() && value.back() == '\r') value.pop_back();
  if (value.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, " in ", source, " is empty"));
  for (char c : value) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " in ", source, " holds whitespace or non-printable characters (not printed)"));
    }
  }
  return value;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
}

absl::StatusOr<std::optional<std::string>> ReadSecret(const std::string& what,
                                                      const std::string& file,
                                                      const std::string& env_var,
                                                      const EnvLookup& env) {
  if (!file.empty()) {
    absl::StatusOr<std::string> data = ReadFile(file, kMaxSecretBytes);
    if (!data.ok()) {
      return absl::Status(data.status().code(),
                          absl::StrCat("cannot read the ", what, ": ", data.status().message()));
    }
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      LogWarning(
          absl::StrFormat("%s file %s may be read by group or others (mode %03o); "
                          "chmod 600 it",
                          what, file, st.st_mode & 0777));
    }
    absl::StatusOr<std::string> v = Validate(what, file, *std::move(data));
    if (!v.ok()) return v.status();
    return std::optional<std::string>(*std::move(v));
  }
  if (env_var.empty()) return std::optional<std::string>();
  std::optional<std::string> value = env(env_var);
  if (!value.has_value()) return std::optional<std::string>();
  absl::StatusOr<std::string> v = Validate(what, absl::StrCat("$", env_var), *std::move(value));
  if (!v.ok()) return v.status();
  return std::optional<std::string>(*std::move(v));
}

}  // namespace ringmaster::security
