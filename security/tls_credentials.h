// gRPC transport credentials for the control plane: TLS from PEM files, mutual TLS when the
// server is given a client CA, and plaintext only where explicitly allowed on loopback.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster::security {

struct TlsOptions {
  std::string cert_file;  // PEM certificate (chain): the server's, or the client's for mTLS
  std::string key_file;   // PEM private key of cert_file
  // Server: CA that client certificates must chain to (given: mutual TLS, a certificate is
  // required). Client: CA the server's certificate must chain to (empty: the system's roots).
  std::string ca_file;
  // Client: the name the server's certificate must carry when it differs from the host in the
  // target (an address, or a name the certificate does not list). Empty: the target's host.
  std::string server_name;

  bool empty() const {
    return cert_file.empty() && key_file.empty() && ca_file.empty() && server_name.empty();
  }
};

// The coordinator's listening credentials. TLS needs cert_file and key_file. Plaintext only with
// `insecure_loopback`, no TLS file, and a loopback `listen_address`; anything else is refused
// with a message that says what to pass. Errors name a PEM file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const std::string& listen_address, const TlsOptions& tls, bool insecure_loopback);

// A client's (agent, CLI) credentials for `target`. TLS by default (cert_file and key_file both
// or neither); plaintext only with `insecure_loopback`, no TLS file, and a loopback target.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const std::string& target, const TlsOptions& tls, bool insecure_loopback);

// A client's channel to the coordinator at `target`: ChannelCredentialsFor's credentials, and
// tls.server_name as the name to verify the server's certificate against. Connects lazily.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ControlPlaneChannel(const std::string& target,
                                                                   const TlsOptions& tls,
                                                                   bool insecure_loopback);

// A short description for log lines: "mutual TLS", "TLS" or "plaintext (loopback only)".
std::string DescribeServerTransport(const TlsOptions& tls, bool insecure_loopback);

}  // namespace ringmaster::security
