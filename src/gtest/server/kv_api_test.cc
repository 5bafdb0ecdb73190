// The KV API through a real server: Range, DeleteRange, Txn, the Lease
// service (grant, keep-alive, time-to-live, expiry by the leader, revoke) and
// the Watch stream, with their errors.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <string>
#include <thread>
#include <vector>

#include "client/kv_client.h"
#include "gtest/server/server_fixture.h"
#include "node/auto_compactor.h"
#include "node/lease_keeper.h"
#include "server/api/watch_hub.h"

namespace raftkv {
namespace {

class KvApiTest : public ServerTest {
 protected:
  void SetUp() override {
    StartSingleLeader();
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    lease_ = Lease::NewStub(channel);
    watch_ = Watch::NewStub(channel);
  }
  grpc::Status Range(const RangeRequest& req, RangeResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    return kv_->Range(&ctx, req, resp);
  }
  grpc::Status Txn(const TxnRequest& req, TxnResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    return kv_->Txn(&ctx, req, resp);
  }
  grpc::Status PutLease(const std::string& k, const std::string& v, int64_t lease) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    PutRequest req;
    req.set_key(k);
    req.set_value(v);
    req.set_lease(lease);
    PutResponse resp;
    return kv_->Put(&ctx, req, &resp);
  }
  int64_t Grant(int64_t ttl) {
    grpc::ClientContext ctx;
    LeaseGrantRequest req;
    req.set_ttl(ttl);
    LeaseGrantResponse resp;
    grpc::Status s = lease_->LeaseGrant(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.id();
  }
  std::unique_ptr<Lease::Stub> lease_;
  std::unique_ptr<Watch::Stub> watch_;
};

TEST_F(KvApiTest, RangeReadsPrefixesWithRevisionsAndRefusesBadRanges) {
  PutResponse p1, p2;
  ASSERT_TRUE(Put("app/a", "1", &p1).ok());
  ASSERT_TRUE(Put("app/b", "2", &p2).ok());
  ASSERT_TRUE(Put("zzz", "3").ok());
  EXPECT_EQ(p2.revision(), p1.revision() + 1);
  RangeRequest req;
  req.set_key("app/");
  req.set_range_end("app0");
  RangeResponse resp;
  ASSERT_TRUE(Range(req, &resp).ok());
  ASSERT_EQ(resp.kvs_size(), 2);
  EXPECT_EQ(resp.kvs(1).value(), "2");
  EXPECT_EQ(resp.kvs(1).mod_revision(), p2.revision());
  EXPECT_EQ(resp.header().revision(), p2.revision() + 1);
  EXPECT_EQ(resp.header().member_id(), 1u);
  // At a past revision.
  req.set_revision(p1.revision());
  ASSERT_TRUE(Range(req, &resp).ok());
  EXPECT_EQ(resp.kvs_size(), 1);
  req.set_revision(1000);
  grpc::Status s = Range(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_CONTAINS(s.error_message(), "future revision");
  // Bad ranges.
  RangeRequest bad;
  bad.set_key("b");
  bad.set_range_end("a");
  s = Range(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_CONTAINS(s.error_message(), "is not after key");
  bad.set_key("");
  s = Range(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_CONTAINS(s.error_message(), "key must not be empty");
  // DeleteRange reports how many it deleted.
  grpc::ClientContext ctx;
  DeleteRangeRequest del;
  del.set_key("app/");
  del.set_range_end("app0");
  DeleteRangeResponse dresp;
  ASSERT_TRUE(kv_->DeleteRange(&ctx, del, &dresp).ok());
  EXPECT_EQ(dresp.deleted(), 2);
}

TEST_F(KvApiTest, TransactionsAreAtomicAndCheckedAndReadOnlyOnesAreReads) {
  ASSERT_TRUE(Put("k", "v1").ok());
  TxnRequest t;
  Compare* c = t.add_compare();
  c->set_key("k");
  c->set_target(Compare::VALUE);
  c->set_value("v1");
  t.add_success()->mutable_request_put()->set_key("k");
  t.mutable_success(0)->mutable_request_put()->set_value("v2");
  t.add_success()->mutable_request_range()->set_key("k");
  t.add_failure()->mutable_request_range()->set_key("k");
  TxnResponse resp;
  ASSERT_TRUE(Txn(t, &resp).ok());
  EXPECT_TRUE(resp.succeeded());
  EXPECT_GT(resp.index(), 0u);
  EXPECT_EQ(resp.responses(1).response_range().kvs(0).value(), "v2");
  // The same again fails (the value moved on) and runs the failure list.
  ASSERT_TRUE(Txn(t, &resp).ok());
  EXPECT_FALSE(resp.succeeded());
  EXPECT_EQ(resp.responses(0).response_range().kvs(0).value(), "v2");
  // A read-only transaction is not a log entry.
  TxnRequest r;
  r.add_success()->mutable_request_range()->set_key("k");
  ASSERT_TRUE(Txn(r, &resp).ok());
  EXPECT_EQ(resp.index(), 0u);
  EXPECT_EQ(resp.responses(0).response_range().kvs(0).value(), "v2");
  // Refused: a key put twice, an empty op, a range at a past revision.
  TxnRequest dup;
  for (int i = 0; i < 2; ++i) {
    dup.add_success()->mutable_request_put()->set_key("same");
  }
  grpc::Status s = Txn(dup, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_CONTAINS(s.error_message(), "put twice");
  TxnRequest empty_op;
  empty_op.add_failure();
  s = Txn(empty_op, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_CONTAINS(s.error_message(), "failure[0]");
  TxnRequest too_big;
  for (int i = 0; i < 9; ++i) too_big.add_compare()->set_key("k");  // the fixture allows 8
  s = Txn(too_big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_CONTAINS(s.error_message(), "--max_txn_ops");
}

// Bounds checked before anything is proposed or copied: a range or a
// read-only transaction over --max_response_bytes, a write transaction whose
// answer would exceed --max_txn_result_bytes (nothing is written, no entry
// is proposed), a compare whose value field is not the one its target names.
TEST_F(KvApiTest, AnswersOverTheirBoundsAreRefusedWithTheFlagToChange) {
  const std::string value(1000, 'v');
  for (int i = 0; i < 100; ++i) {  // ~100 KB under b/, over the fixture's 64 KiB bounds
    grpc::ClientContext ctx;
    PutRequest put;
    put.set_key("b/" + std::to_string(100 + i));
    put.set_value(value);
    PutResponse pr;
    ASSERT_TRUE(kv_->Put(&ctx, put, &pr).ok());
  }
  RangeRequest all;
  all.set_key("b/");
  all.set_range_end("b0");
  RangeResponse resp;
  grpc::Status s = Range(all, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_CONTAINS(s.error_message(), "--max_response_bytes");
  all.set_limit(20);
  ASSERT_TRUE(Range(all, &resp).ok());
  EXPECT_EQ(resp.kvs_size(), 20);
  EXPECT_EQ(resp.count(), 100);
  const int64_t revision = resp.header().revision();

  TxnRequest read;
  for (int i = 0; i < 2; ++i) *read.add_success()->mutable_request_range() = all;
  read.mutable_success(0)->mutable_request_range()->set_limit(0);
  TxnResponse tr;
  s = Txn(read, &tr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  TxnRequest write;
  write.add_success()->mutable_request_put()->set_key("written");
  *write.add_success()->mutable_request_range() = all;
  write.mutable_success(1)->mutable_request_range()->set_limit(0);
  s = Txn(write, &tr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_CONTAINS(s.error_message(), "--max_txn_result_bytes");
  ASSERT_TRUE(Range(all, &resp).ok());
  EXPECT_EQ(resp.header().revision(), revision) << "the refused transaction wrote";

  TxnRequest mismatched;
  Compare* c = mismatched.add_compare();
  c->set_key("b/100");
  c->set_target(Compare::VALUE);
  c->set_version(3);
  mismatched.add_success()->mutable_request_put()->set_key("x");
  s = Txn(mismatched, &tr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_CONTAINS(s.error_message(), "target VALUE compares value, but version is set");
}

// A grant through a session is exactly-once: retried with the same sequence
// (its outcome unknown to the client), it answers with the same lease and
// no second lease exists.
TEST_F(KvApiTest, ALeaseGrantThroughASessionIsGrantedOnce) {
  grpc::ClientContext open_ctx;
  OpenSessionResponse session;
  ASSERT_TRUE(kv_->OpenSession(&open_ctx, OpenSessionRequest(), &session).ok());
  LeaseGrantRequest req;
  req.set_ttl(60);
  req.mutable_session()->set_client_id(session.client_id());
  req.mutable_session()->set_sequence(1);
  req.mutable_session()->set_first_outstanding(1);
  LeaseGrantResponse first, retry;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(lease_->LeaseGrant(&ctx, req, &first).ok());
  }
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(lease_->LeaseGrant(&ctx, req, &retry).ok());
  }
  EXPECT_EQ(retry.id(), first.id());
  grpc::ClientContext list_ctx;
  LeaseLeasesResponse leases;
  ASSERT_TRUE(lease_->LeaseLeases(&list_ctx, LeaseLeasesRequest(), &leases).ok());
  EXPECT_EQ(leases.leases_size(), 1);
}

TEST_F(KvApiTest, LeasesExpireOnTheLeaderUnlessKeptAliveAndTheirKeysVanish) {
  // TTL bounds: 0 refused, 1 raised to the minimum (2 s).
  {
    grpc::ClientContext ctx;
    LeaseGrantRequest req;
    LeaseGrantResponse resp;
    grpc::Status s = lease_->LeaseGrant(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_CONTAINS(s.error_message(), "TTL must be > 0");
  }
  grpc::Status s = PutLease("orphan", "v", 424242);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_CONTAINS(s.error_message(), "not found");

  const int64_t kept = Grant(1);
  const int64_t dropped = Grant(2);
  ASSERT_TRUE(PutLease("kept", "v", kept).ok());
  ASSERT_TRUE(PutLease("dropped", "v", dropped).ok());
  {
    grpc::ClientContext ctx;
    LeaseTimeToLiveRequest req;
    req.set_id(kept);
    req.set_keys(true);
    LeaseTimeToLiveResponse resp;
    ASSERT_TRUE(lease_->LeaseTimeToLive(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.granted_ttl(), 2);
    EXPECT_GE(resp.ttl(), 1);
    ASSERT_EQ(resp.keys_size(), 1);
    EXPECT_EQ(resp.keys(0), "kept");
  }
  // Keep one alive for 4 s (twice its TTL); the other expires.
  grpc::ClientContext ka_ctx;
  auto stream = lease_->LeaseKeepAlive(&ka_ctx);
  const auto until = std::chrono::steady_clock::now() + 4s;
  while (std::chrono::steady_clock::now() < until) {
    LeaseKeepAliveRequest req;
    req.set_id(kept);
    ASSERT_TRUE(stream->Write(req));
    LeaseKeepAliveResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.ttl(), 2);
    std::this_thread::sleep_for(500ms);
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  GetResponse g;
  ASSERT_TRUE(Get("kept", &g).ok());
  EXPECT_TRUE(g.found());
  ASSERT_TRUE(Get("dropped", &g).ok());
  EXPECT_FALSE(g.found()) << "the expired lease's key is still there";
  // Revoke deletes at once; a second revoke is NOT_FOUND.
  grpc::ClientContext rctx;
  LeaseRevokeRequest rv;
  rv.set_id(kept);
  LeaseRevokeResponse rresp;
  ASSERT_TRUE(lease_->LeaseRevoke(&rctx, rv, &rresp).ok());
  ASSERT_TRUE(Get("kept", &g).ok());
  EXPECT_FALSE(g.found());
  grpc::ClientContext rctx2;
  EXPECT_EQ(lease_->LeaseRevoke(&rctx2, rv, &rresp).error_code(), grpc::StatusCode::NOT_FOUND);
}

// The leader compacts the history by itself (revision mode, checked often
// here): through the current revision minus the retention, as a replicated
// COMPACT.
TEST_F(KvApiTest, TheLeaderCompactsTheHistoryByItself) {
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(Put("auto/" + std::to_string(i % 3), "v").ok());
  const KvStateMachine& sm = node_->state_machine();
  const int64_t revision = sm.Revision();
  ASSERT_EQ(sm.CompactRevision(), 0);
  AutoCompactionOptions o;
  ASSERT_TRUE(ParseAutoCompaction("revision", "10", &o).ok());
  o.revision_check_ms = 20;
  AutoCompactor compactor(o, node_.get());
  compactor.Start();
  ASSERT_TRUE(WaitFor([&] { return sm.CompactRevision() == revision - 10; }, 10s))
      << "compact revision " << sm.CompactRevision() << ", store at " << revision;
  ASSERT_TRUE(WaitFor([&] { return compactor.compactions() == 1; }, 10s));
  // Reads before it are refused, as after etcd's Compact.
  RangeRequest at;
  at.set_key("auto/0");
  at.set_revision(revision - 11);
  RangeResponse resp;
  EXPECT_EQ(sm.Range(at, &resp).reason(), Status::Reason::kCompacted);
  ASSERT_TRUE(Put("auto/0", "w").ok());
  ASSERT_TRUE(WaitFor([&] { return sm.CompactRevision() == revision - 9; }, 10s));
  compactor.Stop();
}

// The leader's lease clock (a keeper of its own that never revokes, so the
// test decides): no renewal of a lease past its deadline or with a revoke in
// flight, and a lease revoked and granted again under its id gets a clock of
// its own instead of the old one's deadline.
TEST_F(KvApiTest, TheLeaseClockRenewsNeitherExpiredNorRevokingLeasesNorInheritsDeadlines) {
  // The server's own clock is stopped: nothing revokes behind the test's back.
  const_cast<LeaseKeeper&>(server_->lease_keeper()).Stop();
  LeaseOptions o;
  o.check_interval_ms = 1 << 30;
  LeaseKeeper keeper(o, node_.get());
  const int64_t expiring = Grant(2);
  int64_t ttl = -1;
  keeper.Renew(expiring, &ttl);
  EXPECT_EQ(ttl, 2);
  std::this_thread::sleep_for(2100ms);
  keeper.Renew(expiring, &ttl);
  EXPECT_EQ(ttl, 0) << "a lease past its deadline was renewed";

  const int64_t revoking = Grant(30);
  keeper.BeginRevoke(revoking);
  keeper.Renew(revoking, &ttl);
  EXPECT_EQ(ttl, 0) << "a lease being revoked was renewed";
  keeper.EndRevoke(revoking);
  keeper.Renew(revoking, &ttl);
  EXPECT_EQ(ttl, 30);

  // Revoke the expired lease and grant its id again with a long TTL.
  {
    grpc::ClientContext ctx;
    LeaseRevokeRequest rv;
    rv.set_id(expiring);
    LeaseRevokeResponse resp;
    ASSERT_TRUE(lease_->LeaseRevoke(&ctx, rv, &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    LeaseGrantRequest g;
    g.set_id(expiring);
    g.set_ttl(60);
    LeaseGrantResponse resp;
    ASSERT_TRUE(lease_->LeaseGrant(&ctx, g, &resp).ok());
  }
  int64_t remaining = 0, granted = 0;
  keeper.Remaining(expiring, &remaining, &granted, nullptr);
  EXPECT_EQ(granted, 60);
  EXPECT_GE(remaining, 59) << "the new grant inherited the old grant's deadline";
  keeper.Renew(expiring, &ttl);
  EXPECT_EQ(ttl, 60);
}

TEST_F(KvApiTest, AWatchDeliversEveryChangeOfItsPrefixInOrderFromItsStartRevision) {
  PutResponse first;
  ASSERT_TRUE(Put("w/0", "before", &first).ok());
  grpc::ClientContext ctx;
  WatchRequest req;
  req.set_key("w/");
  req.set_range_end("w0");
  req.set_start_revision(first.revision());
  req.set_prev_kv(true);
  auto stream = watch_->Watch(&ctx, req);
  WatchResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_TRUE(resp.created());
  std::thread writer([&] {
    for (int i = 1; i <= 50; ++i) ASSERT_TRUE(Put("w/" + std::to_string(i % 5), std::to_string(i)).ok());
    ASSERT_TRUE(Put("other", "x").ok());
    DeleteResponse d;
    ASSERT_TRUE(Delete("w/0", &d).ok());
  });
  std::vector<Event> events;
  while (events.size() < 52 && stream->Read(&resp)) {
    for (const Event& e : resp.events()) events.push_back(e);
  }
  writer.join();
  ASSERT_EQ(events.size(), 52u);
  EXPECT_EQ(events[0].kv().value(), "before");
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GT(events[i].kv().mod_revision(), events[i - 1].kv().mod_revision());
    EXPECT_NE(events[i].kv().key(), "other");
  }
  EXPECT_EQ(events[1].kv().value(), "1");
  EXPECT_EQ(events.back().type(), Event::DELETE);
  EXPECT_EQ(events.back().prev_kv().value(), "50");
  ctx.TryCancel();
  stream->Finish();
  // A watch from before the history: OUT_OF_RANGE is only possible once the
  // window moved, which the state-machine and hub tests cover; a bad range:
  grpc::ClientContext bad_ctx;
  WatchRequest bad;
  bad.set_key("b");
  bad.set_range_end("a");
  auto bad_stream = watch_->Watch(&bad_ctx, bad);
  EXPECT_FALSE(bad_stream->Read(&resp));
  grpc::Status s = bad_stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// The hub alone, with a sink that never finishes sending: the watcher stays
// behind in the history (no buffering) and is ended once the window passes
// the revision it needs.
class StuckSink : public WatchSink {
 public:
  void Send(WatchResponse) override { ++sent; }
  void End(const grpc::Status& status, int64_t compact_revision) override {
    std::lock_guard<std::mutex> lock(mu);
    ended = status;
    compact = compact_revision;
  }
  void Cut(const grpc::Status& status) override {
    std::lock_guard<std::mutex> lock(mu);
    ended = status;
    cut = true;
  }
  std::atomic<int> sent{0};
  std::mutex mu;
  std::optional<grpc::Status> ended;
  int64_t compact = 0;
  bool cut = false;
};

// Applies a committed Put of key=value at log index `index`, as the apply thread would.
void ApplyPut(KvStateMachine* sm, uint64_t index, const std::string& key,
              const std::string& value) {
  Entry e;
  e.set_index(index);
  e.set_type(ENTRY_COMMAND);
  e.set_data(testing_util::PutCommand(key, value));
  sm->Apply(e);
}

TEST(WatchHubTest, AWatcherThatCannotKeepUpIsEndedWithTheOldestRevisionKept) {
  KvStateMachine sm;
  sm.SetHistoryLimits(10, 1 << 20);
  WatchHub hub(WatchOptions{}, &sm, 1);
  hub.Start();
  StuckSink sink;
  WatchRequest req;
  req.set_key("k");
  ASSERT_TRUE(hub.Add(hub.NewId(), req, &sink, "ipv4:10.0.0.1").ok());
  ASSERT_TRUE(testing_util::WaitFor([&] { return sink.sent.load() == 1; }));  // created
  for (int i = 0; i < 30; ++i) {
    ApplyPut(&sm, i + 1, "k", std::to_string(i));
    hub.Notify();
  }
  ASSERT_EQ(sink.sent.load(), 1) << "sent while the previous response was in flight";
  hub.SendDone(1);
  ASSERT_TRUE(testing_util::WaitFor([&] {
    std::lock_guard<std::mutex> lock(sink.mu);
    return sink.ended.has_value();
  }));
  EXPECT_EQ(sink.ended->error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_CONTAINS(sink.ended->error_message(), "fell behind");
  EXPECT_EQ(sink.compact, 21);
  EXPECT_EQ(hub.size(), 0u);
  // Too many watchers.
  WatchOptions one;
  one.max_watchers = 1;
  WatchHub small(one, &sm, 1);
  StuckSink a, b;
  ASSERT_TRUE(small.Add(small.NewId(), req, &a, "ipv4:10.0.0.1").ok());
  EXPECT_EQ(small.Add(small.NewId(), req, &b, "ipv4:10.0.0.2").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  hub.Stop();
  small.Stop();
}

// With no watcher the hub's thread is not woken by the store's progress (the
// apply thread notifies once per batch on every member); a watcher added
// afterwards still gets the revisions it asks for, read from the history.
TEST(WatchHubTest, TheStoreAdvancingWakesNoThreadWhenNobodyWatches) {
  KvStateMachine sm;
  WatchHub hub(WatchOptions{}, &sm, 1);
  hub.Start();
  for (uint64_t index = 1; index <= 20; ++index) {
    ApplyPut(&sm, index, "k", std::to_string(index));
    hub.Notify();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(hub.pump_passes(), 0u) << "the watch thread woke for a store nobody watches";
  StuckSink sink;
  WatchRequest req;
  req.set_key("k");
  req.set_start_revision(5);
  const uint64_t id = hub.NewId();
  ASSERT_TRUE(hub.Add(id, req, &sink, "ipv4:10.0.0.1").ok());
  ASSERT_TRUE(testing_util::WaitFor([&] { return sink.sent.load() == 1; }));  // created
  hub.SendDone(id);
  ASSERT_TRUE(testing_util::WaitFor([&] { return sink.sent.load() == 2; }))
      << "the events from revision 5 were not sent";
  EXPECT_GE(hub.pump_passes(), 2u);
  hub.Stop();
}

// One client address cannot take every slot: past its own limit it is
// refused while others still get theirs, and a removed watcher frees its slot.
TEST(WatchHubTest, OneClientCannotTakeEveryWatcherSlot) {
  KvStateMachine sm;
  WatchOptions o;
  o.max_watchers = 10;
  o.max_watchers_per_client = 3;
  WatchHub hub(o, &sm, 1);
  WatchRequest req;
  req.set_key("k");
  std::vector<std::unique_ptr<StuckSink>> sinks;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_unique<StuckSink>());
    ids.push_back(hub.NewId());
    ASSERT_TRUE(hub.Add(ids.back(), req, sinks.back().get(), "ipv4:10.0.0.9").ok());
  }
  StuckSink extra, other;
  const grpc::Status refused = hub.Add(hub.NewId(), req, &extra, "ipv4:10.0.0.9");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_CONTAINS(refused.error_message(), "--max_watchers_per_client");
  EXPECT_TRUE(hub.Add(hub.NewId(), req, &other, "ipv4:10.0.0.10").ok());
  hub.Remove(ids[0]);
  EXPECT_TRUE(hub.Add(hub.NewId(), req, &extra, "ipv4:10.0.0.9").ok());
  hub.Stop();
}

// A watcher whose client stops taking its responses is cut off with
// RESOURCE_EXHAUSTED once a response waited for the stall bound.
TEST(WatchHubTest, AWatcherWhoseClientStopsReadingIsCutOff) {
  KvStateMachine sm;
  WatchOptions o;
  o.stall_timeout_ms = 200;
  WatchHub hub(o, &sm, 1);
  hub.Start();
  StuckSink sink;
  WatchRequest req;
  req.set_key("k");
  ASSERT_TRUE(hub.Add(hub.NewId(), req, &sink, "ipv4:10.0.0.1").ok());
  ASSERT_TRUE(testing_util::WaitFor([&] { return sink.sent.load() == 1; }));  // never SendDone
  ASSERT_TRUE(testing_util::WaitFor([&] {
    std::lock_guard<std::mutex> lock(sink.mu);
    return sink.ended.has_value();
  }));
  {
    std::lock_guard<std::mutex> lock(sink.mu);
    EXPECT_TRUE(sink.cut);
    EXPECT_EQ(sink.ended->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_CONTAINS(sink.ended->error_message(), "--watch_stall_timeout_ms");
  }
  EXPECT_EQ(hub.size(), 0u);
  EXPECT_EQ(hub.stalled(), 1u);
  hub.Stop();
}

// A member that hears from no leader ends its watchers with UNAVAILABLE and
// refuses new ones until it hears from one again.
TEST(WatchHubTest, ALeaderlessMemberEndsItsWatchersAndRefusesNewOnes) {
  KvStateMachine sm;
  WatchHub hub(WatchOptions{}, &sm, 7);
  hub.Start();
  StuckSink before, during, after;
  WatchRequest req;
  req.set_key("k");
  ASSERT_TRUE(hub.Add(hub.NewId(), req, &before, "ipv4:10.0.0.1").ok());
  hub.SetLeaderless(true, 1200);
  {
    std::lock_guard<std::mutex> lock(before.mu);
    ASSERT_TRUE(before.ended.has_value());
    EXPECT_EQ(before.ended->error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_CONTAINS(before.ended->error_message(), "member 7 has heard from no leader for 1200 ms");
  }
  EXPECT_EQ(hub.size(), 0u);
  const grpc::Status refused = hub.Add(hub.NewId(), req, &during, "ipv4:10.0.0.1");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_CONTAINS(refused.error_message(), "another member");
  hub.SetLeaderless(false, 0);
  EXPECT_TRUE(hub.Add(hub.NewId(), req, &after, "ipv4:10.0.0.1").ok());
  EXPECT_EQ(hub.size(), 1u);
  hub.Stop();
}

// KvClient::Watch from a revision below every member's history: a dead
// endpoint in the list does not keep it retrying (an OUT_OF_RANGE stream is
// no progress), and the watch ends with the members' OUT_OF_RANGE, at once
// when every endpoint answered it, else when the window ends.
class KvClientWatchTest : public ServerTest {};

TEST_F(KvClientWatchTest, FromBeforeEveryMembersHistoryEndsOutOfRange) {
  Setup setup;
  setup.history_revisions = 10;
  StartSingleLeader(setup);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(Put("k", std::to_string(i)).ok());
  WatchRequest req;
  req.set_key("k");
  req.set_start_revision(1);
  for (bool with_dead_endpoint : {false, true}) {
    ClientOptions options;
    options.endpoints = {address_};
    if (with_dead_endpoint) options.endpoints.push_back("127.0.0.1:1");
    options.timeout_ms = 1500;
    KvClient client(options);
    int answers = 0;
    const auto start = std::chrono::steady_clock::now();
    const grpc::Status s = client.Watch(req, [&](const WatchResponse&) {
      ++answers;
      return true;
    });
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE)
        << with_dead_endpoint << ": " << StatusText(s);
    EXPECT_CONTAINS(s.error_message(), "compacted");
    EXPECT_LT(took, with_dead_endpoint ? 10s : 1s) << with_dead_endpoint;
    EXPECT_LE(answers, 1) << "only the created answer may be delivered";
  }
}

}  // namespace
}  // namespace raftkv
