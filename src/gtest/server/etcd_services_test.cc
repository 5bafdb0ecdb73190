// etcd's Watch, Lease, Cluster, Maintenance and Auth services
// (server/etcd/) through etcd's own messages, on a one-member cluster:
// several watches on one stream, filters, cancel, progress, a compacted
// start; leases granted, kept alive, listed and revoked; the status and
// member list etcd's tools read.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/common/service_test_util.h"
#include "gtest/server/server_fixture.h"
#include "proto/etcd.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
namespace pb = etcdserverpb;
using WatchStream = grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>;

class EtcdServicesTest : public ServerTest {
 protected:
  void Start(Setup setup = Setup()) {
    StartSingleLeader(setup);
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    kv_etcd_ = pb::KV::NewStub(channel);
    watch_ = pb::Watch::NewStub(channel);
    lease_ = pb::Lease::NewStub(channel);
    cluster_ = pb::Cluster::NewStub(channel);
    maintenance_ = pb::Maintenance::NewStub(channel);
    auth_ = pb::Auth::NewStub(channel);
  }
  int64_t Put(const std::string& key, const std::string& value, int64_t lease = 0) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    req.set_lease(lease);
    pb::PutResponse resp;
    grpc::Status s = kv_etcd_->Put(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.header().revision();
  }
  int64_t Delete(const std::string& key) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::DeleteRangeRequest req;
    req.set_key(key);
    pb::DeleteRangeResponse resp;
    EXPECT_TRUE(kv_etcd_->DeleteRange(&ctx, req, &resp).ok());
    return resp.header().revision();
  }
  grpc::Status Compact(int64_t revision) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::CompactionRequest req;
    req.set_revision(revision);
    pb::CompactionResponse resp;
    return kv_etcd_->Compact(&ctx, req, &resp);
  }
  static void Create(WatchStream* stream, const std::string& key, const std::string& end, int64_t start,
                     int64_t watch_id = 0, bool no_put = false) {
    pb::WatchRequest req;
    pb::WatchCreateRequest* c = req.mutable_create_request();
    c->set_key(key);
    c->set_range_end(end);
    c->set_start_revision(start);
    c->set_watch_id(watch_id);
    if (no_put) c->add_filters(pb::WatchCreateRequest::NOPUT);
    ASSERT_TRUE(stream->Write(req));
  }
  static pb::WatchResponse Next(WatchStream* stream) {
    pb::WatchResponse resp;
    EXPECT_TRUE(stream->Read(&resp)) << "the watch stream ended";
    return resp;
  }
  std::unique_ptr<pb::KV::Stub> kv_etcd_;
  std::unique_ptr<pb::Watch::Stub> watch_;
  std::unique_ptr<pb::Lease::Stub> lease_;
  std::unique_ptr<pb::Cluster::Stub> cluster_;
  std::unique_ptr<pb::Maintenance::Stub> maintenance_;
  std::unique_ptr<pb::Auth::Stub> auth_;
};

TEST_F(EtcdServicesTest, SeveralWatchesShareOneStream) {
  Start();
  const int64_t first = Put("a", "0");
  grpc::ClientContext ctx;
  ctx.set_deadline(In(20s));
  std::unique_ptr<WatchStream> stream = watch_->Watch(&ctx);
  Create(stream.get(), "a", "", 0);  // id chosen by the server: 0
  pb::WatchResponse r = Next(stream.get());
  EXPECT_TRUE(r.created());
  EXPECT_EQ(r.watch_id(), 0);
  EXPECT_EQ(r.header().revision(), first);
  EXPECT_EQ(r.header().member_id(), 1u);
  Create(stream.get(), "b", "c", 0);  // the prefix "b": id 1
  r = Next(stream.get());
  EXPECT_TRUE(r.created());
  EXPECT_EQ(r.watch_id(), 1);
  Create(stream.get(), "b", "c", 0, /*watch_id=*/7, /*no_put=*/true);  // chosen by the client
  r = Next(stream.get());
  EXPECT_TRUE(r.created());
  EXPECT_EQ(r.watch_id(), 7);
  Create(stream.get(), "x", "", 0, /*watch_id=*/7);  // taken
  r = Next(stream.get());
  EXPECT_TRUE(r.created());
  EXPECT_TRUE(r.canceled());
  EXPECT_EQ(r.watch_id(), -1);
  EXPECT_NE(r.cancel_reason().find("duplicate watch ID"), std::string::npos) << r.cancel_reason();

  const int64_t put_a = Put("a", "1");
  const int64_t put_b = Put("b1", "2");
  const int64_t del_b = Delete("b1");
  // Each watch sees its own range, in order; watch 7 no puts.
  std::map<int64_t, std::vector<std::pair<int, int64_t>>> seen;  // id -> (type, revision)
  while (seen[0].size() + seen[1].size() + seen[7].size() < 4) {
    r = Next(stream.get());
    ASSERT_FALSE(r.canceled()) << r.cancel_reason();
    for (const mvccpb::Event& e : r.events()) seen[r.watch_id()].emplace_back(e.type(), e.kv().mod_revision());
  }
  using E = std::vector<std::pair<int, int64_t>>;
  EXPECT_EQ(seen[0], (E{{mvccpb::Event::PUT, put_a}}));
  EXPECT_EQ(seen[1], (E{{mvccpb::Event::PUT, put_b}, {mvccpb::Event::DELETE, del_b}}));
  EXPECT_EQ(seen[7], (E{{mvccpb::Event::DELETE, del_b}}));

  pb::WatchRequest cancel;
  cancel.mutable_cancel_request()->set_watch_id(1);
  ASSERT_TRUE(stream->Write(cancel));
  r = Next(stream.get());
  EXPECT_TRUE(r.canceled());
  EXPECT_EQ(r.watch_id(), 1);
  // Every watch is up to date: a progress answer at the store's revision.
  pb::WatchRequest progress;
  progress.mutable_progress_request();
  ASSERT_TRUE(stream->Write(progress));
  r = Next(stream.get());
  EXPECT_EQ(r.watch_id(), -1);
  EXPECT_EQ(r.events_size(), 0);
  EXPECT_EQ(r.header().revision(), del_b);
  // The cancelled watch hears nothing more; the others go on.
  Put("b2", "3");
  const int64_t last = Put("a", "4");
  r = Next(stream.get());
  EXPECT_EQ(r.watch_id(), 0);
  ASSERT_EQ(r.events_size(), 1);
  EXPECT_EQ(r.events(0).kv().mod_revision(), last);
  ctx.TryCancel();
}

TEST_F(EtcdServicesTest, AWatchFromACompactedRevisionIsCancelledWithTheCompactRevision) {
  Setup setup;
  setup.history_revisions = 5;
  Start(setup);
  for (int i = 0; i < 30; ++i) Put("k", std::to_string(i));
  grpc::ClientContext ctx;
  ctx.set_deadline(In(20s));
  std::unique_ptr<WatchStream> stream = watch_->Watch(&ctx);
  Create(stream.get(), "k", "", 1);
  pb::WatchResponse r = Next(stream.get());
  EXPECT_TRUE(r.created());
  r = Next(stream.get());
  EXPECT_TRUE(r.canceled());
  EXPECT_EQ(r.watch_id(), 0);
  EXPECT_GT(r.compact_revision(), 1);
  // The stream lives on: a watch from the compact revision works.
  Create(stream.get(), "k", "", r.compact_revision());
  r = Next(stream.get());
  EXPECT_TRUE(r.created());
  r = Next(stream.get());
  EXPECT_FALSE(r.canceled()) << r.cancel_reason();
  EXPECT_GT(r.events_size(), 0);
  ctx.TryCancel();
}

TEST_F(EtcdServicesTest, AnIdleWatchAskingForProgressGetsNotices) {
  Setup setup;
  setup.watch_progress_notify_interval_ms = 100;
  Start(setup);
  const int64_t rev = Put("p", "1");
  grpc::ClientContext ctx;
  ctx.set_deadline(In(20s));
  std::unique_ptr<WatchStream> stream = watch_->Watch(&ctx);
  pb::WatchRequest req;
  req.mutable_create_request()->set_key("p");
  req.mutable_create_request()->set_progress_notify(true);
  ASSERT_TRUE(stream->Write(req));
  EXPECT_TRUE(Next(stream.get()).created());
  pb::WatchResponse r = Next(stream.get());  // nothing changes: a notice
  EXPECT_FALSE(r.created());
  EXPECT_FALSE(r.canceled());
  EXPECT_EQ(r.events_size(), 0);
  EXPECT_EQ(r.watch_id(), 0);
  EXPECT_EQ(r.header().revision(), rev);
  ctx.TryCancel();
}

TEST_F(EtcdServicesTest, LeasesGrantedKeptAliveListedAndRevoked) {
  Start();
  grpc::ClientContext g;
  pb::LeaseGrantRequest grant;
  grant.set_ttl(30);
  pb::LeaseGrantResponse granted;
  ASSERT_TRUE(lease_->LeaseGrant(&g, grant, &granted).ok());
  EXPECT_GT(granted.id(), 0);
  EXPECT_EQ(granted.ttl(), 30);
  EXPECT_EQ(granted.header().member_id(), 1u);
  Put("leased", "v", granted.id());

  grpc::ClientContext k;
  k.set_deadline(In(10s));
  auto keep = lease_->LeaseKeepAlive(&k);
  pb::LeaseKeepAliveRequest ka;
  ka.set_id(granted.id());
  ASSERT_TRUE(keep->Write(ka));
  pb::LeaseKeepAliveResponse kept;
  ASSERT_TRUE(keep->Read(&kept));
  EXPECT_EQ(kept.id(), granted.id());
  EXPECT_EQ(kept.ttl(), 30);
  EXPECT_EQ(kept.header().member_id(), 1u);
  ka.set_id(granted.id() + 1000);  // no such lease: TTL 0, as etcd
  ASSERT_TRUE(keep->Write(ka));
  ASSERT_TRUE(keep->Read(&kept));
  EXPECT_EQ(kept.ttl(), 0);
  keep->WritesDone();
  EXPECT_TRUE(keep->Finish().ok());

  grpc::ClientContext t;
  pb::LeaseTimeToLiveRequest ttl;
  ttl.set_id(granted.id());
  ttl.set_keys(true);
  pb::LeaseTimeToLiveResponse left;
  ASSERT_TRUE(lease_->LeaseTimeToLive(&t, ttl, &left).ok());
  EXPECT_EQ(left.grantedttl(), 30);
  EXPECT_GT(left.ttl(), 0);
  ASSERT_EQ(left.keys_size(), 1);
  EXPECT_EQ(left.keys(0), "leased");

  grpc::ClientContext l;
  pb::LeaseLeasesResponse leases;
  ASSERT_TRUE(lease_->LeaseLeases(&l, pb::LeaseLeasesRequest(), &leases).ok());
  ASSERT_EQ(leases.leases_size(), 1);
  EXPECT_EQ(leases.leases(0).id(), granted.id());

  grpc::ClientContext r;
  pb::LeaseRevokeRequest revoke;
  revoke.set_id(granted.id());
  pb::LeaseRevokeResponse revoked;
  ASSERT_TRUE(lease_->LeaseRevoke(&r, revoke, &revoked).ok());
  grpc::ClientContext get;
  pb::RangeRequest range;
  range.set_key("leased");
  pb::RangeResponse got;
  ASSERT_TRUE(kv_etcd_->Range(&get, range, &got).ok());
  EXPECT_EQ(got.kvs_size(), 0) << "the revoked lease's key is gone";
  EXPECT_EQ(got.header().revision(), revoked.header().revision());

  grpc::ClientContext t2;
  ASSERT_TRUE(lease_->LeaseTimeToLive(&t2, ttl, &left).ok());
  EXPECT_EQ(left.ttl(), -1) << "a lease that does not exist, as etcd";
}

TEST_F(EtcdServicesTest, StatusMembersAndAuthAsEtcdToolsReadThem) {
  Start();
  const int64_t rev = Put("s", "1");
  grpc::ClientContext s;
  pb::StatusResponse st;
  ASSERT_TRUE(maintenance_->Status(&s, pb::StatusRequest(), &st).ok());
  EXPECT_EQ(st.header().member_id(), 1u);
  EXPECT_NE(st.header().cluster_id(), 0u);
  EXPECT_EQ(st.leader(), 1u);
  EXPECT_EQ(st.header().revision(), rev);
  EXPECT_GT(st.raftterm(), 0u);
  EXPECT_GE(st.raftindex(), st.raftappliedindex() > 0 ? 1u : 0u);
  EXPECT_FALSE(st.version().empty());
  EXPECT_FALSE(st.islearner());
  EXPECT_EQ(st.errors_size(), 0);

  grpc::ClientContext m;
  pb::MemberListResponse members;
  ASSERT_TRUE(cluster_->MemberList(&m, pb::MemberListRequest(), &members).ok());
  ASSERT_EQ(members.members_size(), 1);
  EXPECT_EQ(members.header().cluster_id(), st.header().cluster_id());
  EXPECT_EQ(members.members(0).id(), 1u);
  ASSERT_EQ(members.members(0).clienturls_size(), 1);
  EXPECT_EQ(members.members(0).clienturls(0), "http://" + std::string(kSelfAddress));

  grpc::ClientContext a;
  pb::AuthStatusResponse auth;
  ASSERT_TRUE(auth_->AuthStatus(&a, pb::AuthStatusRequest(), &auth).ok());
  EXPECT_FALSE(auth.enabled());
  grpc::ClientContext a2;
  pb::AuthenticateRequest login;
  login.set_name("root");
  login.set_password("pw");
  pb::AuthenticateResponse token;
  grpc::Status refused = auth_->Authenticate(&a2, login, &token);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(refused.error_message(), "etcdserver: authentication is not enabled");

  // What is not served answers at once, not when the deadline passes.
  grpc::ClientContext d;
  d.set_deadline(In(10s));
  pb::DowngradeResponse downgrade;
  EXPECT_EQ(maintenance_->Downgrade(&d, pb::DowngradeRequest(), &downgrade).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

// Hash is HashKV at the store's revision.
TEST_F(EtcdServicesTest, HashIsTheHashOfEveryKeyNow) {
  Start();
  Put("h1", "a");
  pb::HashResponse before, after;
  grpc::ClientContext c1;
  ASSERT_TRUE(maintenance_->Hash(&c1, pb::HashRequest(), &before).ok());
  grpc::ClientContext c2;
  pb::HashKVResponse kv;
  ASSERT_TRUE(maintenance_->HashKV(&c2, pb::HashKVRequest(), &kv).ok());
  EXPECT_EQ(before.hash(), kv.hash());
  Put("h1", "b");
  grpc::ClientContext c3;
  ASSERT_TRUE(maintenance_->Hash(&c3, pb::HashRequest(), &after).ok());
  EXPECT_NE(before.hash(), after.hash());
}

// etcd's member changes, with etcd's errors where its clients match them:
// a learner added (the next id), refused promotion while it is not running,
// its URL updated, removed; a taken URL, an unknown id and bad URLs refused.
TEST_F(EtcdServicesTest, MembersAreAddedUpdatedAndRemovedAsEtcdDoes) {
  Start();
  auto add = [&](const std::vector<std::string>& urls, bool learner, pb::MemberAddResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::MemberAddRequest req;
    for (const std::string& u : urls) req.add_peerurls(u);
    req.set_islearner(learner);
    return cluster_->MemberAdd(&ctx, req, resp);
  };
  pb::MemberAddResponse added;
  grpc::Status s = add({"http://127.0.0.1:1"}, true, &added);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(added.member().id(), 2u);
  EXPECT_TRUE(added.member().islearner());
  ASSERT_EQ(added.members_size(), 2);
  EXPECT_EQ(added.members(1).peerurls(0), "http://127.0.0.1:1");
  pb::MemberAddResponse refused;
  s = add({"http://127.0.0.1:1"}, true, &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "etcdserver: Peer URLs already exists");
  s = add({"127.0.0.1:2"}, true, &refused);
  EXPECT_EQ(s.error_message(), "etcdserver: given member URLs are invalid");
  s = add({"http://127.0.0.1:2", "http://127.0.0.1:3"}, true, &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext p;
  p.set_deadline(In(10s));
  pb::MemberPromoteRequest promote;
  promote.set_id(2);
  pb::MemberPromoteResponse promoted;
  s = cluster_->MemberPromote(&p, promote, &promoted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "etcdserver: can only promote a learner member which is in sync with leader");
  grpc::ClientContext p1;
  promote.set_id(1);
  s = cluster_->MemberPromote(&p1, promote, &promoted);
  EXPECT_EQ(s.error_message(), "etcdserver: can only promote a learner member");

  auto update = [&](uint64_t id, const std::string& url) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::MemberUpdateRequest req;
    req.set_id(id);
    req.add_peerurls(url);
    pb::MemberUpdateResponse resp;
    grpc::Status st = cluster_->MemberUpdate(&ctx, req, &resp);
    if (st.ok()) {
      EXPECT_EQ(resp.members_size(), 2);
      EXPECT_EQ(resp.members(1).peerurls(0), "http://127.0.0.1:4");
    }
    return st;
  };
  s = update(2, "http://127.0.0.1:4");
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = update(9, "http://127.0.0.1:5");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "etcdserver: member not found");
  s = update(2, "http://" + std::string(kSelfAddress));
  EXPECT_EQ(s.error_message(), "etcdserver: Peer URLs already exists");

  auto remove = [&](uint64_t id, pb::MemberRemoveResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::MemberRemoveRequest req;
    req.set_id(id);
    return cluster_->MemberRemove(&ctx, req, resp);
  };
  pb::MemberRemoveResponse removed;
  s = remove(2, &removed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(removed.members_size(), 1);
  EXPECT_EQ(removed.members(0).id(), 1u);
  s = remove(2, &removed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "etcdserver: member not found");
}

TEST_F(EtcdServicesTest, HashKvFollowsTheStateAtARevision) {
  Start();
  auto hash_at = [&](int64_t revision, pb::HashKVResponse* resp) {
    grpc::ClientContext ctx;
    pb::HashKVRequest req;
    req.set_revision(revision);
    return maintenance_->HashKV(&ctx, req, resp);
  };
  const int64_t r1 = Put("h1", "a");
  Put("h2", "b");
  pb::HashKVResponse at_r1, now, again;
  ASSERT_TRUE(hash_at(r1, &at_r1).ok());
  ASSERT_TRUE(hash_at(0, &now).ok());
  EXPECT_EQ(at_r1.hash_revision(), r1);
  EXPECT_NE(at_r1.hash(), now.hash());
  const int64_t r3 = Put("h2", "c");
  ASSERT_TRUE(hash_at(r1, &again).ok());
  EXPECT_EQ(again.hash(), at_r1.hash()) << "the state at a past revision does not change";
  ASSERT_TRUE(hash_at(r3, &again).ok());
  EXPECT_NE(again.hash(), now.hash());
  grpc::Status future = hash_at(r3 + 10, &again);
  EXPECT_EQ(future.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(future.error_message(), "etcdserver: mvcc: required revision is a future revision");
}

// etcd's STM reads every key at its first read's revision, in a
// transaction without writes; one that writes may not read the past.
TEST_F(EtcdServicesTest, ATransactionWithoutWritesReadsAtAPastRevision) {
  Start();
  const int64_t old = Put("stm", "old");
  Put("stm", "new");
  pb::TxnRequest txn;
  pb::RangeRequest* get = txn.add_success()->mutable_request_range();
  get->set_key("stm");
  get->set_revision(old);
  get->set_serializable(true);
  pb::TxnResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = kv_etcd_->Txn(&ctx, txn, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(resp.responses_size(), 1);
  ASSERT_EQ(resp.responses(0).response_range().kvs_size(), 1);
  EXPECT_EQ(resp.responses(0).response_range().kvs(0).value(), "old");
  pb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key("other");
  put->set_value("v");
  grpc::ClientContext ctx;
  grpc::Status s = kv_etcd_->Txn(&ctx, txn, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("past revision"), std::string::npos) << s.error_message();
}

TEST_F(EtcdServicesTest, CompactDropsTheHistoryAsEtcdDoes) {
  Start();
  const int64_t r1 = Put("c", "1");
  const int64_t r2 = Put("c", "2");
  const int64_t r3 = Put("c", "3");
  auto compact = [&](int64_t revision) { return Compact(revision); };
  auto read_at = [&](int64_t revision, std::string* value) {
    grpc::ClientContext ctx;
    pb::RangeRequest req;
    req.set_key("c");
    req.set_revision(revision);
    pb::RangeResponse resp;
    grpc::Status s = kv_etcd_->Range(&ctx, req, &resp);
    if (s.ok() && resp.kvs_size() == 1) *value = resp.kvs(0).value();
    return s;
  };
  grpc::Status s = compact(r3 + 5);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(s.error_message(), "etcdserver: mvcc: required revision is a future revision");
  ASSERT_TRUE(compact(r2).ok());
  std::string value;
  ASSERT_TRUE(read_at(r2, &value).ok());
  EXPECT_EQ(value, "2");
  s = read_at(r1, &value);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(s.error_message(), "etcdserver: mvcc: required revision has been compacted");
  s = compact(r2);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(s.error_message(), "etcdserver: mvcc: required revision has been compacted");
  // A watch from before the compaction is cancelled with where to resume:
  // the compact revision itself, whose events are kept (as etcd).
  grpc::ClientContext ctx;
  ctx.set_deadline(In(20s));
  std::unique_ptr<WatchStream> stream = watch_->Watch(&ctx);
  Create(stream.get(), "c", "", r1);
  EXPECT_TRUE(Next(stream.get()).created());
  pb::WatchResponse r = Next(stream.get());
  EXPECT_TRUE(r.canceled());
  EXPECT_EQ(r.compact_revision(), r2);
  Create(stream.get(), "c", "", r.compact_revision());
  EXPECT_TRUE(Next(stream.get()).created());
  r = Next(stream.get());
  EXPECT_FALSE(r.canceled()) << r.cancel_reason();
  ASSERT_GE(r.events_size(), 1);
  EXPECT_EQ(r.events(0).kv().mod_revision(), r2);
  EXPECT_EQ(r.events(0).kv().value(), "2");
  ctx.TryCancel();
}

// Past --quota_backend_bytes a write is refused with etcd's error and raises
// the NOSPACE alarm; while it is raised only reads, deletes and compaction
// go on; an operator lists it (Alarm, Status) and clears it.
TEST_F(EtcdServicesTest, TheQuotaRaisesANoSpaceAlarmThatOnlyAnOperatorClears) {
  Setup setup;
  setup.quota_backend_bytes = 64 << 10;
  Start(setup);
  auto put = [&](const std::string& key) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(std::string(1024, 'v'));
    pb::PutResponse resp;
    return kv_etcd_->Put(&ctx, req, &resp);
  };
  auto alarm = [&](pb::AlarmRequest::AlarmAction action, uint64_t member, pb::AlarmType type,
                   pb::AlarmResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::AlarmRequest req;
    req.set_action(action);
    req.set_memberid(member);
    req.set_alarm(type);
    return maintenance_->Alarm(&ctx, req, resp);
  };
  auto alarms = [&] {
    pb::AlarmResponse resp;
    EXPECT_TRUE(alarm(pb::AlarmRequest::GET, 0, pb::NONE, &resp).ok());
    return resp.alarms_size();
  };
  EXPECT_EQ(alarms(), 0);
  int written = 0;
  grpc::Status refused;
  for (; written < 200; ++written) {
    refused = put("k" + std::to_string(written));
    if (!refused.ok()) break;
  }
  ASSERT_LT(written, 200) << "the quota of 64 KiB let 200 KiB in";
  EXPECT_GT(written, 20);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(), "etcdserver: mvcc: database space exceeded");
  ASSERT_TRUE(WaitFor([&] { return alarms() == 1; }, 10s));
  pb::AlarmResponse listed;
  ASSERT_TRUE(alarm(pb::AlarmRequest::GET, 0, pb::NONE, &listed).ok());
  EXPECT_EQ(listed.alarms(0).memberid(), 1u);
  EXPECT_EQ(listed.alarms(0).alarm(), pb::NOSPACE);
  {
    grpc::ClientContext ctx;
    pb::StatusResponse st;
    ASSERT_TRUE(maintenance_->Status(&ctx, pb::StatusRequest(), &st).ok());
    EXPECT_GT(st.dbsize(), 60 << 10);
    ASSERT_EQ(st.errors_size(), 1);
    EXPECT_EQ(st.errors(0), "memberID:1 alarm:NOSPACE ");
  }
  // raftkv's own API refuses the same writes.
  {
    grpc::ClientContext ctx;
    PutRequest req;
    req.set_key("v1");
    req.set_value("x");
    PutResponse resp;
    EXPECT_EQ(kv_->Put(&ctx, req, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Leases add data too; a lease grant is refused.
  {
    grpc::ClientContext ctx;
    pb::LeaseGrantRequest req;
    req.set_ttl(30);
    pb::LeaseGrantResponse resp;
    grpc::Status s = lease_->LeaseGrant(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  // Deletes and compaction go on; writes stay refused while the alarm is raised.
  for (int i = 0; i < written; ++i) Delete("k" + std::to_string(i));
  ASSERT_TRUE(Compact(Delete("k0")).ok());
  EXPECT_LT(node_->state_machine().StateBytes(), size_t{16} << 10);
  grpc::Status still = put("after-delete");
  EXPECT_EQ(still.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(still.error_message(), "etcdserver: mvcc: database space exceeded");
  // Bad requests: another member's id, an alarm type raftkv does not keep.
  pb::AlarmResponse resp;
  EXPECT_EQ(alarm(pb::AlarmRequest::ACTIVATE, 9, pb::NOSPACE, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(alarm(pb::AlarmRequest::DEACTIVATE, 9, pb::NOSPACE, &resp).ok());  // none to clear
  EXPECT_EQ(resp.alarms_size(), 0);
  EXPECT_EQ(alarm(pb::AlarmRequest::ACTIVATE, 1, pb::CORRUPT, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Cleared: it answers the alarm it cleared, and writes are accepted again.
  ASSERT_TRUE(alarm(pb::AlarmRequest::DEACTIVATE, 1, pb::NOSPACE, &resp).ok());
  ASSERT_EQ(resp.alarms_size(), 1);
  EXPECT_EQ(resp.alarms(0).memberid(), 1u);
  EXPECT_EQ(alarms(), 0);
  ASSERT_TRUE(alarm(pb::AlarmRequest::DEACTIVATE, 1, pb::NOSPACE, &resp).ok());
  EXPECT_EQ(resp.alarms_size(), 0);  // nothing left to clear
  EXPECT_TRUE(put("after-disarm").ok());
}

// etcd's Defragment answers on every engine; in memory nothing holds dead
// space, and Status reports one size for the database and its part in use.
TEST_F(EtcdServicesTest, DefragmentAnswersAsEtcdsDoes) {
  Start();
  Put("k", std::string(1000, 'v'));
  grpc::ClientContext ctx;
  pb::DefragmentResponse resp;
  grpc::Status s = maintenance_->Defragment(&ctx, pb::DefragmentRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.header().member_id(), 1u);
  grpc::ClientContext status_ctx;
  pb::StatusResponse st;
  ASSERT_TRUE(maintenance_->Status(&status_ctx, pb::StatusRequest(), &st).ok());
  EXPECT_EQ(st.dbsize(), st.dbsizeinuse());
  EXPECT_GT(st.dbsize(), 1000);
}

#ifdef RAFTKV_HAVE_ROCKSDB
// On RocksDB, deleted keys and compacted revisions hold their space until
// the store is compacted: Status' dbSize shows it, and Defragment frees it.
TEST_F(EtcdServicesTest, DefragmentFreesTheSpaceOfDeletedRowsOnRocksDb) {
  Setup setup;
  setup.storage_engine = NodeOptions::StorageEngine::kRocksDb;
  Start(setup);
  auto status = [&] {
    grpc::ClientContext ctx;
    pb::StatusResponse st;
    EXPECT_TRUE(maintenance_->Status(&ctx, pb::StatusRequest(), &st).ok());
    return st;
  };
  constexpr int kKeys = 2000;
  constexpr int kValueBytes = 500;  // under the test server's request bound
  for (int i = 0; i < kKeys; ++i) Put("k" + std::to_string(i), std::string(kValueBytes, 'v'));
  const int64_t written = status().dbsize();
  EXPECT_GT(written, kKeys * kValueBytes);
  for (int i = 0; i < kKeys; ++i) Delete("k" + std::to_string(i));
  ASSERT_TRUE(Compact(Delete("k0")).ok());
  const pb::StatusResponse compacted = status();
  EXPECT_LT(compacted.dbsizeinuse(), 64 << 10) << "what the quota counts falls at once";
  EXPECT_GE(compacted.dbsize(), written) << "the rows deleted still hold their space";
  grpc::ClientContext ctx;
  pb::DefragmentResponse resp;
  grpc::Status s = maintenance_->Defragment(&ctx, pb::DefragmentRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_LT(status().dbsize(), written / 4) << "the store was not compacted";
  // It goes on working.
  Put("after", "x");
  grpc::ClientContext get_ctx;
  pb::RangeRequest get;
  get.set_key("after");
  pb::RangeResponse got;
  ASSERT_TRUE(kv_etcd_->Range(&get_ctx, get, &got).ok());
  ASSERT_EQ(got.kvs_size(), 1);
  EXPECT_EQ(got.kvs(0).value(), "x");
}
#endif

}  // namespace
}  // namespace raftkv
