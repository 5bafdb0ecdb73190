#include "server/rpc/call_auth.h"

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
  if (!options.files.tls() && options.files.peer_token.empty() &&
      (!options.files.token.empty() || !options.admin_token.empty())) {
    return Status::InvalidArgument(
        std::string(options.files.token.empty() ? "--admin_token_file" : "--token_file") +
        " asks clients for a token, but without TLS the peer methods (append entries, vote, "
        "snapshots) would accept calls from anyone who reaches the port: set --peer_token_file "
        "(a secret only the members hold, the same file on every member), or TLS "
        "(--tls_ca_file, --tls_cert_file, --tls_key_file)");
  }
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

namespace {

// The value of metadata `key` in the call, or false.
bool FindMetadata(const grpc::ServerContextBase& context, const char* key, grpc::string_ref* value) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(key);
  if (it == metadata.end()) return false;
  *value = it->second;
  return true;
}

// The bearer token of the call ("authorization: Bearer <token>", or
// "token: <token>" as etcd's clients send it), or false.
bool BearerToken(const grpc::ServerContextBase& context, grpc::string_ref* token) {
  grpc::string_ref value;
  if (!FindMetadata(context, "authorization", &value)) return FindMetadata(context, "token", token);
  static constexpr char kPrefix[] = "Bearer ";
  const size_t prefix = sizeof(kPrefix) - 1;
  if (value.size() < prefix || value.substr(0, prefix) != grpc::string_ref(kPrefix, prefix)) return false;
  *token = value.substr(prefix);
  return true;
}

}  // namespace

grpc::Status CallAuthorizer::AuthorizePeer(const grpc::ServerContextBase& context) const {
  if (const std::string& secret = options_.files.peer_token; !secret.empty()) {
    grpc::string_ref given;
    if (!FindMetadata(context, kPeerTokenMetadataKey, &given) || !SameToken(given, secret)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "peer methods are for the members of the cluster: the call lacks their "
                          "shared secret (--peer_token_file)");
    }
  }
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

grpc::Status CallAuthorizer::AuthorizeClient(const grpc::ServerContextBase& context) const {
  const std::string& token = options_.files.token;
  if (token.empty()) return grpc::Status::OK;
  grpc::string_ref given;
  if (!BearerToken(context, &given)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this server requires a bearer token (authorization metadata)");
  }
  const std::string& admin = options_.admin_token;
  if (!SameToken(given, token) && (admin.empty() || !SameToken(given, admin))) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bearer token not accepted");
  }
  return grpc::Status::OK;
}

bool CallAuthorizer::AcceptsClientToken(const std::string& token) const {
  const std::string& client = options_.files.token;
  const std::string& admin = options_.admin_token;
  const grpc::string_ref given(token);
  return (!client.empty() && SameToken(given, client)) || (!admin.empty() && SameToken(given, admin));
}

grpc::Status CallAuthorizer::AuthorizeAdmin(const grpc::ServerContextBase& context) const {
  const std::string& admin = options_.admin_token;
  if (admin.empty()) return AuthorizeClient(context);
  grpc::string_ref given;
  if (!BearerToken(context, &given)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this method changes the cluster and requires the admin token "
                        "(authorization metadata)");
  }
  if (!SameToken(given, admin)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "this method changes the cluster and requires the admin token "
                        "(--admin_token_file), not the client token");
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

grpc::Status AuthorizeCall(const CallAuthorizer* auth, const grpc::ServerContextBase& context, Caller caller) {
  if (auth == nullptr || caller == Caller::kAnyone) return grpc::Status::OK;
  grpc::Status refused = caller == Caller::kPeer    ? auth->AuthorizePeer(context)
                         : caller == Caller::kAdmin ? auth->AuthorizeAdmin(context)
                                                    : auth->AuthorizeClient(context);
  if (!refused.ok()) {
    const char* kind = caller == Caller::kPeer ? "peer" : caller == Caller::kAdmin ? "admin" : "client";
    LOG_EVERY_N(WARNING, 100) << "refused a " << kind << " call from "
                              << context.peer() << ": " << refused.error_message() << " ("
                              << google::COUNTER << " refusals so far)";
  }
  return refused;
}

}  // namespace raftkv
