// Start-up checks of a member's TLS files, with OpenSSL (which gRPC uses on
// Linux too): mistakes that would otherwise surface only as failed
// handshakes on the other members, logged there as "certificate verify
// failed", stop the server at start with a message that says what is wrong.
#pragma once

#include <string>

#include "client/security.h"
#include "common/status.h"

namespace raftkv {

// Checks that the key belongs to the certificate, that the certificate
// verifies against the CA (chain, validity period, usage as a TLS server and
// client), and that it names `host` -- the host of this member's address in
// the cluster file, which is what the others dial -- unless `server_name`
// (--tls_server_name) is set, which is then checked instead.
// InvalidArgument (naming the flag) otherwise. *warning gets a note that does
// not stop the server (a certificate expiring within 30 days), "" if none.
Status CheckServerCertificate(const ChannelSecurity& security, const std::string& host, std::string* warning);

}  // namespace raftkv
