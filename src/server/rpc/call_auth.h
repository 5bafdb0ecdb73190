// Who may call what on a member's port.
//
// Client and peer traffic share one port, and three kinds of caller are told
// apart:
//  - peers (Raft.*: AppendEntries, RequestVote, InstallSnapshot, TimeoutNow,
//    RenewLease): with TLS on (--tls_ca_file, --tls_cert_file,
//    --tls_key_file) they need a certificate signed by the cluster CA (mutual
//    TLS; UNAUTHENTICATED otherwise, before the message reaches the core),
//    naming one of --peer_cert_allowed_names when that is set (common name or
//    DNS SAN; "prefix*" matches a prefix; PERMISSION_DENIED otherwise), so a
//    client certificate from the same CA cannot append entries or vote; with
//    --peer_token_file they need the members' shared secret
//    ("raftkv-peer-token: <token>"; UNAUTHENTICATED otherwise);
//  - clients (KV, Watch, Lease, Admin's reads): with --token_file the bearer
//    token ("authorization: Bearer <token>", or etcd's clients' "token:
//    <token>"; UNAUTHENTICATED otherwise); the admin token is accepted too;
//  - administrators (Admin's changes: members, leadership, snapshots, and
//    Testing.SetFaults): with --admin_token_file its token only
//    (PERMISSION_DENIED for the client token); without it, as clients.
// A port that asks clients for a token must not leave the peer methods open:
// without TLS, Create() refuses --token_file or --admin_token_file unless
// --peer_token_file is set. With --client_cert_required every caller must
// present a certificate (enforced in the handshake). The health service stays
// open (probes carry no identity); reflection describes the public services
// only (reflection_service.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/security.h"
#include "common/status.h"

namespace raftkv {

struct ServerSecurityOptions {
  ChannelSecurity files;  // the loaded --tls_* files, token and peer token
  std::string admin_token;  // --admin_token_file
  bool client_cert_required = false;
  std::vector<std::string> peer_allowed_names;
};

// Who a method is for: clients (the bearer token), administrators (the
// admin token) or the other members (a certificate of the cluster CA, an
// allowed name, the peer token).
// kAnyone: a method that carries its own credentials (etcd's Authenticate).
enum class Caller { kClient, kAdmin, kPeer, kAnyone };

class CallAuthorizer {
 public:
  // Checks the combination (client certificates or allowed names without
  // TLS, a client or admin token with peer methods open to anyone) and
  // builds the port's credentials.
  static Status Create(ServerSecurityOptions options, std::unique_ptr<CallAuthorizer>* out);

  // The credentials of the listening port (SSL or insecure).
  std::shared_ptr<grpc::ServerCredentials> Credentials() const;
  bool tls() const { return options_.files.tls(); }

  // OK, or the status to refuse a peer (Raft) call with.
  grpc::Status AuthorizePeer(const grpc::ServerContextBase& context) const;
  // OK, or the status to refuse a client (KV, Watch, Lease, Admin's reads) call with.
  grpc::Status AuthorizeClient(const grpc::ServerContextBase& context) const;
  // OK, or the status to refuse an administrator's call with.
  grpc::Status AuthorizeAdmin(const grpc::ServerContextBase& context) const;
  // Whether clients must present a token (--token_file).
  bool tokens_required() const { return !options_.files.token.empty(); }
  // Whether `token` is the client token or the admin token.
  bool AcceptsClientToken(const std::string& token) const;
  // Whether anything is asked of peers (a certificate or the peer token).
  bool peers_authenticated() const { return tls() || !options_.files.peer_token.empty(); }

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
grpc::Status AuthorizeCall(const CallAuthorizer* auth, const grpc::ServerContextBase& context, Caller caller);

}  // namespace raftkv
