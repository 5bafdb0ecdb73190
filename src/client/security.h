// Transport security of every raftkv channel: the clients' channels (KvClient,
// AdminClient, raftkvctl, the benchmark) and a server's channels to its peers.
//
// TLS (gRPC's SSL credentials) is on when a CA certificate is given: the
// server's certificate must be signed by that CA and name the address dialled
// (a SAN with the IP address or DNS name, or --tls_server_name). A certificate
// and key of our own are presented when given: servers present theirs on peer
// calls (the peer methods require one, see server/rpc/call_auth.h); clients
// present one when the server requires client certificates. A bearer token,
// when given, travels with every call as "authorization: Bearer <token>".
//
// The command-line tools and the server read the same flags (defined in
// security.cc): --tls_ca_file, --tls_cert_file, --tls_key_file,
// --tls_server_name, --token_file. The binaries call
// InitChannelSecurityFromFlags() once at start; MakeChannel() then uses that
// process-wide setting unless a caller passes its own (tests do).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/channel_arguments.h>

#include "common/status.h"

namespace raftkv {

struct ChannelSecurity {
  std::string ca_pem;         // non-empty: TLS, verifying servers against this CA
  std::string cert_pem;       // our certificate chain (optional; with key_pem)
  std::string key_pem;        // its private key
  std::string server_name;    // overrides the name checked in the server's certificate
  std::string token;          // non-empty: sent as "authorization: Bearer <token>"
  // Members only (--peer_token_file): the secret the members share, sent as
  // "raftkv-peer-token: <token>" on the member's own calls to its peers.
  std::string peer_token;
  bool tls() const { return !ca_pem.empty(); }
};

struct SecurityFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string server_name;
  std::string token_file;
};

// Reads the files named in `files` into *out. A missing or unreadable file, a
// file that holds no PEM block of the expected kind, a certificate without its
// key (or the reverse), a certificate without a CA, a token file without a
// token... are refused (InvalidArgument) naming the flag and the file.
Status LoadChannelSecurity(const SecurityFiles& files, ChannelSecurity* out);

// The files named by this process's flags.
SecurityFiles SecurityFilesFromFlags();

// Loads the flags' files and makes them the process-wide setting. Not OK on
// a bad configuration (the binaries exit 2).
Status InitChannelSecurityFromFlags();

void SetProcessChannelSecurity(std::shared_ptr<const ChannelSecurity> security);
// The process-wide setting (insecure until one is set).
std::shared_ptr<const ChannelSecurity> ProcessChannelSecurity();

// A channel to `target` with `args` and the given security (null = the
// process-wide one): SSL credentials when it has a CA, insecure otherwise,
// plus the token interceptor when it has a token.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, grpc::ChannelArguments args,
                                           std::shared_ptr<const ChannelSecurity> security = nullptr);

// Reads a whole small file (certificates, keys, tokens). IOError naming the
// file when it cannot be read.
Status ReadSecurityFile(const std::string& path, std::string* contents);

// The token in a token file's contents: the first line, surrounding
// whitespace removed. Empty if there is none.
std::string ParseToken(const std::string& contents);

// Reads the token of `path` (given by --`flag`): InvalidArgument naming the
// flag and the file when it cannot be read, has no token on its first line,
// or holds a character a metadata value cannot.
Status LoadTokenFile(const std::string& flag, const std::string& path, std::string* token);

// The metadata key of the members' shared secret.
inline constexpr char kPeerTokenMetadataKey[] = "raftkv-peer-token";

}  // namespace raftkv
