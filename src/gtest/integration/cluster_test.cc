// Integration tests of a real 3-process cluster: election, redirects, input
// validation, CompareAndSwap under contention, loss of quorum and start-up
// errors.
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <future>
#include <set>

#include "gtest/integration/integration_test_util.h"

namespace raftkv {
namespace integration {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST_F(Integration, ThreeNodesElectOneLeader) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));

  std::set<uint64_t> leaders_by_role, leader_ids, terms;
  for (int i = 1; i <= 3; ++i) {
    StatusResponse st = MustStatus(cluster(), i);
    EXPECT_EQ(st.id(), static_cast<uint64_t>(i));
    EXPECT_EQ(st.address(), cluster().Endpoint(i));
    EXPECT_EQ(std::vector<uint64_t>(st.voters().begin(), st.voters().end()),
              (std::vector<uint64_t>{1, 2, 3}))
        << "member " << i;
    if (st.role() == "leader") {
      leaders_by_role.insert(st.id());
    } else {
      EXPECT_EQ(st.role(), "follower") << "member " << i;
    }
    leader_ids.insert(st.leader_id());
    terms.insert(st.term());
    EXPECT_EQ(st.leader_address(), cluster().Endpoint(static_cast<int>(st.leader_id())))
        << "member " << i;
  }
  EXPECT_EQ(leaders_by_role, std::set<uint64_t>{leader});
  EXPECT_EQ(leader_ids, std::set<uint64_t>{leader});
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_GE(*terms.begin(), 1u);

  // The leader serves a write in its term.
  auto client = cluster().NewClient();
  KV::Stub stub(NewChannel(cluster().Endpoint(static_cast<int>(leader))));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 3000);
  PutRequest req;
  req.set_key("elected");
  req.set_value("yes");
  PutResponse resp;
  grpc::Status s = stub.Put(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << Code(s);
  EXPECT_EQ(resp.term(), *terms.begin());
  EXPECT_GE(resp.index(), 2u) << "the leader's no-op comes first";
  std::string value;
  bool found = false;
  s = client->Get("elected", &value, &found);
  ASSERT_TRUE(s.ok()) << Code(s);
  EXPECT_TRUE(found);
  EXPECT_EQ(value, "yes");
}

// With --forward_to_leader=false a follower refuses what only the leader
// can answer, naming the leader.
TEST_F(Integration, ClientAtFollowerIsRedirected) {
  uint64_t leader = 0;
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--forward_to_leader=false");
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));
  const int l = static_cast<int>(leader);
  const int f = OtherThan(cluster(), l);
  const std::string leader_addr = cluster().Endpoint(l);

  auto client = cluster().NewClient();
  ASSERT_TRUE(client->Put("redirect-key", "v1").ok());

  KV::Stub follower(NewChannel(cluster().Endpoint(f)));
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 2000);
    PutRequest req;
    req.set_key("redirect-key");
    req.set_value("from-follower");
    PutResponse resp;
    grpc::Status s = follower.Put(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(s);
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), leader_addr);
    EXPECT_EQ(Trailer(ctx, kLeaderIdMetadataKey), std::to_string(leader));
    EXPECT_NE(s.error_message().find(leader_addr), std::string::npos)
        << "the message should name the leader too: " << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 2000);
    GetRequest req;
    req.set_key("redirect-key");
    GetResponse resp;
    grpc::Status s = follower.Get(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(s);
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), leader_addr);
    EXPECT_EQ(Trailer(ctx, kLeaderIdMetadataKey), std::to_string(leader));
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 2000);
    DeleteRequest req;
    req.set_key("redirect-key");
    DeleteResponse resp;
    grpc::Status s = follower.Delete(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Code(s);
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), leader_addr);
  }
  // A stale read is served by the follower itself (once it applied the write).
  GetResponse stale;
  grpc::Status last;
  const bool seen = WaitUntil(
      [&] {
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 1000);
        GetRequest req;
        req.set_key("redirect-key");
        req.set_allow_stale(true);
        last = follower.Get(&ctx, req, &stale);
        return last.ok() && stale.found();
      },
      3000);
  ASSERT_TRUE(last.ok()) << Code(last);
  ASSERT_TRUE(seen) << "follower never applied the write";
  EXPECT_EQ(stale.value(), "v1");
  EXPECT_GE(stale.applied_index(), 2u);

  // The client library follows the redirect from a follower-first endpoint list.
  ClientOptions options;
  options.endpoints = {cluster().Endpoint(f), cluster().Endpoint(l)};
  KvClient follower_first(options);
  grpc::Status s = follower_first.Put("redirect-key", "v2");
  ASSERT_TRUE(s.ok()) << Code(s);
  EXPECT_EQ(follower_first.last_leader(), leader_addr);
  std::string value;
  bool found = false;
  s = follower_first.Get("redirect-key", &value, &found);
  ASSERT_TRUE(s.ok()) << Code(s);
  EXPECT_EQ(value, "v2");
}

// By default a follower forwards writes, transactions, sessions, lease calls
// and linearizable reads to the leader and relays the answers, with the
// leader's id and address in the trailers.
TEST_F(Integration, FollowerForwardsToTheLeader) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  const int l = static_cast<int>(leader);
  const int f = OtherThan(cluster(), l);
  const std::string leader_addr = cluster().Endpoint(l);
  auto channel = NewChannel(cluster().Endpoint(f));
  KV::Stub kv(channel);
  Lease::Stub lease(channel);
  auto expect_hint = [&](const grpc::ClientContext& ctx, const char* what) {
    EXPECT_EQ(Trailer(ctx, kLeaderAddrMetadataKey), leader_addr) << what;
    EXPECT_EQ(Trailer(ctx, kLeaderIdMetadataKey), std::to_string(leader)) << what;
  };

  int64_t put_revision = 0;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    PutRequest req;
    req.set_key("fwd/a");
    req.set_value("1");
    PutResponse resp;
    grpc::Status s = kv.Put(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << Code(s);
    expect_hint(ctx, "Put");
    EXPECT_GT(resp.revision(), 0);
    put_revision = resp.revision();
  }
  {  // linearizable: sees the write at once
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    RangeRequest req;
    req.set_key("fwd/");
    req.set_range_end("fwd0");
    RangeResponse resp;
    grpc::Status s = kv.Range(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << Code(s);
    expect_hint(ctx, "Range");
    ASSERT_EQ(resp.kvs_size(), 1);
    EXPECT_EQ(resp.kvs(0).value(), "1");
    EXPECT_GE(resp.header().revision(), put_revision);
    EXPECT_EQ(resp.header().member_id(), leader) << "answered by the leader";
  }
  {  // a transaction: compare and put
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    TxnRequest req;
    Compare* c = req.add_compare();
    c->set_key("fwd/a");
    c->set_target(Compare::VALUE);
    c->set_result(Compare::EQUAL);
    c->set_value("1");
    PutRequest* p = req.add_success()->mutable_request_put();
    p->set_key("fwd/b");
    p->set_value("2");
    TxnResponse resp;
    grpc::Status s = kv.Txn(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << Code(s);
    EXPECT_TRUE(resp.succeeded());
  }
  int64_t lease_id = 0;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    LeaseGrantRequest req;
    req.set_ttl(30);
    LeaseGrantResponse resp;
    grpc::Status s = lease.LeaseGrant(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << Code(s);
    expect_hint(ctx, "LeaseGrant");
    lease_id = resp.id();
    EXPECT_GT(lease_id, 0);
  }
  {  // the keep-alive stream is relayed
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    auto stream = lease.LeaseKeepAlive(&ctx);
    for (int i = 0; i < 3; ++i) {
      LeaseKeepAliveRequest req;
      req.set_id(lease_id);
      ASSERT_TRUE(stream->Write(req));
      LeaseKeepAliveResponse resp;
      ASSERT_TRUE(stream->Read(&resp));
      EXPECT_EQ(resp.id(), lease_id);
      EXPECT_EQ(resp.ttl(), 30);
      EXPECT_EQ(resp.header().member_id(), leader);
    }
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << Code(s);
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    LeaseRevokeRequest req;
    req.set_id(lease_id);
    LeaseRevokeResponse resp;
    grpc::Status s = lease.LeaseRevoke(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << Code(s);
  }
  {  // bad input is refused by the leader with its own status
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 5000);
    LeaseRevokeRequest req;
    req.set_id(lease_id);
    LeaseRevokeResponse resp;
    grpc::Status s = lease.LeaseRevoke(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Code(s);
  }
  // The client library, given only the follower, goes direct after one call.
  ClientOptions options;
  options.endpoints = {cluster().Endpoint(f)};
  KvClient follower_only(options);
  ASSERT_TRUE(follower_only.Put("fwd/c", "3").ok());
  EXPECT_EQ(follower_only.last_leader(), leader_addr);
  std::string value;
  bool found = false;
  ASSERT_TRUE(follower_only.Get("fwd/b", &value, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(value, "2");
}

// Calls `method` with raw bytes through a generic stub.
grpc::Status GenericCall(const std::string& endpoint, const std::string& method,
                         const std::string& payload, std::string* reply = nullptr) {
  grpc::GenericStub stub(NewChannel(endpoint));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 3000);
  grpc::Slice slice(payload);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(s); });
  grpc::Status s = done.get_future().get();
  if (s.ok() && reply != nullptr) {
    std::vector<grpc::Slice> slices;
    reply->clear();
    if (response.Dump(&slices).ok()) {
      for (auto& sl : slices) reply->append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
  }
  return s;
}

// Several threads increment one counter with read-CAS(old -> old + 1) loops,
// each through its own KvClient: every successful CAS is exactly one
// increment, so the final value equals the number of successful CAS calls.
TEST_F(Integration, CompareAndSwapCounterUnderContention) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  constexpr int kThreads = 4;
  constexpr int kIncrementsPerThread = 25;
  const std::string key = "counter";
  {
    auto client = cluster().NewClient();
    bool swapped = false;
    grpc::Status s = client->CompareAndSwap(key, nullptr, "0", &swapped);
    ASSERT_TRUE(s.ok()) << Code(s);
    ASSERT_TRUE(swapped);
  }
  std::atomic<int> successes{0};
  std::atomic<int> mismatches{0};
  std::mutex errors_mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto client = cluster().NewClient();
      std::string value;
      bool found = false;
      grpc::Status s = client->Get(key, &value, &found);
      for (int done = 0; s.ok() && done < kIncrementsPerThread;) {
        const std::string next = std::to_string(std::stoll(value) + 1);
        bool swapped = false;
        std::string current;
        s = client->CompareAndSwap(key, &value, next, &swapped, &found, &current);
        if (!s.ok()) break;
        if (swapped) {
          ++successes;
          ++done;
          value = next;
        } else {
          ++mismatches;
          if (!found) {
            s = grpc::Status(grpc::StatusCode::INTERNAL, "counter vanished");
            break;
          }
          value = current;  // what a mismatch reports is the value to try next
        }
      }
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(errors_mu);
        errors.push_back(Code(s));
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(successes.load(), kThreads * kIncrementsPerThread);
  std::cout << "CAS counter: " << successes.load() << " swaps, " << mismatches.load()
            << " mismatches\n";

  auto client = cluster().NewClient();
  std::string value;
  bool found = false;
  grpc::Status s = client->Get(key, &value, &found);
  ASSERT_TRUE(s.ok()) << Code(s);
  ASSERT_TRUE(found);
  EXPECT_EQ(value, std::to_string(successes.load()));
}

TEST_F(Integration, BadInput) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(
      3,
      [] {
        auto f = FastTimeoutFlags();
        f.push_back("--max_value_bytes=1024");
        f.push_back("--max_key_bytes=64");
        return f;
      }(),
      &leader));
  const int l = static_cast<int>(leader);
  const int f = OtherThan(cluster(), l);
  const int g = OtherThan(cluster(), l, f);
  KV::Stub kv(NewChannel(cluster().Endpoint(l)));

  auto put = [&](const std::string& key, const std::string& value, PutResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 3000);
    PutRequest req;
    req.set_key(key);
    req.set_value(value);
    PutResponse r;
    return kv.Put(&ctx, req, resp ? resp : &r);
  };

  grpc::Status s = put("", "v");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Code(s);
  EXPECT_FALSE(s.error_message().empty());
  EXPECT_NE(Lower(s.error_message()).find("key"), std::string::npos) << s.error_message();
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 3000);
    GetRequest req;
    GetResponse resp;
    s = kv.Get(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << "Get with empty key: " << Code(s);
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 3000);
    DeleteRequest req;
    DeleteResponse resp;
    s = kv.Delete(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << "Delete with empty key: " << Code(s);
  }

  // Limits: 64-byte keys and 1024-byte values are the largest accepted.
  s = put(std::string(64, 'k'), "v");
  EXPECT_TRUE(s.ok()) << "64-byte key: " << Code(s);
  s = put(std::string(65, 'k'), "v");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "65-byte key: " << Code(s);
  EXPECT_NE(s.error_message().find("64"), std::string::npos) << s.error_message();
  s = put("big-value", std::string(1024, 'v'));
  EXPECT_TRUE(s.ok()) << "1024-byte value: " << Code(s);
  s = put("too-big-value", std::string(1025, 'v'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "1025-byte value: " << Code(s);
  EXPECT_NE(s.error_message().find("1024"), std::string::npos) << s.error_message();
  // Binary keys and values, including NUL bytes, round-trip.
  const std::string binary_key("bin\0key\xff", 8);
  const std::string binary_value("\0\x01\x02\xfe\xff", 5);
  s = put(binary_key, binary_value);
  EXPECT_TRUE(s.ok()) << "binary key: " << Code(s);

  // Unknown fields (a newer client) are accepted and ignored.
  {
    PutRequest req;
    req.set_key("unknown-fields");
    req.set_value("still-works");
    auto* unknown = req.GetReflection()->MutableUnknownFields(&req);
    unknown->AddVarint(999, 7);
    unknown->AddLengthDelimited(1000, "some future field");
    ASSERT_GT(req.ByteSizeLong(), 30u);
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 3000);
    PutResponse resp;
    s = kv.Put(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << "Put with unknown fields: " << Code(s);
  }
  auto client = cluster().NewClient();
  std::string value;
  bool found = false;
  s = client->Get("unknown-fields", &value, &found);
  ASSERT_TRUE(s.ok()) << Code(s);
  EXPECT_TRUE(found);
  EXPECT_EQ(value, "still-works");
  s = client->Get(binary_key, &value, &found);
  ASSERT_TRUE(s.ok()) << Code(s);
  EXPECT_TRUE(found);
  EXPECT_EQ(value, binary_value);
  s = client->Get("too-big-value", &value, &found);
  ASSERT_TRUE(s.ok()) << Code(s);
  EXPECT_FALSE(found) << "a rejected Put must not be applied";

  // Unknown methods.
  s = GenericCall(cluster().Endpoint(l), "/raftkv.v1.KV/NoSuchMethod", "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Code(s);
  s = GenericCall(cluster().Endpoint(f), "/raftkv.NoSuchService/Put", "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Code(s);
  // A payload that is not a PutRequest at all.
  s = GenericCall(cluster().Endpoint(l), "/raftkv.v1.KV/Put", std::string("\xff\xff\xff\xff\x0f", 5));
  EXPECT_FALSE(s.ok()) << "garbage PutRequest accepted";
  // The generic path works for a real method (sanity check of GenericCall).
  {
    EchoRequest req;
    req.set_payload("ping");
    std::string reply;
    s = GenericCall(cluster().Endpoint(l), "/raftkv.v1.KV/Echo", req.SerializeAsString(), &reply);
    EXPECT_TRUE(s.ok()) << Code(s);
    EchoResponse resp;
    EXPECT_TRUE(resp.ParseFromString(reply));
    EXPECT_EQ(resp.payload(), "ping");
  }

  // Misrouted peer messages and impossible senders are refused before they
  // reach Raft. (A sender missing from this member's configuration is not
  // refused since membership changes: a member added later may lead, or send
  // a snapshot, before a lagging member learned the configuration that added
  // it. The core decides; see the vote from member 99 below.)
  Peer::Stub raft_f(NewChannel(cluster().Endpoint(f)));
  const uint64_t term = MustStatus(cluster(), f).term();
  auto append = [&](uint64_t from, uint64_t to, AppendEntriesResponse* resp) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 3000);
    AppendEntriesRequest req;
    req.set_term(term + 100);  // would depose the leader if it were obeyed
    req.set_leader_id(from);
    req.set_to(to);
    return raft_f.AppendEntries(&ctx, req, resp);
  };
  AppendEntriesResponse aresp;
  s = append(leader, static_cast<uint64_t>(g), &aresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << "to=other member: " << Code(s);
  s = append(0, static_cast<uint64_t>(f), &aresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "leader_id 0: " << Code(s);
  s = append(static_cast<uint64_t>(f), static_cast<uint64_t>(f), &aresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "leader_id = self: " << Code(s);
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 3000);
    RequestVoteRequest req;
    req.set_term(term + 100);
    req.set_candidate_id(99);
    req.set_to(static_cast<uint64_t>(f));
    req.set_last_log_index(1000000);
    req.set_last_log_term(term + 100);
    RequestVoteResponse resp;
    s = raft_f.RequestVote(&ctx, req, &resp);
    // Reaches the core, which hears from a live leader: no vote, no new term
    // (leader stickiness).
    EXPECT_TRUE(s.ok()) << "candidate 99: " << Code(s);
    EXPECT_FALSE(resp.granted()) << "candidate 99 got a vote";
    EXPECT_LT(resp.term(), term + 100) << "candidate 99 raised the term";
  }

  // None of it disturbed the cluster: same leader and term, writes served.
  // (A real election may have raised the term by one or two meanwhile; the
  // refused messages carried term + 100.)
  StatusResponse st = MustStatus(cluster(), f);
  EXPECT_LT(st.term(), term + 100) << "a refused message changed the term";
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(cluster().IsRunning(i)) << "member " << i << " died";
  s = client->Put("after-bad-input", "ok");
  EXPECT_TRUE(s.ok()) << Code(s);
  s = client->Get("after-bad-input", &value, &found);
  EXPECT_TRUE(s.ok() && found && value == "ok") << Code(s);
}

// KvClient promises (kv_client.h) that a server that comes back is used again
// "within about a second" (its reconnect back-off is capped at 1 s, +-20%
// jitter). Checked, with kReconnectSlackMs of margin, for a client that was
// connected when the member died and for one created while it was down.
constexpr int64_t kReconnectSlackMs = 2500;

TEST_F(Integration, ClientReconnectsToRestartedNode) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  const int f = OtherThan(cluster(), static_cast<int>(leader));
  auto writer = cluster().NewClient();
  ASSERT_TRUE(writer->Put("reconnect", "v").ok());
  std::string value;
  bool found = false;

  // Polls both a brand-new channel per attempt (which sees the server as soon
  // as it serves) and `client` (which saw the member down) from the restart
  // on; returns how much later `client` got its first answer.
  auto measure = [&](KvClient& client, const char* what) -> int64_t {
    const auto start = Steady::now();
    int64_t fresh_ok = -1, old_ok = -1;
    grpc::Status last;
    while (ElapsedMs(start) < 15000 && (fresh_ok < 0 || old_ok < 0)) {
      if (fresh_ok < 0) {
        // A private channel (own subchannel pool), so that it does not
        // reconnect the shared subchannel on the old client's behalf.
        KV::Stub fresh(NewChannel(cluster().Endpoint(f)));
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 300);
        StatusResponse st;
        if (fresh.Status(&ctx, StatusRequest(), &st).ok()) fresh_ok = ElapsedMs(start);
      }
      if (old_ok < 0) {
        last = client.Get("reconnect", &value, &found, /*allow_stale=*/true);
        if (last.ok()) old_ok = ElapsedMs(start);
      }
      std::this_thread::sleep_for(Millis(20));
    }
    std::cerr << "[ info     ] " << what << ": a new client got an answer " << fresh_ok
              << " ms after the restart, this one after " << old_ok << " ms\n";
    EXPECT_GE(fresh_ok, 0) << "the restarted member never answered";
    EXPECT_GE(old_ok, 0) << what << ": " << Code(last);
    return old_ok < 0 ? 15000 : old_ok - fresh_ok;
  };

  // 1. Connected before the crash.
  auto connected = cluster().NewClientFor(f, /*timeout_ms=*/300, /*rpc_timeout_ms=*/300);
  ASSERT_TRUE(WaitUntil(
      [&] { return connected->Get("reconnect", &value, &found, true).ok() && found; }, 3000));
  cluster().Kill(f);
  grpc::Status s = connected->Get("reconnect", &value, &found, true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Code(s);
  ASSERT_TRUE(cluster().Restart(f));
  int64_t ms = measure(*connected, "client connected before the crash");
  EXPECT_LT(ms, kReconnectSlackMs)
      << "the client kept failing fast although the member was serving";

  // 2. Created while the member was down, retrying now and then (a client
  // started during a rolling restart, say).
  cluster().Kill(f);
  auto late = cluster().NewClientFor(f, /*timeout_ms=*/300, /*rpc_timeout_ms=*/300);
  for (int i = 0; i < 5; ++i) {
    s = late->Get("reconnect", &value, &found, true);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Code(s);
    std::this_thread::sleep_for(Millis(100));
  }
  ASSERT_TRUE(cluster().Restart(f));
  ms = measure(*late, "client created while the member was down");
  EXPECT_LT(ms, kReconnectSlackMs)
      << "the client kept failing fast although the member was serving";
}

// A client started before the cluster (an application that comes up with
// it): once the members serve, the client must reach them soon.
TEST_F(Integration, ClientStartedBeforeClusterConnects) {
  cluster_ = std::make_unique<ProcessCluster>(3, FastTimeoutFlags());
  std::vector<std::unique_ptr<KvClient>> early;
  // Member 1's port first belongs to a process that accepts connections but
  // is slow to speak HTTP/2 (as a server under load, or one still starting).
  const int squatter = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(squatter, 0);
  {
    const int one = 1;
    ::setsockopt(squatter, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(cluster().Port(1)));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(squatter, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(squatter, 16), 0);
  }
  for (int i = 1; i <= 3; ++i) {
    early.push_back(cluster().NewClientFor(i, /*timeout_ms=*/300, /*rpc_timeout_ms=*/300));
    StatusResponse st;
    grpc::Status s = early.back()->StatusOf(cluster().Endpoint(i), &st, 300);
    EXPECT_FALSE(s.ok()) << "member " << i;
  }
  ::close(squatter);
  std::string error;
  ASSERT_TRUE(cluster().StartAll(&error)) << error;
  const auto started = Steady::now();
  // Per member: when a brand-new client first got an answer, and when the
  // early one did.
  std::vector<int64_t> fresh_ok(3, -1), early_ok(3, -1);
  std::vector<std::string> last(3);
  auto done = [&] {
    for (int i = 0; i < 3; ++i) {
      if (fresh_ok[static_cast<size_t>(i)] < 0 || early_ok[static_cast<size_t>(i)] < 0)
        return false;
    }
    return true;
  };
  while (ElapsedMs(started) < 15000 && !done()) {
    for (int i = 1; i <= 3; ++i) {
      const size_t k = static_cast<size_t>(i - 1);
      StatusResponse st;
      if (fresh_ok[k] < 0) {
        // A private channel (own subchannel pool): poking the shared
        // subchannel would hide what the early client does by itself.
        KV::Stub fresh(NewChannel(cluster().Endpoint(i)));
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 300);
        if (fresh.Status(&ctx, StatusRequest(), &st).ok()) fresh_ok[k] = ElapsedMs(started);
      }
      if (early_ok[k] < 0) {
        grpc::Status s = early[k]->StatusOf(cluster().Endpoint(i), &st, 300);
        if (s.ok()) {
          early_ok[k] = ElapsedMs(started);
        } else {
          last[k] = Code(s);
        }
      }
    }
    std::this_thread::sleep_for(Millis(20));
  }
  for (int i = 1; i <= 3; ++i) {
    const size_t k = static_cast<size_t>(i - 1);
    std::cerr << "[ info     ] member " << i << ": a new client got an answer after " << fresh_ok[k]
              << " ms, the early client after " << early_ok[k] << " ms\n";
    ASSERT_GE(fresh_ok[k], 0) << "member " << i << " never answered";
    EXPECT_GE(early_ok[k], 0) << "member " << i << ": " << last[k];
    EXPECT_LT(early_ok[k] - fresh_ok[k], kReconnectSlackMs)
        << "member " << i << ": the early client kept failing (" << last[k]
        << ") although the member was serving";
  }
}

TEST_F(Integration, NoQuorumTimesOut) {
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  const int l = static_cast<int>(leader);
  auto client = cluster().NewClient();
  ASSERT_TRUE(client->Put("before", "quorum").ok());

  // The leader survives alone: its proposals can never commit.
  for (int i = 1; i <= 3; ++i) {
    if (i != l) cluster().Kill(i);
  }
  KV::Stub kv(NewChannel(cluster().Endpoint(l)));
  auto timed_put = [&](const std::string& key, int64_t* elapsed_ms) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 500);
    PutRequest req;
    req.set_key(key);
    req.set_value("never committed");
    PutResponse resp;
    const auto start = Steady::now();
    grpc::Status s = kv.Put(&ctx, req, &resp);
    *elapsed_ms = ElapsedMs(start);
    return s;
  };
  int64_t elapsed = 0;
  grpc::Status s = timed_put("no-quorum-1", &elapsed);
  EXPECT_TRUE(s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
              s.error_code() == grpc::StatusCode::UNAVAILABLE)
      << Code(s);
  EXPECT_LT(elapsed, 1500) << "Put without quorum hung";
  std::cerr << "[ info     ] Put without quorum: " << Code(s) << " after " << elapsed << " ms\n";

  // A linearizable read cannot be confirmed either.
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 500);
    GetRequest req;
    req.set_key("before");
    GetResponse resp;
    const auto start = Steady::now();
    s = kv.Get(&ctx, req, &resp);
    elapsed = ElapsedMs(start);
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                s.error_code() == grpc::StatusCode::UNAVAILABLE)
        << Code(s);
    EXPECT_LT(elapsed, 1500) << "linearizable Get without quorum hung";
  }

  // Once it has noticed (check-quorum), it steps down; requests still end.
  std::this_thread::sleep_for(Millis(1000));
  StatusResponse st = MustStatus(cluster(), l);
  EXPECT_NE(st.role(), "leader") << "an isolated leader should step down";
  s = timed_put("no-quorum-2", &elapsed);
  EXPECT_TRUE(s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
              s.error_code() == grpc::StatusCode::UNAVAILABLE)
      << Code(s);
  EXPECT_LT(elapsed, 1500);
  // The client library gives up within its budget too.
  ClientOptions options;
  options.endpoints = cluster().Endpoints();
  options.timeout_ms = 800;
  options.rpc_timeout_ms = 300;
  KvClient short_client(options);
  const auto start = Steady::now();
  s = short_client.Put("no-quorum-3", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_LT(ElapsedMs(start), 2500) << Code(s);

  EXPECT_TRUE(cluster().IsRunning(l)) << "the survivor exited";
  // A stale read of what was committed still works on the survivor.
  std::string value;
  bool found = false;
  auto local = cluster().NewClientFor(l);
  s = local->Get("before", &value, &found, /*allow_stale=*/true);
  EXPECT_TRUE(s.ok() && found && value == "quorum") << Code(s);

  // Quorum comes back: the cluster serves again and nothing uncommitted was
  // acknowledged.
  for (int i = 1; i <= 3; ++i) {
    if (i != l) {
      ASSERT_TRUE(cluster().Restart(i));
    }
  }
  std::string error;
  ASSERT_NE(cluster().WaitForLeader(10000, &error), 0u) << error;
  s = client->Put("after", "quorum");
  EXPECT_TRUE(s.ok()) << Code(s);
  s = client->Get("before", &value, &found);
  EXPECT_TRUE(s.ok() && found && value == "quorum") << Code(s);
}

TEST_F(Integration, ConfigErrors) {
  // A scratch cluster directory: one real member for the lock check.
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(1, FastTimeoutFlags(), &leader));
  ASSERT_EQ(leader, 1u);
  const std::string dir = cluster().dir();
  const std::vector<int> ports = PickFreePorts(2);
  ASSERT_EQ(ports.size(), 2u);
  const std::string p1 = "127.0.0.1:" + std::to_string(ports[0]);
  const std::string p2 = "127.0.0.1:" + std::to_string(ports[1]);

  struct BadFile {
    std::string text;
    int line;
  };
  const std::vector<BadFile> bad_files = {
      {"1 " + p1 + "\n2 " + p2 + "\n3 not-an-address\n", 3},
      {"# comment\n\n1 " + p1 + "\nx " + p2 + "\n", 4},
      {"1 " + p1 + "\n1 " + p2 + "\n", 2},
      {"1 " + p1 + "\n2 " + p2 + "\n\n3 " + p1 + "\n", 4},  // duplicate address
      {"1 " + p1 + " extra\n", 1},
      {"1 " + p1 + "\n2 127.0.0.1:70000\n", 2},
      {"1\n", 1},
  };
  for (size_t n = 0; n < bad_files.size(); ++n) {
    const std::string file = dir + "/bad" + std::to_string(n) + ".conf";
    std::ofstream(file) << bad_files[n].text;
    RunResult r = RunToCompletion(
        ServerBinary(),
        {"--id=1", "--cluster_file=" + file, "--data_dir=" + dir + "/bad-data" + std::to_string(n),
         "--log_dir=" + dir, "--listen_address=" + p1},
        dir, 10000);
    const std::string where = file + ":" + std::to_string(bad_files[n].line) + ":";
    EXPECT_TRUE(r.exited) << "bad file " << n << " (timed out: " << r.timed_out << ")\n"
                          << r.output;
    EXPECT_NE(r.exit_code, 0) << "bad file " << n << ":\n" << bad_files[n].text;
    EXPECT_NE(r.output.find(where), std::string::npos)
        << "output should name " << where << "; got:\n"
        << r.output;
  }

  // An id that is not a member.
  const std::string good = dir + "/good.conf";
  std::ofstream(good) << "1 " << p1 << "\n2 " << p2 << "\n";
  RunResult r = RunToCompletion(ServerBinary(),
                                {"--id=7", "--cluster_file=" + good, "--data_dir=" + dir + "/id7",
                                 "--log_dir=" + dir, "--listen_address=" + p1},
                                dir, 10000);
  EXPECT_TRUE(r.exited) << r.output;
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("7"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(good), std::string::npos) << "should name the cluster file:\n"
                                                    << r.output;
  // ... set in a flag file: its line is named, and the members listed.
  const std::string id_flags = dir + "/id7.flags";
  std::ofstream(id_flags) << "# node 7\n--id=7\n--cluster_file=" << good << "\n--data_dir=" << dir
                          << "/id7\n--log_dir=" << dir << "\n";
  r = RunToCompletion(ServerBinary(), {"--flagfile=" + id_flags}, dir, 10000);
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
  EXPECT_NE(r.output.find(id_flags + ":2: --id=7 is not listed in " + good + " (its members: 1, 2"),
            std::string::npos)
      << r.output;

  // A duplicate address names both lines.
  const std::string dup = dir + "/dup.conf";
  std::ofstream(dup) << "1 " << p1 << "\n2 " << p2 << "\n3 " << p1 << "\n";
  r = RunToCompletion(ServerBinary(),
                      {"--id=1", "--cluster_file=" + dup, "--data_dir=" + dir + "/dup",
                       "--log_dir=" + dir},
                      dir, 10000);
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
  EXPECT_NE(r.output.find(dup + ":3: address " + p1 + " appears twice (also on line 1, member 1)"),
            std::string::npos)
      << r.output;

  // A flag file with a bad value, and one whose value is refused by the
  // server's own checks: both name the file and line.
  const std::string flags = dir + "/bad.flags";
  std::ofstream(flags) << "# node flags\n--id=1\n--cluster_file=" << good
                       << "\n--tick_ms=fast\n";
  r = RunToCompletion(ServerBinary(), {"--flagfile=" + flags, "--data_dir=" + dir + "/f"}, dir,
                      10000);
  EXPECT_TRUE(r.exited && r.exit_code != 0) << r.output;
  EXPECT_NE(r.output.find(flags + ":4: --tick_ms=fast: not a valid int32"), std::string::npos)
      << r.output;
  std::ofstream(flags) << "--id=1\n--cluster_file=" << good << "\n--tick_ms=0\n";
  r = RunToCompletion(ServerBinary(),
                      {"--flagfile=" + flags, "--data_dir=" + dir + "/f", "--log_dir=" + dir}, dir,
                      10000);
  EXPECT_TRUE(r.exited && r.exit_code != 0) << r.output;
  EXPECT_NE(r.output.find(flags + ":3: --tick_ms must be >= 1"), std::string::npos) << r.output;
  std::ofstream(flags) << "--id=1\n--cluster_file=" << good << "\n--server_cq_num=0\n";
  r = RunToCompletion(ServerBinary(),
                      {"--flagfile=" + flags, "--data_dir=" + dir + "/f", "--log_dir=" + dir}, dir,
                      10000);
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
  EXPECT_NE(r.output.find(flags + ":3: --server_cq_num must be >= 1, got 0"), std::string::npos)
      << r.output;
  // A lease TTL bound beyond what the clock can hold, a cluster state that
  // is neither new nor existing, a retention that is no duration, an engine
  // there is none of.
  for (const auto& [line, expected] :
       {std::pair<std::string, std::string>{"--max_lease_ttl_s=9300000000",
                                            ":3: --max_lease_ttl_s must be at most 9000000000"},
        {"--initial_cluster_state=maybe", ":3: --initial_cluster_state must be 'new' or 'existing'"},
        {"--auto_compaction_retention=5 hours", ":3: --auto_compaction_retention '5 hours' is not a duration"},
        {"--storage_engine=leveldb", ":3: --storage_engine must be 'memory' or 'rocksdb', got 'leveldb'"}}) {
    std::ofstream(flags) << "--id=1\n--cluster_file=" << good << "\n" << line << "\n";
    r = RunToCompletion(ServerBinary(), {"--flagfile=" + flags, "--data_dir=" + dir + "/f", "--log_dir=" + dir},
                        dir, 10000);
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
    EXPECT_NE(r.output.find(flags + expected), std::string::npos) << r.output;
  }

  // A missing cluster file, and a missing --data_dir.
  r = RunToCompletion(ServerBinary(),
                      {"--id=1", "--cluster_file=" + dir + "/missing.conf",
                       "--data_dir=" + dir + "/m", "--log_dir=" + dir},
                      dir, 10000);
  EXPECT_TRUE(r.exited && r.exit_code != 0) << r.output;
  EXPECT_NE(r.output.find("missing.conf: No such file or directory"), std::string::npos)
      << r.output;
  // ... named in a flag file: its line is named; a missing flag file too.
  std::ofstream(flags) << "--id=1\n--cluster_file=" << dir << "/missing.conf\n";
  r = RunToCompletion(ServerBinary(),
                      {"--flagfile=" + flags, "--data_dir=" + dir + "/m", "--log_dir=" + dir}, dir,
                      10000);
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
  EXPECT_NE(r.output.find(flags + ":2: --cluster_file: cannot open cluster file " + dir +
                          "/missing.conf: No such file or directory"),
            std::string::npos)
      << r.output;
  r = RunToCompletion(ServerBinary(), {"--flagfile=" + dir + "/missing.flags"}, dir, 10000);
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;
  EXPECT_NE(r.output.find("cannot open flag file " + dir + "/missing.flags: No such file"),
            std::string::npos)
      << r.output;
  r = RunToCompletion(ServerBinary(), {"--id=1", "--cluster_file=" + good, "--log_dir=" + dir}, dir,
                      10000);
  EXPECT_TRUE(r.exited && r.exit_code != 0) << r.output;
  EXPECT_NE(r.output.find("data_dir"), std::string::npos) << r.output;

  // A second server on a data directory in use.
  r = RunToCompletion(
      ServerBinary(),
      {"--id=1", "--cluster_file=" + cluster().cluster_file(), "--data_dir=" + cluster().DataDir(1),
       "--log_dir=" + dir, "--listen_address=" + p2},
      dir, 10000);
  EXPECT_TRUE(r.exited) << r.output;
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(Lower(r.output).find("lock"), std::string::npos)
      << "message should be about the lock:\n"
      << r.output;
  // ... and the first one is unharmed.
  EXPECT_TRUE(cluster().IsRunning(1));
  auto client = cluster().NewClient();
  grpc::Status s = client->Put("still", "serving");
  EXPECT_TRUE(s.ok()) << Code(s);
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
