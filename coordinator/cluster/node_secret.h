// Per-registration node secrets: what binds a Heartbeat stream to the Register call that created
// it (issue #20). Holding the join token lets a caller register a node of its own, not speak for
// another node: every Register hands out a fresh secret and the stream's first message must
// carry it. The coordinator keeps only the secret's SHA-256 digest (in memory and in the
// database), so a copy of the database does not let anyone open streams.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringmaster::coordinator {

// 32 bytes from OpenSSL's CSPRNG as 64 lowercase hex digits. Fails only when the generator
// cannot be seeded.
absl::StatusOr<std::string> NewNodeSecret();

// The digest kept for `secret`: SHA-256, as 64 lowercase hex digits.
std::string NodeSecretDigest(std::string_view secret);

// Whether `secret` hashes to `digest`, compared in constant time. False for an empty `digest`
// (a node never given a secret accepts none).
bool NodeSecretMatches(std::string_view secret, std::string_view digest);

}  // namespace ringmaster::coordinator
