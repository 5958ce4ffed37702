#include "coordinator/cluster/node_secret.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <array>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace ringmaster::coordinator {

absl::StatusOr<std::string> NewNodeSecret() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return absl::UnavailableError("cannot draw a node secret: OpenSSL's random generator failed");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string NodeSecretDigest(std::string_view secret) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> d{};
  SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), d.data());
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

bool NodeSecretMatches(std::string_view secret, std::string_view digest) {
  if (digest.empty()) return false;
  const std::string actual = NodeSecretDigest(secret);
  return actual.size() == digest.size() &&
         CRYPTO_memcmp(actual.data(), digest.data(), actual.size()) == 0;
}

}  // namespace ringmaster::coordinator
