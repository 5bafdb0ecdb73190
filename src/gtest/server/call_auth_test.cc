// Unit tests of the security configuration: names allowed on the peer
// methods, token files, and which file combinations are accepted.
#include <fstream>

#include <gtest/gtest.h>

#include "client/security.h"
#include "gtest/common/temp_dir.h"
#include "server/rpc/call_auth.h"

namespace raftkv {
namespace {

TEST(CallAuthTest, NameMatchesExactlyOrByPrefix) {
  EXPECT_TRUE(CallAuthorizer::NameMatches("node1", "node1"));
  EXPECT_FALSE(CallAuthorizer::NameMatches("node1", "node10"));
  EXPECT_FALSE(CallAuthorizer::NameMatches("node10", "node1"));
  EXPECT_TRUE(CallAuthorizer::NameMatches("node*", "node"));
  EXPECT_TRUE(CallAuthorizer::NameMatches("node*", "node7.lan"));
  EXPECT_FALSE(CallAuthorizer::NameMatches("node*", "nod"));
  EXPECT_FALSE(CallAuthorizer::NameMatches("node*", "ops"));
  EXPECT_FALSE(CallAuthorizer::NameMatches("", "node1"));
}

TEST(CallAuthTest, ParseNames) {
  std::vector<std::string> names;
  ASSERT_TRUE(CallAuthorizer::ParseNames("", &names).ok());
  EXPECT_TRUE(names.empty());
  ASSERT_TRUE(CallAuthorizer::ParseNames(" node1 , node2,db* ", &names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"node1", "node2", "db*"}));
  const Status empty = CallAuthorizer::ParseNames("node1,,node2", &names);
  EXPECT_EQ(empty.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(empty.message().find("empty name"), std::string::npos) << empty;
  EXPECT_FALSE(CallAuthorizer::ParseNames("node1,*", &names).ok());
  EXPECT_FALSE(CallAuthorizer::ParseNames("node1,", &names).ok());
}

TEST(CallAuthTest, ParseTokenTakesTheTrimmedFirstLine) {
  EXPECT_EQ(ParseToken("abc\n"), "abc");
  EXPECT_EQ(ParseToken("  abc \r\nsecond\n"), "abc");
  EXPECT_EQ(ParseToken("\nabc\n"), "");
  EXPECT_EQ(ParseToken(""), "");
}

TEST(CallAuthTest, LoadChannelSecurityChecksFilesAndCombinations) {
  testing_util::TempDir dir("sec");
  const std::string cert = dir.Join("c.pem"), key = dir.Join("k.pem"), tok = dir.Join("tok");
  std::ofstream(cert) << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";
  std::ofstream(tok) << "tok en\n";
  ChannelSecurity s;
  std::string error;
  SecurityFiles f;
  ASSERT_TRUE((error = LoadChannelSecurity(f, &s).message()).empty()) << error;
  EXPECT_FALSE(s.tls());

  f.ca_file = cert;
  ASSERT_TRUE((error = LoadChannelSecurity(f, &s).message()).empty()) << error;
  EXPECT_TRUE(s.tls());
  EXPECT_TRUE(s.cert_pem.empty());

  f.cert_file = cert;
  EXPECT_FALSE((error = LoadChannelSecurity(f, &s).message()).empty());
  EXPECT_NE(error.find("go together"), std::string::npos) << error;
  f.key_file = key;
  ASSERT_TRUE((error = LoadChannelSecurity(f, &s).message()).empty()) << error;
  EXPECT_FALSE(s.key_pem.empty());

  f.key_file = cert;  // no private key in it
  EXPECT_FALSE((error = LoadChannelSecurity(f, &s).message()).empty());
  EXPECT_NE(error.find("--tls_key_file: " + cert + " holds no PEM block"), std::string::npos)
      << error;
  f.key_file = key;

  f.token_file = tok;  // a space inside the token
  EXPECT_FALSE((error = LoadChannelSecurity(f, &s).message()).empty());
  EXPECT_NE(error.find(tok + ":1:"), std::string::npos) << error;
  std::ofstream(tok) << "t0k3n\n";
  ASSERT_TRUE((error = LoadChannelSecurity(f, &s).message()).empty()) << error;
  EXPECT_EQ(s.token, "t0k3n");

  f.ca_file = dir.Join("missing");
  EXPECT_FALSE((error = LoadChannelSecurity(f, &s).message()).empty());
  EXPECT_NE(error.find("--tls_ca_file: cannot read " + dir.Join("missing")), std::string::npos)
      << error;

  SecurityFiles plain;
  plain.cert_file = cert;
  plain.key_file = key;
  EXPECT_FALSE((error = LoadChannelSecurity(plain, &s).message()).empty());
  EXPECT_NE(error.find("needs --tls_ca_file"), std::string::npos) << error;
}

TEST(CallAuthTest, CreateRefusesCertificateOptionsWithoutTls) {
  std::unique_ptr<CallAuthorizer> auth;
  std::string error;
  ServerSecurityOptions o;
  ASSERT_TRUE((error = CallAuthorizer::Create(o, &auth).message()).empty()) << error;
  EXPECT_FALSE(auth->tls());
  o.client_cert_required = true;
  EXPECT_FALSE((error = CallAuthorizer::Create(o, &auth).message()).empty());
  o.client_cert_required = false;
  o.peer_allowed_names = {"node1"};
  EXPECT_FALSE((error = CallAuthorizer::Create(o, &auth).message()).empty());
  o.peer_allowed_names.clear();
  // A token for clients while the peer methods stay open to anyone: refused,
  // naming the flag that closes them.
  o.files.token = "client-token";
  error = CallAuthorizer::Create(o, &auth).message();
  EXPECT_NE(error.find("without TLS the peer methods"), std::string::npos) << error;
  EXPECT_NE(error.find("--peer_token_file"), std::string::npos) << error;
  o.files.token.clear();
  o.admin_token = "admin-token";
  error = CallAuthorizer::Create(o, &auth).message();
  EXPECT_NE(error.find("--admin_token_file asks clients"), std::string::npos) << error;
  o.files.token = "client-token";
  o.files.peer_token = "members-only";
  ASSERT_TRUE((error = CallAuthorizer::Create(o, &auth).message()).empty()) << error;
  EXPECT_TRUE(auth->peers_authenticated());
  o.files.token.clear();
  o.admin_token.clear();
  o.files.peer_token.clear();
  o.files.ca_pem = "-----BEGIN CERTIFICATE-----";
  // TLS without its own certificate:
  EXPECT_FALSE((error = CallAuthorizer::Create(o, &auth).message()).empty());
  EXPECT_NE(error.find("needs its certificate"), std::string::npos) << error;
}

}  // namespace
}  // namespace raftkv
