// Who may call what on a member's port.
//
// Client and peer traffic share one port. With TLS on (--tls_ca_file,
// --tls_cert_file, --tls_key_file) the port asks every caller for a
// certificate signed by the cluster CA -- gRPC verifies any certificate
// presented and refuses the handshake if it does not verify -- and:
//  - the peer methods (Raft.*: AppendEntries, RequestVote, InstallSnapshot,
//    TimeoutNow) require one (mutual TLS): a caller without a verified
//    certificate gets UNAUTHENTICATED before its message reaches the core, and
//    with --peer_cert_allowed_names only certificates naming one of those
//    (common name or DNS SAN; "prefix*" matches a prefix) get through
//    (PERMISSION_DENIED otherwise), so a client certificate from the same CA
//    cannot append entries or vote;
//  - with --client_cert_required every caller must present one (enforced in
//    the handshake);
//  - with --token_file the client methods (KV, Admin) require the bearer
//    token ("authorization: Bearer <token>"; UNAUTHENTICATED otherwise).
// The health and reflection services stay open: probes carry no identity.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/security.h"
#include "common/status.h"

namespace raftkv {

struct ServerSecurityOptions {
  ChannelSecurity files;  // the loaded --tls_* files and token
  bool client_cert_required = false;
  std::vector<std::string> peer_allowed_names;
};

// Who a method is for: clients (KV, Admin: the bearer token) or the other
// members (Raft: a certificate of the cluster CA, an allowed name).
enum class Caller { kClient, kPeer };

class CallAuthorizer {
 public:
  // Checks the combination (client certificates or allowed names without
  // TLS are refused) and builds the port's credentials; false with *error.
  static Status Create(ServerSecurityOptions options, std::unique_ptr<CallAuthorizer>* out);

  // The credentials of the listening port (SSL or insecure).
  std::shared_ptr<grpc::ServerCredentials> Credentials() const;
  bool tls() const { return options_.files.tls(); }

  // OK, or the status to refuse a peer (Raft) call with.
  grpc::Status AuthorizePeer(const grpc::ServerContext& context) const;
  // OK, or the status to refuse a client (KV, Admin) call with.
  grpc::Status AuthorizeClient(const grpc::ServerContext& context) const;

  // True if `name` matches `pattern`: equal, or pattern "p*" and name starts with p.
  static bool NameMatches(const std::string& pattern, const std::string& name);
  // Splits a comma-separated list of names; InvalidArgument on an empty item.
  static Status ParseNames(const std::string& csv, std::vector<std::string>* names);

 private:
  explicit CallAuthorizer(ServerSecurityOptions options) : options_(std::move(options)) {}
  const ServerSecurityOptions options_;
};

// The one check every server method runs before it does anything: OK, or
// why `auth` refuses a call of `caller`'s kind (logged, at most once per 100
// refusals). A null `auth` (plaintext, no token) allows every call.
grpc::Status AuthorizeCall(const CallAuthorizer* auth, const grpc::ServerContext& context, Caller caller);

}  // namespace raftkv
