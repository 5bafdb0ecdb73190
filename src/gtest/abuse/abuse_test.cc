// The abuse suite: real raftkv-server processes on loopback, each test one
// class of hostile or careless caller. Every test asserts that the attack
// gets a clear error or is cut off, and that a well-behaved client writing
// beside it keeps working: every write acknowledged, its p99 latency within
// 5x of a run without the attack (and of 10 ms, below which the 2-core
// machine's noise dominates; x5 in sanitizer builds), and no member's
// resident memory over 300 MB
// (2.4 GB in sanitizer builds, whose shadow memory costs 5-8x).
// Each test prints one line of the table in doc/testing.md ("Abuse: ...").
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/security.h"
#include "gtest/integration/integration_test_util.h"
#include "testing/process_cluster.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace raftkv {
namespace integration {
namespace {

using namespace std::chrono_literals;

// What /proc says of a process.
struct ProcUsage {
  int64_t rss_mb = 0;
  int threads = 0;
  int fds = 0;
};

ProcUsage Usage(pid_t pid) {
  ProcUsage u;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) u.rss_mb = std::stoll(line.substr(6)) / 1024;
    if (line.rfind("Threads:", 0) == 0) u.threads = std::stoi(line.substr(8));
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++u.fds;
  }
  return u;
}

// A well-behaved client: one write at a time through KvClient (sessions,
// retries), a short pause between writes, every latency recorded.
class Honest {
 public:
  struct Result {
    int writes = 0;
    int failures = 0;
    double p50_ms = 0;
    double p99_ms = 0;
    std::string first_error;
  };

  Honest(const ProcessCluster& cluster, std::string prefix)
      : client_(cluster.NewClient(10000, 2000)), prefix_(std::move(prefix)) {}
  ~Honest() { Stop(); }

  void Start() {
    started_ = Steady::now();
    stop_ = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      latencies_.clear();
      failures_ = 0;
      first_error_.clear();
    }
    thread_ = std::thread([this] {
      while (!stop_) {
        const std::string key = prefix_ + std::to_string(next_++ % 1000);
        const auto start = Steady::now();
        grpc::Status s = client_->Put(key, "honest-" + std::to_string(next_));
        const double ms = std::chrono::duration<double, std::milli>(Steady::now() - start).count();
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (s.ok()) {
            latencies_.push_back(ms);
          } else {
            if (failures_++ == 0) first_error_ = key + ": " + Code(s);
          }
        }
        std::this_thread::sleep_for(2ms);
      }
    });
  }

  // Stops once it has run for at least `min_ms` (so that a short attack
  // still sees a fair sample of writes beside it).
  Result Stop(int min_ms = 2000) {
    const auto until = started_ + Millis(min_ms);
    if (thread_.joinable() && Steady::now() < until) std::this_thread::sleep_until(until);
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    Result r;
    r.writes = static_cast<int>(latencies_.size());
    r.failures = failures_;
    r.first_error = first_error_;
    std::vector<double> sorted = latencies_;
    std::sort(sorted.begin(), sorted.end());
    if (!sorted.empty()) {
      r.p50_ms = sorted[sorted.size() / 2];
      r.p99_ms = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
    }
    return r;
  }

  // Runs alone for `ms` and returns what it saw.
  Result Measure(int ms) {
    Start();
    return Stop(ms);
  }

  KvClient& client() { return *client_; }

 private:
  std::unique_ptr<KvClient> client_;
  const std::string prefix_;
  std::thread thread_;
  std::atomic<bool> stop_{true};
  Steady::time_point started_;
  std::atomic<uint64_t> next_{0};
  std::mutex mu_;
  std::vector<double> latencies_;
  int failures_ = 0;
  std::string first_error_;
};

class Abuse : public Integration {
 protected:
#ifdef RAFTKV_SANITIZED
  static constexpr int kRssBoundMb = 2400;  // the sanitizers' shadow memory costs 5-8x
#else
  static constexpr int kRssBoundMb = 300;
#endif

  // Starts an n-member cluster with the fast timeouts and `flags` on every
  // member (`prepare` may set more per member first) and waits for a leader.
  void Launch(int n, std::vector<std::string> flags, uint64_t* leader,
              const std::function<void(ProcessCluster&)>& prepare = nullptr) {
    std::vector<std::string> all = FastTimeoutFlags();
    all.insert(all.end(), flags.begin(), flags.end());
    cluster_ = std::make_unique<ProcessCluster>(n, std::move(all));
    if (prepare) prepare(*cluster_);
    std::string error;
    ASSERT_TRUE(cluster_->StartAll(&error)) << error;
    *leader = cluster_->WaitForLeader(20000, &error);
    ASSERT_NE(*leader, 0u) << error;
  }

  // Every member's usage now, and the largest RSS.
  int64_t MaxRss(ProcessCluster& cluster, std::string* detail = nullptr) {
    int64_t max = 0;
    for (int i = 1; i <= cluster.size(); ++i) {
      if (!cluster.IsRunning(i)) continue;
      const ProcUsage u = Usage(cluster.Pid(i));
      max = std::max(max, u.rss_mb);
      if (detail != nullptr) {
        *detail += "member " + std::to_string(i) + ": " + std::to_string(u.rss_mb) + " MB RSS, " +
                   std::to_string(u.threads) + " threads, " + std::to_string(u.fds) + " fds\n";
      }
    }
    return max;
  }

  // The honest client's check, and the table line.
  void ExpectUnharmed(const char* attack, const std::string& outcome, const Honest::Result& before,
                      const Honest::Result& during, ProcessCluster& cluster) {
    std::string usage;
    const int64_t rss = MaxRss(cluster, &usage);
    std::printf("Abuse: %s | %s | honest p99 %.1f ms before, %.1f ms during (%d writes, %d failed) | "
                "max RSS %lld MB\n",
                attack, outcome.c_str(), before.p99_ms, during.p99_ms, during.writes, during.failures,
                static_cast<long long>(rss));
    EXPECT_EQ(during.failures, 0) << "the honest client failed: " << during.first_error;
    EXPECT_GT(during.writes, 10) << "the honest client made no progress";
    const double bound = 5 * std::max(before.p99_ms, 10.0 * kTimeScale);
    EXPECT_LE(during.p99_ms, bound) << "honest p99 " << during.p99_ms << " ms during the attack, "
                                    << before.p99_ms << " ms without it";
    EXPECT_LE(rss, kRssBoundMb) << usage;
  }

  // A channel of its own to `endpoint` with `security` (tokens, nothing by default).
  // HTTP/2 windows stay at their initial 64 KiB (no BDP probing), as for a
  // client that stops reading: what it has not read stays on the server's side.
  static std::shared_ptr<grpc::Channel> Channel(const std::string& endpoint,
                                                std::shared_ptr<ChannelSecurity> security = nullptr) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetMaxReceiveMessageSize(-1);
    return MakeChannel(endpoint, args, security ? security : std::make_shared<ChannelSecurity>());
  }

  static std::shared_ptr<ChannelSecurity> WithToken(const std::string& token) {
    auto s = std::make_shared<ChannelSecurity>();
    s->token = token;
    return s;
  }

  static void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  // Writes `count` values of `value_bytes` under `prefix` in batches of
  // `per_batch`: key i is prefix + (first + i % keys); false on a failed batch.
  static bool Fill(KvClient& client, const std::string& prefix, int count, size_t value_bytes,
                   int per_batch, int first, int keys) {
    std::vector<BatchOp> ops;
    for (int i = 0; i < count; ++i) {
      BatchOp op;
      op.set_op(BatchOp::PUT);
      op.set_key(prefix + std::to_string(first + i % keys));
      op.set_value(std::string(value_bytes, 'x'));
      ops.push_back(op);
      if (static_cast<int>(ops.size()) == per_batch || i == count - 1) {
        if (!client.Batch(ops, nullptr).ok()) return false;
        ops.clear();
      }
    }
    return true;
  }
};

// 1. Without TLS, a caller holding no secret (or only a client's or an
// administrator's token) reaches none of the peer methods: a forged vote
// with a huge term and a forged append are refused before they reach the
// core; the leader and its term stay, nothing forged is stored. Reflection
// does not describe the members' protocol, and the client token cannot
// change the membership or take snapshots.
TEST_F(Abuse, PeerMethodsNeedTheMembersSecret) {
  SetProcessChannelSecurity(WithToken("client-secret"));  // the harness's own clients
  struct Reset {
    ~Reset() { SetProcessChannelSecurity(nullptr); }
  } reset;
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(Launch(3, {}, &leader, [](ProcessCluster& c) {
    const std::string dir = c.dir();
    WriteFile(dir + "/client.token", "client-secret\n");
    WriteFile(dir + "/peer.token", "members-only-secret\n");
    WriteFile(dir + "/admin.token", "admin-secret\n");
    for (int i = 1; i <= 3; ++i) {
      c.SetNodeFlags(i, {"--token_file=" + dir + "/client.token", "--peer_token_file=" + dir + "/peer.token",
                         "--admin_token_file=" + dir + "/admin.token"});
    }
  }));
  ProcessCluster& cluster = *cluster_;
  std::string error;
  const uint64_t term = cluster.last_leader_term();
  const int follower = OtherThan(cluster, static_cast<int>(leader));
  Honest honest(cluster, "honest/");
  const Honest::Result before = honest.Measure(2000);
  honest.Start();

  int refused = 0;
  for (const std::string& token : {std::string(), std::string("client-secret"), std::string("admin-secret")}) {
    for (int target : {static_cast<int>(leader), follower}) {
      auto stub = Peer::NewStub(Channel(cluster.Endpoint(target), WithToken(token)));
      {
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 2000);
        RequestVoteRequest vote;
        vote.set_term(term + 1000);
        vote.set_candidate_id(static_cast<uint64_t>(OtherThan(cluster, target)));
        vote.set_last_log_index(1u << 30);
        vote.set_last_log_term(term + 1000);
        vote.set_transfer(true);
        vote.set_to(static_cast<uint64_t>(target));
        RequestVoteResponse resp;
        const grpc::Status s = stub->RequestVote(&ctx, vote, &resp);
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Code(s);
        EXPECT_NE(s.error_message().find("--peer_token_file"), std::string::npos) << Code(s);
        refused += s.error_code() == grpc::StatusCode::UNAUTHENTICATED;
      }
      {
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 2000);
        AppendEntriesRequest append;
        append.set_term(term + 1000);
        append.set_leader_id(static_cast<uint64_t>(OtherThan(cluster, target)));
        append.set_to(static_cast<uint64_t>(target));
        append.set_prev_log_index(0);
        append.set_prev_log_term(0);
        append.set_leader_commit(1);
        Command put;
        put.set_op(Command::PUT);
        put.set_key("pwned");
        put.set_value("evil");
        Entry* e = append.add_entries();
        e->set_term(term + 1000);
        e->set_index(1);
        e->set_type(ENTRY_COMMAND);
        e->set_data(put.SerializeAsString());
        AppendEntriesResponse resp;
        const grpc::Status s = stub->AppendEntries(&ctx, append, &resp);
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Code(s);
        refused += s.error_code() == grpc::StatusCode::UNAUTHENTICATED;
        // The same append on the stream that members use.
        grpc::ClientContext sctx;
        SetDeadline(&sctx, 2000);
        auto stream = stub->Append(&sctx);
        stream->Write(append);
        EXPECT_FALSE(stream->Read(&resp)) << "a forged append on a stream was answered";
        const grpc::Status ss = stream->Finish();
        EXPECT_EQ(ss.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Code(ss);
        refused += ss.error_code() == grpc::StatusCode::UNAUTHENTICATED;
      }
    }
  }
  // The client token may not change the cluster; the admin token may.
  auto admin = Admin::NewStub(Channel(cluster.Endpoint(static_cast<int>(leader)), WithToken("client-secret")));
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    RemoveMemberRequest remove;
    remove.set_id(static_cast<uint64_t>(follower));
    MemberChangeResponse resp;
    const grpc::Status s = admin->RemoveMember(&ctx, remove, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Code(s);
    EXPECT_NE(s.error_message().find("--admin_token_file"), std::string::npos) << Code(s);
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 20000);
    TakeSnapshotResponse resp;
    auto operator_stub = Admin::NewStub(Channel(cluster.Endpoint(static_cast<int>(leader)), WithToken("admin-secret")));
    const grpc::Status s = operator_stub->TakeSnapshot(&ctx, TakeSnapshotRequest(), &resp);
    EXPECT_TRUE(s.ok()) << Code(s);
  }
  // Reflection lists and describes the public services only.
  {
    namespace rpb = grpc::reflection::v1alpha;
    auto stub = rpb::ServerReflection::NewStub(Channel(cluster.Endpoint(follower)));
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    auto stream = stub->ServerReflectionInfo(&ctx);
    rpb::ServerReflectionRequest req;
    rpb::ServerReflectionResponse resp;
    req.set_list_services("");
    ASSERT_TRUE(stream->Write(req) && stream->Read(&resp));
    std::string listed;
    for (const auto& svc : resp.list_services_response().service()) listed += svc.name() + " ";
    EXPECT_NE(listed.find("raftkv.v1.KV"), std::string::npos) << listed;
    EXPECT_EQ(listed.find("raftkv.internal"), std::string::npos) << listed;
    req.set_file_containing_symbol("raftkv.internal.Peer");
    ASSERT_TRUE(stream->Write(req) && stream->Read(&resp));
    EXPECT_EQ(resp.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
    req.set_file_containing_symbol("raftkv.v1.KV");
    ASSERT_TRUE(stream->Write(req) && stream->Read(&resp));
    EXPECT_GT(resp.file_descriptor_response().file_descriptor_proto_size(), 0);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  const Honest::Result during = honest.Stop();
  // The leader and its term stay; nothing forged was stored.
  EXPECT_EQ(cluster.WaitForLeader(10000, &error), leader) << error;
  EXPECT_EQ(cluster.last_leader_term(), term) << "a forged message moved the term";
  std::string value;
  bool found = true;
  ASSERT_TRUE(honest.client().Get("pwned", &value, &found).ok());
  EXPECT_FALSE(found) << "a forged append was stored: pwned=" << value;
  ExpectUnharmed("forged RequestVote/AppendEntries/Append stream (term +1000) without the peer secret",
                 std::to_string(refused) + " of 18 refused UNAUTHENTICATED; leader and term kept",
                 before, during, cluster);
}

// 2. A server asked to protect its clients with a token but to leave its
// peer methods open refuses to start, naming the flag to add.
TEST_F(Abuse, ATokenWithOpenPeerMethodsIsRefusedAtStart) {
  cluster_ = std::make_unique<ProcessCluster>(1);
  ProcessCluster& cluster = *cluster_;
  WriteFile(cluster.dir() + "/client.token", "client-secret\n");
  const std::vector<std::string> args = {
      "--id=1", "--cluster_file=" + cluster.cluster_file(), "--data_dir=" + cluster.DataDir(1),
      "--log_dir=" + cluster.dir(), "--token_file=" + cluster.dir() + "/client.token"};
  RunResult r = RunToCompletion(ServerBinary(), args, cluster.dir(), 15000 * kTimeScale);
  EXPECT_TRUE(r.exited) << r.output;
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("set --peer_token_file"), std::string::npos) << r.output;
  std::printf("Abuse: --token_file without TLS or --peer_token_file | refused at start (exit 2, names "
              "--peer_token_file) | - | -\n");
}

// 3. The log owns the membership: member 1, restarted alone with a cluster
// file edited to list only itself, does not become a one-member cluster. It
// cannot elect itself or acknowledge a write; it says what differs; with the
// others back the cluster goes on with every acknowledged write.
TEST_F(Abuse, AnEditedClusterFileCannotChangeTheMembership) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(Launch(3, {}, &leader));
  ProcessCluster& cluster = *cluster_;
  std::string error;
  auto client = cluster.NewClient(10000);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(client->Put("k" + std::to_string(i), "v" + std::to_string(i)).ok());
  client.reset();
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(cluster.Stop(i));
  const std::string edited = cluster.dir() + "/alone.conf";
  WriteFile(edited, "1 " + cluster.Endpoint(1) + "\n");
  ASSERT_TRUE(cluster.Start(1, {"--cluster_file=" + edited}));
  auto alone = cluster.NewClientFor(1, 3000, 1000);
  const grpc::Status s = alone->Put("k", "written-by-member-1-alone");
  EXPECT_FALSE(s.ok()) << "a member alone acknowledged a write with an edited cluster file";
  StatusResponse st;
  ASSERT_TRUE(cluster.StatusOf(1, &st).ok());
  EXPECT_NE(st.role(), "leader");
  EXPECT_EQ(st.voters_size(), 3) << "the edited file changed the voters";
  EXPECT_NE(cluster.LogText(1).find("the cluster file disagrees with the membership"), std::string::npos);
  ASSERT_TRUE(cluster.Start(2));
  ASSERT_TRUE(cluster.Start(3));
  ASSERT_NE(cluster.WaitForLeader(20000, &error), 0u) << error;
  auto after = cluster.NewClient(10000);
  std::string value;
  bool found = false;
  ASSERT_TRUE(after->Get("k", &value, &found).ok());
  EXPECT_FALSE(found && value == "written-by-member-1-alone");
  for (int i = 0; i < 50; i += 7) {
    ASSERT_TRUE(after->Get("k" + std::to_string(i), &value, &found).ok());
    EXPECT_TRUE(found);
  }
  ASSERT_TRUE(after->Put("after", "1").ok());
  std::printf("Abuse: member restarted alone with a cluster file listing only itself | no election, no "
              "write acknowledged (%s); warning names the difference | - | -\n",
              StatusCodeName(s.error_code()));
}

// 4. A small transaction that would make every replica materialise (and
// keep, and snapshot) a huge answer: 300 prefix gets over a 1 MB store, or
// 100 within --max_txn_ops, or with the operation limit raised. Refused
// before it is proposed; no member grows.
TEST_F(Abuse, ATransactionWithAHugeAnswerIsRefusedBeforeItIsProposed) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(
      Launch(3, {}, &leader, [](ProcessCluster& c) { c.SetNodeFlags(1, {"--max_txn_ops=1000"}); }));
  ProcessCluster& cluster = *cluster_;
  auto client = cluster.NewClient(20000);
  ASSERT_TRUE(Fill(*client, "big/", 1000, 1000, 100, 10000, 1000));  // 1 MB under big/
  Honest honest(cluster, "honest/");
  const Honest::Result before = honest.Measure(2000);
  honest.Start();
  std::map<std::string, int> outcomes;
  for (int gets : {300, 100}) {
    for (int member = 1; member <= 3; ++member) {
      auto kv = KV::NewStub(Channel(cluster.Endpoint(member)));
      TxnRequest txn;
      txn.add_success()->mutable_request_put()->set_key("big/marker");
      for (int g = 0; g < gets; ++g) {
        RangeRequest* r = txn.add_success()->mutable_request_range();
        r->set_key("big/");
        r->set_range_end("big0");
      }
      grpc::ClientContext ctx;
      SetDeadline(&ctx, 10000);
      TxnResponse resp;
      const grpc::Status s = kv->Txn(&ctx, txn, &resp);
      EXPECT_TRUE(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                  s.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
          << gets << " gets via member " << member << ": " << Code(s);
      ++outcomes[StatusCodeName(s.error_code())];
    }
  }
  const Honest::Result during = honest.Stop();
  std::string value;
  bool found = true;
  ASSERT_TRUE(client->Get("big/marker", &value, &found).ok());
  EXPECT_FALSE(found) << "a refused transaction wrote";
  std::string outcome;
  for (const auto& [code, n] : outcomes) outcome += std::to_string(n) + " " + code + " ";
  ExpectUnharmed("write Txn of put + 300 (or 100) prefix gets over a 1 MB store", outcome + "(nothing proposed)",
                 before, during, cluster);
}

// 5. A thousand watch streams that never read: each client address holds at
// most --max_watchers_per_client of them, another address still watches,
// and once their responses wait --watch_stall_timeout_ms they are cut off
// with RESOURCE_EXHAUSTED and the slots come back.
TEST_F(Abuse, WatchersThatNeverReadAreCutOffAndCannotTakeEverySlot) {
  // Sanitizer builds run the server and this client several times slower:
  // fewer watchers there, the same per-client limit semantics.
  constexpr int kWatchers = kTimeScale == 1 ? 1000 : 200;
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(Launch(
      1, {"--watch_stall_timeout_ms=3000", "--max_watchers_per_client=" + std::to_string(kWatchers),
          "--watch_batch_bytes=65536"},
      &leader,
      [](ProcessCluster& c) { c.SetNodeFlags(1, {"--listen_address=[::]:" + std::to_string(c.Port(1))}); }));
  ProcessCluster& cluster = *cluster_;
  Honest honest(cluster, "honest/");
  const Honest::Result before = honest.Measure(2000);

  // Over several connections (each carries at most --max_concurrent_streams).
  std::vector<std::unique_ptr<Watch::Stub>> attackers;
  for (int c = 0; c < 4; ++c) {
    attackers.push_back(Watch::NewStub(Channel("127.0.0.1:" + std::to_string(cluster.Port(1)))));
  }
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientAsyncReader<WatchResponse>>> streams;
  WatchRequest req;
  req.set_key("w/");
  req.set_range_end("w0");
  for (int i = 0; i <= kWatchers; ++i) {  // one more than the limit
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(attackers[i % attackers.size()]->AsyncWatch(contexts.back().get(), req, &cq,
                                                                   reinterpret_cast<void*>(i + 1)));
  }
  for (int i = 0; i <= kWatchers; ++i) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_EQ(cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + 30s), grpc::CompletionQueue::GOT_EVENT)
        << "watch " << i << " of " << kWatchers << " never started";
  }
  // Another client address (IPv6 loopback) still gets a watch.
  auto other = Watch::NewStub(Channel("[::1]:" + std::to_string(cluster.Port(1))));
  grpc::ClientContext other_ctx;
  auto other_stream = other->Watch(&other_ctx, req);
  WatchResponse created;
  const bool other_created = other_stream->Read(&created) && created.created();
  EXPECT_TRUE(other_created) << "a second client got no watch while the first held its limit";
  honest.Start();
  // Changes the watchers never read: the responses pile up until flow
  // control stops them.
  auto writer = cluster.NewClient(20000);
  ASSERT_TRUE(Fill(*writer, "w/", 200, 2000, 20, 0, 50));
  std::this_thread::sleep_for(8s);  // past the stall bound
  const Honest::Result during = honest.Stop();
  std::string usage;
  const int64_t rss_during = MaxRss(cluster, &usage);
  // Every stream is over: RESOURCE_EXHAUSTED for the stalled ones and the
  // one over the limit. The client sees a status only after the messages it
  // holds: it reads them (each stream until its end), then finishes it.
  std::vector<grpc::Status> statuses(streams.size());
  std::vector<WatchResponse> sink(streams.size());
  std::vector<bool> finishing(streams.size(), false);
  for (size_t i = 0; i < streams.size(); ++i) streams[i]->Read(&sink[i], reinterpret_cast<void*>(i + 1));
  const auto deadline = std::chrono::system_clock::now() + 60s;
  size_t finished = 0;
  while (finished < streams.size()) {
    void* tag = nullptr;
    bool ok = false;
    if (cq.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) break;
    const size_t i = reinterpret_cast<size_t>(tag) - 1;
    if (finishing[i]) {
      ++finished;
    } else if (ok) {
      streams[i]->Read(&sink[i], tag);
    } else {
      finishing[i] = true;
      streams[i]->Finish(&statuses[i], tag);
    }
  }
  EXPECT_EQ(finished, streams.size()) << "streams still open after the stall bound";
  int exhausted = 0;
  std::string sample;
  for (const grpc::Status& s : statuses) {
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
      if (sample.empty() || sample.find("--watch_stall") == std::string::npos) sample = s.error_message();
    }
  }
  EXPECT_EQ(exhausted, kWatchers + 1) << sample;
  EXPECT_NE(sample.find("--watch_stall_timeout_ms"), std::string::npos) << sample;
  // The slots are back: the attacker's address may watch again.
  auto fresh = Watch::NewStub(Channel("127.0.0.1:" + std::to_string(cluster.Port(1))));
  grpc::ClientContext again_ctx;
  auto again = fresh->Watch(&again_ctx, req);
  WatchResponse again_created;
  EXPECT_TRUE(again->Read(&again_created) && again_created.created());
  again_ctx.TryCancel();
  again->Finish();
  other_ctx.TryCancel();
  other_stream->Finish();
  for (auto& ctx : contexts) ctx->TryCancel();  // any stream still open
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  EXPECT_LE(rss_during, kRssBoundMb) << usage;
  ExpectUnharmed((std::to_string(kWatchers + 1) + " watch streams from one address that never read").c_str(),
                 std::to_string(exhausted) + " ended RESOURCE_EXHAUSTED (1 over the per-client limit, the rest "
                                             "cut off after 3 s); another address watched",
                 before, during, cluster);
}

// 6. A thousand open keep-alive streams cost a member no thread each (they
// are served asynchronously) and keep being answered.
TEST_F(Abuse, AThousandKeepAliveStreamsHoldNoThreads) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(Launch(1, {}, &leader));
  ProcessCluster& cluster = *cluster_;
  Honest honest(cluster, "honest/");
  const Honest::Result before = honest.Measure(2000);
  LeaseGrantResponse lease;
  ASSERT_TRUE(honest.client().LeaseGrant(600, 0, &lease).ok());
  const int threads_before = Usage(cluster.Pid(1)).threads;

  constexpr int kStreams = 1000;
  auto stub = Lease::NewStub(Channel(cluster.Endpoint(1)));
  grpc::CompletionQueue cq;
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientAsyncReaderWriter<LeaseKeepAliveRequest, LeaseKeepAliveResponse>> rw;
    LeaseKeepAliveRequest req;
    LeaseKeepAliveResponse resp;
  };
  std::vector<std::unique_ptr<Stream>> streams;
  auto drain = [&](size_t n) {
    size_t got = 0;
    const auto deadline = std::chrono::system_clock::now() + 60s;
    while (got < n) {
      void* tag = nullptr;
      bool ok = false;
      if (cq.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) break;
      ++got;
    }
    return got;
  };
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<Stream>());
    Stream& s = *streams.back();
    s.req.set_id(lease.id());
    s.rw = stub->AsyncLeaseKeepAlive(&s.ctx, &cq, &s);
  }
  ASSERT_EQ(drain(kStreams), static_cast<size_t>(kStreams));
  for (auto& s : streams) s->rw->Write(s->req, s.get());
  ASSERT_EQ(drain(kStreams), static_cast<size_t>(kStreams));
  for (auto& s : streams) s->rw->Read(&s->resp, s.get());
  ASSERT_EQ(drain(kStreams), static_cast<size_t>(kStreams));
  int renewed = 0;
  for (auto& s : streams) renewed += s->resp.ttl() == 600;
  EXPECT_EQ(renewed, kStreams);
  const ProcUsage open = Usage(cluster.Pid(1));
  honest.Start();
  std::this_thread::sleep_for(3s);
  const Honest::Result during = honest.Stop();
  EXPECT_LT(open.threads, threads_before + 50)
      << "the open keep-alive streams took threads: " << threads_before << " before, " << open.threads;
  for (auto& s : streams) s->ctx.TryCancel();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  ExpectUnharmed("1000 open LeaseKeepAlive streams",
                 std::to_string(renewed) + " renewed; member threads " + std::to_string(threads_before) + " -> " +
                     std::to_string(open.threads),
                 before, during, cluster);
}

// Whether the server closed `fd` (EOF or reset) within `ms`; anything it
// sent meanwhile is read and dropped only when `read` is set.
bool ClosedWithin(int fd, int ms) {
  const auto end = Steady::now() + Millis(ms);
  char buf[4096];
  while (Steady::now() < end) {
    timeval tv{0, 100 * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
  }
  return false;
}

// 7. Connections that never finish their handshake, and connections that
// finish it and then go silent (never answer a ping: a half-open peer),
// are closed by the member within its bounds, and give their descriptors
// back.
TEST_F(Abuse, IdleAndHalfOpenConnectionsAreClosed) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(Launch(
      1, {"--grpc_handshake_timeout_ms=2000", "--grpc_keepalive_interval_ms=1000", "--grpc_keepalive_timeout_ms=1000"},
      &leader));
  ProcessCluster& cluster = *cluster_;
  Honest honest(cluster, "honest/");
  const Honest::Result before = honest.Measure(2000);
  const int fds_before = Usage(cluster.Pid(1)).fds;
  constexpr int kSilent = 1000;
  constexpr int kHalfOpen = 100;
  std::vector<int> silent, half_open;
  for (int i = 0; i < kSilent; ++i) {
    const int fd = ConnectLoopback(cluster.Port(1));
    ASSERT_GE(fd, 0);
    silent.push_back(fd);
  }
  // The HTTP/2 preface and an empty SETTINGS frame, then silence: no
  // SETTINGS ack, no ping answered, nothing read.
  static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  static const unsigned char kSettings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  for (int i = 0; i < kHalfOpen; ++i) {
    const int fd = ConnectLoopback(cluster.Port(1));
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(kPreface) - 1));
    ASSERT_EQ(::send(fd, kSettings, sizeof(kSettings), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(kSettings)));
    half_open.push_back(fd);
  }
  honest.Start();
  const int fds_during = Usage(cluster.Pid(1)).fds;
  std::this_thread::sleep_for(5s);
  const Honest::Result during = honest.Stop();
  int silent_closed = 0, half_closed = 0;
  for (int fd : silent) silent_closed += ClosedWithin(fd, 100);
  for (int fd : half_open) half_closed += ClosedWithin(fd, 3000);
  for (int fd : silent) ::close(fd);
  for (int fd : half_open) ::close(fd);
  EXPECT_EQ(silent_closed, kSilent) << "connections that never sent a byte stayed open";
  EXPECT_EQ(half_closed, kHalfOpen) << "connections that never answered a ping stayed open";
  int fds_after = 0;
  WaitUntil([&] { return (fds_after = Usage(cluster.Pid(1)).fds) < fds_before + 50; }, 10000, 100);
  EXPECT_LT(fds_after, fds_before + 50) << "descriptors not given back: " << fds_before << " before, "
                                        << fds_during << " during, " << fds_after << " after";
  ExpectUnharmed("1000 connections that never handshake + 100 that never answer a ping",
                 std::to_string(silent_closed) + " + " + std::to_string(half_closed) +
                     " closed (2 s handshake bound, 1+1 s keep-alive); fds " + std::to_string(fds_during) +
                     " -> " + std::to_string(fds_after),
                 before, during, cluster);
}

// 8. Ranges over the whole of a large store, asked for in a loop, get
// RESOURCE_EXHAUSTED at --max_response_bytes without copying past it; paged
// reads still work and writes go on.
TEST_F(Abuse, HugeRangesAreRefusedAtTheResponseBound) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(Launch(3, {"--max_response_bytes=4194304", "--max_txn_result_bytes=1048576"}, &leader));
  ProcessCluster& cluster = *cluster_;
  auto client = cluster.NewClient(30000);
  ASSERT_TRUE(Fill(*client, "r/", 20000, 1000, 500, 100000, 20000));  // 20 MB
  Honest honest(cluster, "honest/");
  const Honest::Result before = honest.Measure(2000);
  honest.Start();
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0}, other{0};
  std::string other_error;
  std::mutex mu;
  std::vector<std::thread> attackers;
  for (int t = 0; t < 2; ++t) {
    attackers.emplace_back([&, t] {
      auto kv = KV::NewStub(Channel(cluster.Endpoint(1 + t)));
      while (!stop) {
        RangeRequest all;
        all.set_key("r/");
        all.set_range_end("r0");
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 10000);
        RangeResponse resp;
        const grpc::Status s = kv->Range(&ctx, all, &resp);
        if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          ++refused;
        } else {
          ++other;
          std::lock_guard<std::mutex> lock(mu);
          other_error = Code(s);
        }
      }
    });
  }
  std::this_thread::sleep_for(4s);
  stop = true;
  for (auto& a : attackers) a.join();
  const Honest::Result during = honest.Stop();
  EXPECT_EQ(other.load(), 0) << other_error;
  EXPECT_GT(refused.load(), 0);
  RangeRequest page;
  page.set_key("r/");
  page.set_range_end("r0");
  page.set_limit(100);
  RangeResponse resp;
  ASSERT_TRUE(client->Range(page, &resp).ok());
  EXPECT_EQ(resp.kvs_size(), 100);
  EXPECT_EQ(resp.count(), 20000);
  ExpectUnharmed("whole-range reads of a 20 MB store in a loop (2 threads)",
                 std::to_string(refused.load()) + " refused RESOURCE_EXHAUSTED at 4 MiB; paged reads work",
                 before, during, cluster);
}

// 9. Lease churn: grants and revokes in a loop, keep-alives of revoked
// leases, grants retried through the session. Nothing leaks: only the
// leases still held remain, a revoked lease is never renewed.
TEST_F(Abuse, LeaseChurnLeavesNothingBehind) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(Launch(3, {}, &leader));
  ProcessCluster& cluster = *cluster_;
  Honest honest(cluster, "honest/");
  const Honest::Result before = honest.Measure(2000);
  honest.Start();
  auto churner = cluster.NewClient(10000);
  int cycles = 0, renewed_after_revoke = 0;
  const auto end = Steady::now() + 4s;
  while (Steady::now() < end) {
    LeaseGrantResponse g;
    ASSERT_TRUE(churner->LeaseGrant(60, 0, &g).ok());
    ASSERT_TRUE(churner->Put("lease/" + std::to_string(cycles % 10), "x").ok());
    ASSERT_TRUE(churner->LeaseRevoke(g.id()).ok());
    LeaseKeepAliveResponse ka;
    const grpc::Status s = churner->LeaseKeepAliveOnce(g.id(), &ka);
    if (s.ok() && ka.ttl() != 0) ++renewed_after_revoke;
    // A fixed id granted, revoked and granted again: each grant a lease of
    // its own; a grant of an id in use is refused at once, not retried.
    const int64_t fixed = 1000 + cycles % 5;
    LeaseGrantResponse again;
    ASSERT_TRUE(churner->LeaseGrant(60, fixed, &again).ok());
    const auto start = Steady::now();
    const grpc::Status dup = churner->LeaseGrant(60, fixed, &again);
    EXPECT_EQ(dup.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(dup);
    EXPECT_LT(ElapsedMs(start), 2000) << "a grant of an id in use was retried";
    ASSERT_TRUE(churner->LeaseRevoke(fixed).ok());
    ++cycles;
  }
  const Honest::Result during = honest.Stop();
  EXPECT_EQ(renewed_after_revoke, 0) << "a revoked lease was renewed";
  LeaseLeasesResponse leases;
  ASSERT_TRUE(churner->LeaseLeases(&leases).ok());
  EXPECT_EQ(leases.leases_size(), 0) << "leases leaked";
  ExpectUnharmed("grant/revoke/keep-alive churn",
                 std::to_string(cycles) + " cycles; 0 leases left, 0 renewals of revoked leases", before, during,
                 cluster);
}

// 10. One session sending writes whose answers it never lets go (it never
// advances first_outstanding), and a client opening sessions without end:
// every replica keeps at most --max_session_saved_bytes of the first and
// --max_sessions of the second.
TEST_F(Abuse, SessionAnswersAndSessionsAreBounded) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(
      Launch(3, {"--max_session_saved_bytes=2097152", "--max_saved_bytes=8388608", "--max_sessions=50"}, &leader));
  ProcessCluster& cluster = *cluster_;
  auto kv = KV::NewStub(Channel(cluster.Endpoint(static_cast<int>(leader))));
  {  // 100 KB the transactions read
    auto client = cluster.NewClient(10000);
    ASSERT_TRUE(Fill(*client, "s/", 100, 1000, 100, 100, 100));
  }
  Honest honest(cluster, "honest/");
  const Honest::Result before = honest.Measure(2000);
  honest.Start();
  grpc::ClientContext open_ctx;
  OpenSessionResponse session;
  ASSERT_TRUE(kv->OpenSession(&open_ctx, OpenSessionRequest(), &session).ok());
  int written = 0;
  for (uint64_t seq = 1; seq <= 2000; ++seq) {  // ~200 MB of answers if all were kept
    TxnRequest txn;
    txn.add_success()->mutable_request_put()->set_key("s/marker");
    RangeRequest* r = txn.add_success()->mutable_request_range();
    r->set_key("s/");
    r->set_range_end("s0");
    txn.mutable_session()->set_client_id(session.client_id());
    txn.mutable_session()->set_sequence(seq);
    txn.mutable_session()->set_first_outstanding(1);
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 10000);
    TxnResponse resp;
    const grpc::Status s = kv->Txn(&ctx, txn, &resp);
    ASSERT_TRUE(s.ok()) << seq << ": " << Code(s);
    ++written;
  }
  // The oldest answers are gone: their retry is refused, never re-applied.
  {
    TxnRequest retry;
    retry.add_success()->mutable_request_put()->set_key("s/marker");
    retry.mutable_session()->set_client_id(session.client_id());
    retry.mutable_session()->set_sequence(1);
    retry.mutable_session()->set_first_outstanding(1);
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 10000);
    TxnResponse resp;
    const grpc::Status s = kv->Txn(&ctx, retry, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Code(s);
  }
  int opened = 0, exhausted = 0;
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 10000);
    OpenSessionResponse resp;
    const grpc::Status s = kv->OpenSession(&ctx, OpenSessionRequest(), &resp);
    if (s.ok()) ++opened;
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++exhausted;
  }
  const Honest::Result during = honest.Stop();
  EXPECT_GT(exhausted, 0) << "no session was refused past --max_sessions=50";
  EXPECT_LE(opened, 50);
  // What a snapshot carries: taken now, its size bounds the saved answers.
  auto admin = Admin::NewStub(Channel(cluster.Endpoint(static_cast<int>(leader))));
  grpc::ClientContext snap_ctx;
  SetDeadline(&snap_ctx, 30000);
  TakeSnapshotResponse snap;
  ASSERT_TRUE(admin->TakeSnapshot(&snap_ctx, TakeSnapshotRequest(), &snap).ok());
  EXPECT_LT(snap.bytes(), 20u << 20) << "the snapshot carries the session's answers unbounded";
  ExpectUnharmed("2000 Txn answers of ~100 KB in one session never released; 100 OpenSession",
                 "answers kept within 2 MiB per session (snapshot " + std::to_string(snap.bytes() >> 20) +
                     " MB); " + std::to_string(exhausted) + " sessions refused RESOURCE_EXHAUSTED",
                 before, during, cluster);
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
