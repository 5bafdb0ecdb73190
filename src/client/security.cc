#include "client/security.h"

#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include <gflags/gflags.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

DEFINE_string(tls_ca_file, "",
              "PEM file of the cluster's CA certificate. Set: every connection uses TLS; servers' "
              "certificates must be signed by it, and a server verifies the client certificates "
              "of its peers (and clients) against it. Empty: plaintext.");
DEFINE_string(tls_cert_file, "",
              "PEM certificate (chain) of this process, signed by --tls_ca_file. A server serves it "
              "and presents it to its peers (peer methods require one); a client presents it "
              "when the servers require client certificates.");
DEFINE_string(tls_key_file, "", "PEM private key of --tls_cert_file.");
DEFINE_string(tls_server_name, "",
              "Name to check in the servers' certificates instead of the host dialled (when "
              "certificates name hosts differently from the addresses used).");
DEFINE_string(token_file, "",
              "File whose first line is a bearer token. A client sends it with every call "
              "(\"authorization: Bearer <token>\"); a server started with it refuses client "
              "calls (KV, Admin) that do not carry it (UNAUTHENTICATED).");

namespace raftkv {
namespace {

// Adds the bearer token and the peer token (each when set) to every call.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  TokenInterceptor(const std::string* header, const std::string* peer_token)
      : header_(header), peer_token_(peer_token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      auto* metadata = methods->GetSendInitialMetadata();
      if (!header_->empty()) metadata->emplace("authorization", *header_);
      if (!peer_token_->empty()) metadata->emplace(kPeerTokenMetadataKey, *peer_token_);
    }
    methods->Proceed();
  }

 private:
  // Owned by the factory, which the channel keeps.
  const std::string* header_;
  const std::string* peer_token_;
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  TokenInterceptorFactory(const std::string& token, const std::string& peer_token)
      : header_(token.empty() ? "" : "Bearer " + token), peer_token_(peer_token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new TokenInterceptor(&header_, &peer_token_);
  }

 private:
  const std::string header_;
  const std::string peer_token_;
};

std::mutex process_mu;
std::shared_ptr<const ChannelSecurity>& ProcessSetting() {
  static auto* setting = new std::shared_ptr<const ChannelSecurity>(
      std::make_shared<const ChannelSecurity>());
  return *setting;
}

Status LoadPem(const std::string& flag, const std::string& path, const char* marker, std::string* out) {
  if (Status s = ReadSecurityFile(path, out); !s.ok()) {
    return Status::InvalidArgument("--" + flag + ": " + s.message());
  }
  if (out->find(marker) == std::string::npos) {
    return Status::InvalidArgument("--" + flag + ": " + path + " holds no PEM block '" + marker + "'");
  }
  return Status::OK();
}

}  // namespace

Status ReadSecurityFile(const std::string& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::IOError("error reading " + path);
  *contents = buffer.str();
  return Status::OK();
}

std::string ParseToken(const std::string& contents) {
  std::string line = contents.substr(0, contents.find('\n'));
  const char* space = " \t\r";
  const size_t begin = line.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return line.substr(begin, line.find_last_not_of(space) + 1 - begin);
}

Status LoadChannelSecurity(const SecurityFiles& files, ChannelSecurity* out) {
  ChannelSecurity s;
  if (files.cert_file.empty() != files.key_file.empty()) {
    return Status::InvalidArgument("--tls_cert_file and --tls_key_file go together: give both or neither");
  }
  if (files.ca_file.empty() && !files.cert_file.empty()) {
    return Status::InvalidArgument("--tls_cert_file needs --tls_ca_file (TLS is on only with a CA)");
  }
  if (files.ca_file.empty() && !files.server_name.empty()) {
    return Status::InvalidArgument("--tls_server_name needs --tls_ca_file (TLS is on only with a CA)");
  }
  if (!files.ca_file.empty()) {
    if (Status bad = LoadPem("tls_ca_file", files.ca_file, "-----BEGIN CERTIFICATE-----", &s.ca_pem); !bad.ok()) {
      return bad;
    }
  }
  if (!files.cert_file.empty()) {
    if (Status bad = LoadPem("tls_cert_file", files.cert_file, "-----BEGIN CERTIFICATE-----", &s.cert_pem);
        !bad.ok()) {
      return bad;
    }
    if (Status bad = LoadPem("tls_key_file", files.key_file, "PRIVATE KEY-----", &s.key_pem); !bad.ok()) {
      return bad;
    }
  }
  s.server_name = files.server_name;
  if (!files.token_file.empty()) {
    if (Status bad = LoadTokenFile("token_file", files.token_file, &s.token); !bad.ok()) return bad;
  }
  *out = std::move(s);
  return Status::OK();
}

Status LoadTokenFile(const std::string& flag, const std::string& path, std::string* token) {
  std::string contents;
  if (Status bad = ReadSecurityFile(path, &contents); !bad.ok()) {
    return Status::InvalidArgument("--" + flag + ": " + bad.message());
  }
  *token = ParseToken(contents);
  if (token->empty()) {
    return Status::InvalidArgument("--" + flag + ": " + path + ":1: no token on the first line");
  }
  for (char c : *token) {
    // A metadata value: printable ASCII only.
    if (c < 0x21 || c > 0x7e) {
      return Status::InvalidArgument("--" + flag + ": " + path +
                                     ":1: the token may hold printable ASCII characters only, without spaces");
    }
  }
  return Status::OK();
}

SecurityFiles SecurityFilesFromFlags() {
  SecurityFiles f;
  f.ca_file = FLAGS_tls_ca_file;
  f.cert_file = FLAGS_tls_cert_file;
  f.key_file = FLAGS_tls_key_file;
  f.server_name = FLAGS_tls_server_name;
  f.token_file = FLAGS_token_file;
  return f;
}

Status InitChannelSecurityFromFlags() {
  auto s = std::make_shared<ChannelSecurity>();
  if (Status bad = LoadChannelSecurity(SecurityFilesFromFlags(), s.get()); !bad.ok()) return bad;
  SetProcessChannelSecurity(std::move(s));
  return Status::OK();
}

void SetProcessChannelSecurity(std::shared_ptr<const ChannelSecurity> security) {
  std::lock_guard<std::mutex> lock(process_mu);
  ProcessSetting() = security ? std::move(security) : std::make_shared<const ChannelSecurity>();
}

std::shared_ptr<const ChannelSecurity> ProcessChannelSecurity() {
  std::lock_guard<std::mutex> lock(process_mu);
  return ProcessSetting();
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, grpc::ChannelArguments args,
                                           std::shared_ptr<const ChannelSecurity> security) {
  if (!security) security = ProcessChannelSecurity();
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (security->tls()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security->ca_pem;
    ssl.pem_cert_chain = security->cert_pem;
    ssl.pem_private_key = security->key_pem;
    creds = grpc::SslCredentials(ssl);
    if (!security->server_name.empty()) args.SetSslTargetNameOverride(security->server_name);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  if (security->token.empty() && security->peer_token.empty()) {
    return grpc::CreateCustomChannel(target, creds, args);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(security->token, security->peer_token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args,
                                                                 std::move(interceptors));
}

}  // namespace raftkv
