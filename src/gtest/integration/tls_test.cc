// TLS, mutual TLS on the peer methods, client certificates and tokens, and
// hostile bytes on the port -- with real raftkv-server processes and
// certificates made by scripts/gen-certs.sh (openssl).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "client/admin_client.h"
#include "client/channel_args.h"
#include "client/security.h"
#include "gtest/common/temp_dir.h"
#include "gtest/integration/integration_test_util.h"
#include "proto/etcd.h"

namespace raftkv {
namespace integration {
namespace {

// Certificates for one test: a cluster CA with node1..node3 (IP:127.0.0.1),
// a client certificate "ops", and an impostor "node9" from another CA.
struct Certs {
  std::string dir;
  std::string ca() const { return dir + "/ca.crt"; }
  std::string crt(const std::string& name) const { return dir + "/" + name + ".crt"; }
  std::string key(const std::string& name) const { return dir + "/" + name + ".key"; }
  std::string rogue_dir() const { return dir + "/rogue"; }
};

std::string Pem(const std::string& path) {
  std::string contents;
  const Status s = ReadSecurityFile(path, &contents);
  EXPECT_TRUE(s.ok()) << s;
  return contents;
}

void MakeCerts(const std::string& dir, Certs* certs) {
  certs->dir = dir;
  const std::string script = std::string(RAFTKV_SOURCE_DIR) + "/scripts/gen-certs.sh";
  const std::string cmd = "bash " + script + " " + dir +
                          " node1=IP:127.0.0.1 node2=IP:127.0.0.1 node3=IP:127.0.0.1"
                          " nohost --client ops > " + dir + "/gen.out 2>&1 && bash " + script + " " +
                          dir + "/rogue node9=IP:127.0.0.1 >> " + dir + "/gen.out 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << Pem(dir + "/gen.out");
}

// Channel security from files (empty name = not set).
std::shared_ptr<const ChannelSecurity> Security(const std::string& ca, const std::string& cert = "",
                                                const std::string& key = "",
                                                const std::string& token = "") {
  auto s = std::make_shared<ChannelSecurity>();
  if (!ca.empty()) s->ca_pem = Pem(ca);
  if (!cert.empty()) s->cert_pem = Pem(cert);
  if (!key.empty()) s->key_pem = Pem(key);
  s->token = token;
  return s;
}

std::unique_ptr<Peer::Stub> RaftStub(const std::string& endpoint,
                                     std::shared_ptr<const ChannelSecurity> security) {
  return Peer::NewStub(MakeChannel(endpoint, RaftkvChannelArguments(), std::move(security)));
}

std::unique_ptr<KV::Stub> KvStub(const std::string& endpoint,
                                 std::shared_ptr<const ChannelSecurity> security) {
  return KV::NewStub(MakeChannel(endpoint, RaftkvChannelArguments(), std::move(security)));
}

// A vote request that would depose any leader if it were accepted: a much
// higher term and a log that looks newer than anyone's.
grpc::Status DisruptiveVote(Peer::Stub* stub, uint64_t to, uint64_t term) {
  RequestVoteRequest req;
  req.set_term(term + 100);
  req.set_candidate_id(to == 1 ? 2 : 1);
  req.set_to(to);
  req.set_last_log_index(1u << 30);
  req.set_last_log_term(term + 99);
  RequestVoteResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 3000 * kTimeScale);
  return stub->RequestVote(&ctx, req, &resp);
}

grpc::Status DisruptiveAppend(Peer::Stub* stub, uint64_t to, uint64_t term) {
  AppendEntriesRequest req;
  req.set_term(term + 100);
  req.set_leader_id(to == 1 ? 2 : 1);
  req.set_to(to);
  req.set_leader_commit(1u << 30);
  AppendEntriesResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 3000 * kTimeScale);
  return stub->AppendEntries(&ctx, req, &resp);
}

grpc::Status Put(KV::Stub* stub, const std::string& key, int deadline_ms = 3000) {
  PutRequest req;
  req.set_key(key);
  req.set_value("v");
  PutResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, deadline_ms * kTimeScale);
  return stub->Put(&ctx, req, &resp);
}

// Restores the process-wide channel security when a test ends.
class ProcessSecurityGuard {
 public:
  explicit ProcessSecurityGuard(std::shared_ptr<const ChannelSecurity> s) {
    SetProcessChannelSecurity(std::move(s));
  }
  ~ProcessSecurityGuard() { SetProcessChannelSecurity(nullptr); }
};

class Tls : public Integration {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(MakeCerts(dir_.path(), &certs_)); }

  // A 3-member TLS cluster; member i presents nodeI's certificate.
  void StartTlsCluster(std::vector<std::string> flags, uint64_t* leader) {
    std::vector<std::string> all = FastTimeoutFlags();
    all.push_back("--tls_ca_file=" + certs_.ca());
    all.insert(all.end(), flags.begin(), flags.end());
    cluster_ = std::make_unique<ProcessCluster>(3, all);
    for (int i = 1; i <= 3; ++i) {
      const std::string name = "node" + std::to_string(i);
      cluster_->SetNodeFlags(i, {"--tls_cert_file=" + certs_.crt(name),
                                 "--tls_key_file=" + certs_.key(name)});
    }
    std::string error;
    ASSERT_TRUE(cluster_->StartAll(&error)) << error;
    *leader = cluster_->WaitForLeader(20000 * kTimeScale, &error);
    ASSERT_NE(*leader, 0u) << error;
  }

  testing_util::TempDir dir_{"tls"};
  Certs certs_;
};

TEST_F(Tls, MutualTlsOnPeerMethodsKeepsOutsidersFromDisturbingTheCluster) {
  ProcessSecurityGuard guard(Security(certs_.ca()));  // the harness's clients: server-auth TLS
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartTlsCluster({"--peer_cert_allowed_names=node*"}, &leader));
  const uint64_t term = cluster().last_leader_term();
  auto client = cluster().NewClient();
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < 100; ++i) kvs.emplace_back("k" + std::to_string(i), "v" + std::to_string(i));
  std::vector<std::string> errors;
  KvMap written = PutAll(*client, kvs, 4, &errors);
  ASSERT_EQ(written.size(), kvs.size()) << JoinLines(errors);
  const std::string target = cluster().Endpoint(static_cast<int>(leader));

  // 1. TLS, but no client certificate: the peer methods refuse.
  {
    auto stub = RaftStub(target, Security(certs_.ca()));
    grpc::Status s = DisruptiveVote(stub.get(), leader, term);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Code(s) << " " << s.error_message();
    EXPECT_NE(s.error_message().find("client certificate"), std::string::npos) << s.error_message();
    s = DisruptiveAppend(stub.get(), leader, term);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Code(s);
  }
  // 2. A certificate of the cluster CA that is not a node's: refused by name.
  {
    auto stub = RaftStub(target, Security(certs_.ca(), certs_.crt("ops"), certs_.key("ops")));
    grpc::Status s = DisruptiveVote(stub.get(), leader, term);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Code(s) << " " << s.error_message();
    EXPECT_NE(s.error_message().find("ops"), std::string::npos) << s.error_message();
    s = DisruptiveAppend(stub.get(), leader, term);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Code(s);
    // ... while the client methods work with it.
    EXPECT_TRUE(Put(KvStub(target, Security(certs_.ca(), certs_.crt("ops"), certs_.key("ops"))).get(),
                    "with-ops-cert").ok());
  }
  // 3. A node-named certificate from another CA: the handshake fails.
  {
    auto stub = RaftStub(target, Security(certs_.ca(), certs_.rogue_dir() + "/node9.crt",
                                          certs_.rogue_dir() + "/node9.key"));
    const auto start = Steady::now();
    grpc::Status s = DisruptiveVote(stub.get(), leader, term);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Code(s) << " " << s.error_message();
    EXPECT_LT(ElapsedMs(start), 3000 * kTimeScale) << "a refused handshake should fail the call, not time out";
  }
  // 4. Plaintext to the TLS port: fails cleanly (no hang, no crash).
  {
    auto stub = RaftStub(target, std::make_shared<ChannelSecurity>());
    const auto start = Steady::now();
    grpc::Status s = DisruptiveVote(stub.get(), leader, term);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Code(s) << " " << s.error_message();
    EXPECT_LT(ElapsedMs(start), 3000 * kTimeScale);
    s = Put(KvStub(target, std::make_shared<ChannelSecurity>()).get(), "plaintext");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Code(s);
  }
  // 5. A client that does not trust the cluster CA refuses the server.
  {
    grpc::Status s = Put(KvStub(target, Security(certs_.rogue_dir() + "/ca.crt")).get(), "untrusted");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Code(s);
  }

  // Nobody was disturbed: same leader, same term, every member alive, and
  // the cluster still replicates (the members' own certificates work).
  std::string error;
  EXPECT_EQ(cluster().WaitForLeader(5000 * kTimeScale, &error), leader) << error;
  EXPECT_EQ(cluster().last_leader_term(), term);
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(cluster().IsRunning(i)) << "member " << i;
  ASSERT_TRUE(client->Put("after", "attacks").ok());
  EXPECT_TRUE(CheckAll(*client, written, /*stale=*/false).empty());
  for (int i = 1; i <= 3; ++i) {
    const std::string log = cluster().LogText(i);
    if (static_cast<uint64_t>(i) == leader) {
      EXPECT_NE(log.find("refused a peer call"), std::string::npos) << "member " << i;
    }
  }
}

// etcd's clients log in with Auth.Authenticate and then send the token it
// answers in the "token" metadata key: with --token_file, the token is the
// password, and what it answers is accepted as raftkv's bearer token.
TEST_F(Tls, EtcdClientsAuthenticateWithTheTokenAsPassword) {
  const std::string token_file = dir_.Join("token");
  std::ofstream(token_file) << "s3cret-token\n";
  ProcessSecurityGuard guard(Security(certs_.ca(), certs_.crt("ops"), certs_.key("ops"), "s3cret-token"));
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartTlsCluster({"--token_file=" + token_file}, &leader));
  auto channel = MakeChannel(cluster().Endpoint(static_cast<int>(leader)), RaftkvChannelArguments(),
                             Security(certs_.ca()));  // TLS, no token
  auto auth = etcdserverpb::Auth::NewStub(channel);
  auto kv = etcdserverpb::KV::NewStub(channel);
  auto login = [&](const std::string& password, etcdserverpb::AuthenticateResponse* resp) {
    etcdserverpb::AuthenticateRequest req;
    req.set_name("root");
    req.set_password(password);
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 3000 * kTimeScale);
    return auth->Authenticate(&ctx, req, resp);
  };
  auto put = [&](const std::string& token) {
    etcdserverpb::PutRequest req;
    req.set_key("etcd-client");
    req.set_value("v");
    etcdserverpb::PutResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 3000 * kTimeScale);
    if (!token.empty()) ctx.AddMetadata("token", token);
    return kv->Put(&ctx, req, &resp);
  };
  etcdserverpb::AuthenticateResponse resp;
  grpc::Status s = login("wrong", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Code(s);
  EXPECT_EQ(s.error_message(), "etcdserver: authentication failed, invalid user ID or password");
  EXPECT_EQ(put("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(put("wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  s = login("s3cret-token", &resp);
  ASSERT_TRUE(s.ok()) << Code(s) << " " << s.error_message();
  s = put(resp.token());
  EXPECT_TRUE(s.ok()) << Code(s) << " " << s.error_message();
}

TEST_F(Tls, ClientCertificateRequiredAndBearerToken) {
  const std::string token_file = dir_.Join("token");
  std::ofstream(token_file) << "s3cret-token\n";
  auto good = Security(certs_.ca(), certs_.crt("ops"), certs_.key("ops"), "s3cret-token");
  ProcessSecurityGuard guard(good);
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartTlsCluster(
      {"--client_cert_required", "--token_file=" + token_file}, &leader));
  const std::string target = cluster().Endpoint(static_cast<int>(leader));

  EXPECT_TRUE(Put(KvStub(target, good).get(), "good").ok());
  // No client certificate: the handshake is refused.
  grpc::Status s = Put(KvStub(target, Security(certs_.ca(), "", "", "s3cret-token")).get(), "nocert");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Code(s) << " " << s.error_message();
  // A certificate but no token, or a wrong one: UNAUTHENTICATED, on KV and Admin.
  for (const std::string& token : {std::string(), std::string("s3cret-tokem"), std::string("s3cret")}) {
    auto sec = Security(certs_.ca(), certs_.crt("ops"), certs_.key("ops"), token);
    s = Put(KvStub(target, sec).get(), "badtoken");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "token '" << token << "'";
    AdminClientOptions admin_options;
    admin_options.endpoints = {target};
    admin_options.timeout_ms = 2000 * kTimeScale;
    admin_options.security = sec;
    AdminClient admin(admin_options);
    ListMembersResponse members;
    grpc::Status as = admin.ListMembers(&members);
    EXPECT_EQ(as.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "token '" << token << "' "
                                                                   << Code(as);
  }
  {
    AdminClientOptions admin_options;
    admin_options.endpoints = {target};
    admin_options.security = good;
    AdminClient admin(admin_options);
    ListMembersResponse members;
    grpc::Status as = admin.ListMembers(&members);
    EXPECT_TRUE(as.ok()) << Code(as) << " " << as.error_message();
    EXPECT_EQ(members.members_size(), 3);
  }
  // raftkvctl with the same files, and without the token.
  {
    const std::vector<std::string> tls = {
        "--endpoints=" + target, "--tls_ca_file=" + certs_.ca(),
        "--tls_cert_file=" + certs_.crt("ops"), "--tls_key_file=" + certs_.key("ops"),
        "--timeout_ms=" + std::to_string(3000 * kTimeScale)};
    std::vector<std::string> args = tls;
    args.insert(args.end(), {"--token_file=" + token_file, "put", "ctl", "ok"});
    RunResult r = RunToCompletion(CtlBinary(), args, dir_.path(), 15000 * kTimeScale);
    EXPECT_TRUE(r.exited && r.exit_code == 0) << r.output;
    args = tls;
    args.insert(args.end(), {"put", "ctl", "no-token"});
    r = RunToCompletion(CtlBinary(), args, dir_.path(), 15000 * kTimeScale);
    EXPECT_TRUE(r.exited && r.exit_code == 1) << r.output;
    EXPECT_NE(r.output.find("UNAUTHENTICATED"), std::string::npos) << r.output;
    args = tls;
    args.insert(args.end(), {"--token_file=" + dir_.Join("no-such-token"), "get", "ctl"});
    r = RunToCompletion(CtlBinary(), args, dir_.path(), 15000 * kTimeScale);
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
    EXPECT_NE(r.output.find("--token_file: cannot read"), std::string::npos) << r.output;
    // Plaintext: refused, with a hint about TLS.
    r = RunToCompletion(CtlBinary(), {"--endpoints=" + target, "--timeout_ms=2000", "get", "ctl"},
                        dir_.path(), 15000 * kTimeScale);
    EXPECT_TRUE(r.exited && r.exit_code == 1) << r.output;
    EXPECT_NE(r.output.find("if the servers use TLS, pass --tls_ca_file"), std::string::npos)
        << r.output;
  }
  // The members replicate to each other (certificates, no token needed).
  auto client = cluster().NewClient();
  ASSERT_TRUE(client->Put("x", "y").ok());
  for (int i = 1; i <= 3; ++i) {
    auto c = cluster().NewClientFor(i);
    std::string value;
    bool found = false;
    EXPECT_TRUE(WaitUntil([&] {
      return c->Get("x", &value, &found, /*stale=*/true).ok() && found && value == "y";
    }, 5000 * kTimeScale)) << "member " << i;
  }
}

// Connects to 127.0.0.1:port and sends `bytes` (then keeps the socket open
// if `hold`, returning its descriptor, else closes it and returns -1).
int SendRaw(int port, const std::string& bytes, bool hold = false) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return -1;
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close on us: fine
    sent += static_cast<size_t>(n);
  }
  if (hold) return fd;
  ::close(fd);
  return -1;
}

// Garbage, a truncated HTTP/2 connection, junk after a valid preface, a fake
// TLS record header announcing a huge record, and silent connections: the
// member must keep serving throughout.
void AttackPort(int port) {
  std::mt19937 rng(42);
  std::string random(64 << 10, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  std::string huge_frame = preface;
  huge_frame += std::string("\xff\xff\xff\x00\x00\x00\x00\x00\x01", 9) + std::string(1000, 'x');
  const std::string tls_record("\x16\x03\x01\xff\xff", 5);
  std::vector<int> held;
  for (int round = 0; round < 20; ++round) {
    SendRaw(port, random);
    SendRaw(port, preface.substr(0, 10));
    SendRaw(port, preface + random.substr(0, 4096));
    SendRaw(port, huge_frame);
    SendRaw(port, tls_record + random.substr(0, 2048));
    SendRaw(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    if (round % 5 == 0) held.push_back(SendRaw(port, "", /*hold=*/true));
  }
  for (int fd : held) {
    if (fd >= 0) ::close(fd);
  }
}

TEST_F(Tls, GarbageBytesOnTlsAndPlaintextPortsDoNotStallTheServer) {
  for (bool tls : {true, false}) {
    SCOPED_TRACE(tls ? "TLS port" : "plaintext port");
    ProcessSecurityGuard guard(tls ? Security(certs_.ca()) : nullptr);
    uint64_t leader = 0;
    if (tls) {
      ASSERT_NO_FATAL_FAILURE(StartTlsCluster({}, &leader));
    } else {
      ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
    }
    const uint64_t term = cluster().last_leader_term();
    auto client = cluster().NewClient();
    ASSERT_TRUE(client->Put("before", "1").ok());
    // Silent connections held open while the attack runs must not block
    // real clients.
    std::vector<int> silent;
    for (int i = 0; i < 8; ++i) silent.push_back(SendRaw(cluster().Port(static_cast<int>(leader)), "", true));
    for (int i = 1; i <= 3; ++i) AttackPort(cluster().Port(i));
    const auto start = Steady::now();
    ASSERT_TRUE(client->Put("after", "2").ok());
    EXPECT_LT(ElapsedMs(start), 3000 * kTimeScale);
    // An oversized message is refused by gRPC's limit, not read into memory.
    grpc::Status s;
    {
      auto stub = KvStub(cluster().Endpoint(static_cast<int>(leader)), nullptr);
      PutRequest req;
      req.set_key("big");
      req.set_value(std::string(16 << 20, 'b'));  // > twice the largest legitimate message
      PutResponse resp;
      grpc::ClientContext ctx;
      SetDeadline(&ctx, 10000 * kTimeScale);
      s = stub->Put(&ctx, req, &resp);
    }
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Code(s) << " " << s.error_message();
    for (int fd : silent) {
      if (fd >= 0) ::close(fd);
    }
    std::string error;
    EXPECT_EQ(cluster().WaitForLeader(5000 * kTimeScale, &error), leader) << error;
    EXPECT_EQ(cluster().last_leader_term(), term);
    for (int i = 1; i <= 3; ++i) EXPECT_TRUE(cluster().IsRunning(i)) << "member " << i;
    std::string value;
    bool found = false;
    ASSERT_TRUE(client->Get("after", &value, &found).ok());
    EXPECT_TRUE(found && value == "2");
    client.reset();
    cluster_.reset();
  }
}

TEST_F(Tls, BadSecurityConfigurationStopsTheServerWithAClearError) {
  const std::vector<int> ports = PickFreePorts(1);
  ASSERT_EQ(ports.size(), 1u);
  const std::string addr = "127.0.0.1:" + std::to_string(ports[0]);
  const std::string dir = dir_.path();
  std::ofstream(dir + "/cluster.conf") << "1 " << addr << "\n";
  std::ofstream(dir + "/empty-token") << "\n\n";
  std::ofstream(dir + "/tls.flags") << "--tls_ca_file=" << certs_.ca() << "\n--tls_cert_file="
                                    << certs_.crt("node1") << "\n--tls_key_file="
                                    << dir + "/missing.key\n";
  struct Case {
    std::vector<std::string> flags;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--tls_ca_file=" + dir + "/missing-ca.crt", "--tls_cert_file=" + certs_.crt("node1"),
        "--tls_key_file=" + certs_.key("node1")},
       "--tls_ca_file: cannot read " + dir + "/missing-ca.crt"},
      {{"--tls_ca_file=" + certs_.ca(), "--tls_cert_file=" + certs_.crt("node1")},
       "--tls_cert_file and --tls_key_file go together"},
      {{"--tls_ca_file=" + certs_.ca()}, "a TLS server needs its certificate"},
      {{"--tls_cert_file=" + certs_.crt("node1"), "--tls_key_file=" + certs_.key("node1")},
       "--tls_cert_file needs --tls_ca_file"},
      {{"--tls_ca_file=" + certs_.key("node1"), "--tls_cert_file=" + certs_.crt("node1"),
        "--tls_key_file=" + certs_.key("node1")},
       "holds no PEM block '-----BEGIN CERTIFICATE-----'"},
      {{"--client_cert_required"}, "--client_cert_required needs TLS"},
      {{"--peer_cert_allowed_names=node1"}, "--peer_cert_allowed_names needs TLS"},
      {{"--tls_ca_file=" + certs_.ca(), "--tls_cert_file=" + certs_.crt("node1"),
        "--tls_key_file=" + certs_.key("node1"), "--peer_cert_allowed_names=node1,,node2"},
       "--peer_cert_allowed_names: 'node1,,node2' has an empty name"},
      {{"--token_file=" + dir + "/empty-token"}, "empty-token:1: no token on the first line"},
      {{"--flagfile=" + dir + "/tls.flags"},
       dir + "/tls.flags:3: --tls_key_file: cannot read " + dir + "/missing.key"},
      // A key that is not the certificate's: the port cannot be opened.
      {{"--tls_ca_file=" + certs_.ca(), "--tls_cert_file=" + certs_.crt("node1"),
        "--tls_key_file=" + certs_.key("node2")},
       "--tls_cert_file and --tls_key_file do not belong together"},
      // Signed by another CA.
      {{"--tls_ca_file=" + certs_.ca(), "--tls_cert_file=" + certs_.rogue_dir() + "/node9.crt",
        "--tls_key_file=" + certs_.rogue_dir() + "/node9.key"},
       "--tls_cert_file does not verify against --tls_ca_file as a TLS server certificate: "
       "unable to get local issuer certificate"},
      // A client-only certificate cannot serve.
      {{"--tls_ca_file=" + certs_.ca(), "--tls_cert_file=" + certs_.crt("ops"),
        "--tls_key_file=" + certs_.key("ops")},
       "does not verify against --tls_ca_file as a TLS server certificate: unsuitable "
       "certificate purpose"},
      // Not naming the address the others dial.
      {{"--tls_ca_file=" + certs_.ca(), "--tls_cert_file=" + certs_.crt("nohost"),
        "--tls_key_file=" + certs_.key("nohost")},
       "--tls_cert_file does not name IP address 127.0.0.1"},
      {{"--tls_ca_file=" + certs_.ca(), "--tls_cert_file=" + certs_.crt("nohost"),
        "--tls_key_file=" + certs_.key("nohost"), "--tls_server_name=elsewhere"},
       "--tls_cert_file does not name host elsewhere (--tls_server_name)"},
  };
  for (size_t n = 0; n < cases.size(); ++n) {
    std::vector<std::string> args = {"--id=1", "--cluster_file=" + dir + "/cluster.conf",
                                     "--data_dir=" + dir + "/data" + std::to_string(n),
                                     "--log_dir=" + dir};
    args.insert(args.end(), cases[n].flags.begin(), cases[n].flags.end());
    RunResult r = RunToCompletion(ServerBinary(), args, dir, 15000 * kTimeScale);
    EXPECT_TRUE(r.exited) << "case " << n << " (timed out: " << r.timed_out << ")\n" << r.output;
    EXPECT_EQ(r.exit_code, 2) << "case " << n << ":\n" << r.output;
    EXPECT_NE(r.output.find(cases[n].expected), std::string::npos)
        << "case " << n << ": output should contain '" << cases[n].expected << "'; got:\n"
        << r.output;
  }
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
