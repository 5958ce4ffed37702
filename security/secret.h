// Secrets (the join and submit tokens) read from a file or an environment variable, never from
// the command line, where `ps` would show them. Nothing here logs a secret's value.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster::security {

// Looks up an environment variable; std::getenv in the binaries, a map in tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup ProcessEnv();

// Reads the secret `what` (e.g. "join token") from `file` when it is non-empty, else from the
// environment variable `env_var`; std::nullopt when neither is set. One trailing newline ("\n" or
// "\r\n") is dropped. Refused: an unreadable file (the error names it), an empty secret, and one
// with characters outside printable ASCII (it travels in a gRPC header). A file that group or
// others may read is accepted with a warning on stderr.
absl::StatusOr<std::optional<std::string>> ReadSecret(const std::string& what,
                                                      const std::string& file,
                                                      const std::string& env_var,
                                                      const EnvLookup& env = ProcessEnv());

}  // namespace ringmaster::security
