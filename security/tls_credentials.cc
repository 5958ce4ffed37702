// TLS credentials from PEM files, and the loopback-only plaintext rule.
#include "security/tls_credentials.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "security/loopback.h"

namespace ringmaster::security {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

// Reads a PEM file that must hold a `kind` block ("CERTIFICATE", "PRIVATE KEY").
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path,
                                    const char* kind) {
  absl::StatusOr<std::string> pem = ReadFile(path, kMaxPemBytes);
  if (!pem.ok()) {
    return absl::Status(pem.status().code(),
                        absl::StrCat(flag, ": cannot read ", pem.status().message()));
  }
  if (!absl::StrContains(*pem, "-----BEGIN ") || !absl::StrContains(*pem, kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": not a PEM file with a ", kind));
  }
  return pem;
}

absl::Status CheckPlaintext(const std::string& what, const std::string& address,
                            const TlsOptions& tls) {
  if (!tls.empty()) {
    return absl::InvalidArgumentError(
        "--insecure-loopback turns TLS off: give it or the --tls-* files, not both");
  }
  if (!IsLoopbackAddress(address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("plaintext is allowed only on loopback (127.0.0.0/8, ::1, localhost), and ",
                     what, " ", address, " is not; use TLS (docs/operations.md, Security)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const std::string& listen_address, const TlsOptions& tls, bool insecure_loopback) {
  if (insecure_loopback) {
    if (absl::Status s = CheckPlaintext("--listen", listen_address, tls); !s.ok()) return s;
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "no TLS: give --tls-cert and --tls-key (and --tls-client-ca for mutual TLS), or "
        "--insecure-loopback for plaintext on a loopback --listen address");
  }
  grpc::SslServerCredentialsOptions opts(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  absl::StatusOr<std::string> cert = ReadPem("--tls-cert", tls.cert_file, "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("--tls-key", tls.key_file, "PRIVATE KEY");
  if (!key.ok()) return key.status();
  pair.cert_chain = *std::move(cert);
  pair.private_key = *std::move(key);
  opts.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("--tls-client-ca", tls.ca_file, "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    opts.pem_root_certs = *std::move(ca);
    opts.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(opts);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const std::string& target, const TlsOptions& tls, bool insecure_loopback) {
  if (insecure_loopback) {
    if (absl::Status s = CheckPlaintext("coordinator", target, tls); !s.ok()) return s;
    return grpc::InsecureChannelCredentials();
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together (mutual TLS)");
  }
  grpc::SslCredentialsOptions opts;
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("--tls-ca", tls.ca_file, "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    opts.pem_root_certs = *std::move(ca);
  }
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("--tls-cert", tls.cert_file, "CERTIFICATE");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("--tls-key", tls.key_file, "PRIVATE KEY");
    if (!key.ok()) return key.status();
    opts.pem_cert_chain = *std::move(cert);
    opts.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(opts);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ControlPlaneChannel(const std::string& target,
                                                                   const TlsOptions& tls,
                                                                   bool insecure_loopback) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(target, tls, insecure_loopback);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments args;
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  // gRPC's own reconnection backoff grows to 120 s by default: an agent whose coordinator was
  // away for a while found the channel still waiting out its backoff after the coordinator came
  // back (issue #31: reconnected 24 s late). At most 2 s between connection attempts (gRPC adds
  // its 20% jitter); each attempt is one TCP connect to one coordinator. Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC takes it as the connect (TCP + TLS handshake)
  // timeout, and 500 ms cut handshakes short on a loaded host.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(target, *credentials, args);
}

std::string DescribeServerTransport(const TlsOptions& tls, bool insecure_loopback) {
  if (insecure_loopback) return "plaintext (loopback only)";
  return tls.ca_file.empty() ? "TLS" : "mutual TLS";
}

}  // namespace ringmaster::security
