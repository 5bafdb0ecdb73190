#include "service/call_auth.h"

#include <glog/logging.h>
#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/server_credentials.h>

namespace raftkv {
namespace {

// Compares in time independent of where the strings first differ.
bool SameToken(grpc::string_ref given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(given.data()[i] ^ expected[i]);
  }
  return diff == 0;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") + 1 - b);
}

}  // namespace

Status CallAuthorizer::Create(ServerSecurityOptions options, std::unique_ptr<CallAuthorizer>* out) {
  if (!options.files.tls()) {
    if (options.client_cert_required) {
      return Status::InvalidArgument(
          "--client_cert_required needs TLS (--tls_ca_file, --tls_cert_file, --tls_key_file)");
    }
    if (!options.peer_allowed_names.empty()) {
      return Status::InvalidArgument(
          "--peer_cert_allowed_names needs TLS (--tls_ca_file, --tls_cert_file, --tls_key_file)");
    }
  } else if (options.files.cert_pem.empty()) {
    return Status::InvalidArgument("a TLS server needs its certificate: --tls_cert_file and --tls_key_file");
  }
  out->reset(new CallAuthorizer(std::move(options)));
  return Status::OK();
}

std::shared_ptr<grpc::ServerCredentials> CallAuthorizer::Credentials() const {
  if (!tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      options_.client_cert_required ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                    : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = options_.files.ca_pem;
  ssl.pem_key_cert_pairs.push_back({options_.files.key_pem, options_.files.cert_pem});
  return grpc::SslServerCredentials(ssl);
}

grpc::Status CallAuthorizer::AuthorizePeer(const grpc::ServerContext& context) const {
  if (!tls()) return grpc::Status::OK;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "peer methods need a client certificate signed by the cluster CA; the "
                        "caller presented none");
  }
  if (options_.peer_allowed_names.empty()) return grpc::Status::OK;
  std::vector<std::string> names;
  for (const char* property : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(property)) {
      names.emplace_back(v.data(), v.size());
    }
  }
  for (const std::string& pattern : options_.peer_allowed_names) {
    for (const std::string& name : names) {
      if (NameMatches(pattern, name)) return grpc::Status::OK;
    }
  }
  std::string shown;
  for (const std::string& name : names) shown += (shown.empty() ? "" : ", ") + name;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "certificate of [" + shown +
                          "] may not call peer methods (not in --peer_cert_allowed_names)");
}

grpc::Status CallAuthorizer::AuthorizeClient(const grpc::ServerContext& context) const {
  const std::string& token = options_.files.token;
  if (token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this server requires a bearer token (authorization metadata)");
  }
  const grpc::string_ref value = it->second;
  static constexpr char kPrefix[] = "Bearer ";
  const size_t prefix = sizeof(kPrefix) - 1;
  if (value.size() < prefix || value.substr(0, prefix) != grpc::string_ref(kPrefix, prefix) ||
      !SameToken(value.substr(prefix), token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bearer token not accepted");
  }
  return grpc::Status::OK;
}

bool CallAuthorizer::NameMatches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '*') {
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0 &&
           name.size() >= pattern.size() - 1;
  }
  return pattern == name;
}

Status CallAuthorizer::ParseNames(const std::string& csv, std::vector<std::string>* names) {
  names->clear();
  if (Trim(csv).empty()) return Status::OK();
  size_t start = 0;
  while (true) {
    const size_t comma = csv.find(',', start);
    const std::string item =
        Trim(csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty() || item == "*") {
      return Status::InvalidArgument("'" + csv +
                                     "' has an empty name (or a bare '*', which would allow every certificate)");
    }
    names->push_back(item);
    if (comma == std::string::npos) return Status::OK();
    start = comma + 1;
  }
}

grpc::Status AuthorizeCall(const CallAuthorizer* auth, const grpc::ServerContext& context, Caller caller) {
  if (auth == nullptr) return grpc::Status::OK;
  const bool peer = caller == Caller::kPeer;
  grpc::Status refused = peer ? auth->AuthorizePeer(context) : auth->AuthorizeClient(context);
  if (!refused.ok()) {
    LOG_EVERY_N(WARNING, 100) << "refused a " << (peer ? "peer" : "client") << " call from "
                              << context.peer() << ": " << refused.error_message() << " ("
                              << google::COUNTER << " refusals so far)";
  }
  return refused;
}

}  // namespace raftkv
