// etcd's KV service (server/etcd/etcd_kv.h) through etcd's own messages:
// the answers etcd gives, served by raftkv's state machine.
#include "server/etcd/etcd_kv.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gtest/common/service_test_util.h"
#include "gtest/server/server_fixture.h"
#include "proto/etcd.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
namespace pb = etcdserverpb;

class EtcdKvTest : public ServerTest {
 protected:
  void SetUp() override {
    StartSingleLeader();
    etcd_ = pb::KV::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  grpc::Status Put(const std::string& key, const std::string& value, pb::PutResponse* resp,
                   bool prev_kv = false) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    req.set_prev_kv(prev_kv);
    return etcd_->Put(&ctx, req, resp);
  }
  grpc::Status Range(const pb::RangeRequest& req, pb::RangeResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    return etcd_->Range(&ctx, req, resp);
  }
  std::unique_ptr<pb::KV::Stub> etcd_;
};

TEST_F(EtcdKvTest, PutThenRangeAnswerAsEtcd) {
  pb::PutResponse put;
  ASSERT_TRUE(Put("a", "1", &put).ok());
  EXPECT_EQ(put.header().member_id(), 1u);
  EXPECT_GT(put.header().revision(), 0);
  EXPECT_GT(put.header().raft_term(), 0u);
  EXPECT_FALSE(put.has_prev_kv());
  pb::PutResponse again;
  ASSERT_TRUE(Put("a", "2", &again, /*prev_kv=*/true).ok());
  EXPECT_EQ(again.header().revision(), put.header().revision() + 1);
  EXPECT_EQ(again.prev_kv().value(), "1");
  EXPECT_EQ(again.prev_kv().mod_revision(), put.header().revision());
  ASSERT_TRUE(Put("ab", "3", &put).ok());
  ASSERT_TRUE(Put("b", "4", &put).ok());

  pb::RangeRequest one;
  one.set_key("a");
  pb::RangeResponse got;
  ASSERT_TRUE(Range(one, &got).ok());
  ASSERT_EQ(got.kvs_size(), 1);
  EXPECT_EQ(got.kvs(0).key(), "a");
  EXPECT_EQ(got.kvs(0).value(), "2");
  EXPECT_EQ(got.kvs(0).version(), 2);
  EXPECT_EQ(got.kvs(0).create_revision(), again.header().revision() - 1);
  EXPECT_EQ(got.count(), 1);
  EXPECT_EQ(got.header().revision(), put.header().revision());

  pb::RangeRequest prefix;  // etcdctl get a --prefix
  prefix.set_key("a");
  prefix.set_range_end("b");
  prefix.set_serializable(true);
  ASSERT_TRUE(Range(prefix, &got).ok());
  ASSERT_EQ(got.kvs_size(), 2);
  EXPECT_EQ(got.kvs(1).key(), "ab");

  pb::RangeRequest all;  // etcdctl get "" --from-key: every key
  all.set_key(std::string(1, '\0'));
  all.set_range_end(std::string(1, '\0'));
  all.set_limit(2);
  all.set_sort_order(pb::RangeRequest::ASCEND);  // by key: the natural order
  ASSERT_TRUE(Range(all, &got).ok());
  EXPECT_EQ(got.kvs_size(), 2);
  EXPECT_TRUE(got.more());
  EXPECT_EQ(got.count(), 3);

  pb::RangeRequest past = one;  // at the revision of the first put
  past.set_revision(again.header().revision() - 1);
  ASSERT_TRUE(Range(past, &got).ok());
  ASSERT_EQ(got.kvs_size(), 1);
  EXPECT_EQ(got.kvs(0).value(), "1");
}

TEST_F(EtcdKvTest, DeleteRangeAndTxnAnswerAsEtcd) {
  pb::PutResponse put;
  ASSERT_TRUE(Put("k1", "v1", &put).ok());
  ASSERT_TRUE(Put("k2", "v2", &put).ok());

  pb::TxnRequest txn;  // if k1 == v1 then put k3, get k2 else get k1
  pb::Compare* cmp = txn.add_compare();
  cmp->set_key("k1");
  cmp->set_target(pb::Compare::VALUE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_value("v1");
  pb::PutRequest* then_put = txn.add_success()->mutable_request_put();
  then_put->set_key("k3");
  then_put->set_value("v3");
  txn.add_success()->mutable_request_range()->set_key("k2");
  txn.add_failure()->mutable_request_range()->set_key("k1");
  pb::TxnResponse done;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    ASSERT_TRUE(etcd_->Txn(&ctx, txn, &done).ok());
  }
  EXPECT_TRUE(done.succeeded());
  EXPECT_EQ(done.header().revision(), put.header().revision() + 1);
  ASSERT_EQ(done.responses_size(), 2);
  EXPECT_TRUE(done.responses(0).has_response_put());
  EXPECT_EQ(done.responses(0).response_put().header().revision(), done.header().revision());
  ASSERT_EQ(done.responses(1).response_range().kvs_size(), 1);
  EXPECT_EQ(done.responses(1).response_range().kvs(0).value(), "v2");

  pb::DeleteRangeRequest del;  // etcdctl del k --prefix --prev-kv
  del.set_key("k");
  del.set_range_end("l");
  del.set_prev_kv(true);
  pb::DeleteRangeResponse deleted;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    ASSERT_TRUE(etcd_->DeleteRange(&ctx, del, &deleted).ok());
  }
  EXPECT_EQ(deleted.deleted(), 3);
  ASSERT_EQ(deleted.prev_kvs_size(), 3);
  EXPECT_EQ(deleted.prev_kvs(2).key(), "k3");
  EXPECT_EQ(deleted.header().revision(), done.header().revision() + 1);
}

TEST_F(EtcdKvTest, SortedAndFilteredRangesAnswerAsEtcd) {
  pb::PutResponse put;
  ASSERT_TRUE(Put("lock/b", "1", &put).ok());
  const int64_t b_rev = put.header().revision();
  ASSERT_TRUE(Put("lock/a", "2", &put).ok());
  const int64_t a_rev = put.header().revision();
  ASSERT_TRUE(Put("lock/c", "3", &put).ok());
  ASSERT_TRUE(Put("lock/b", "4", &put).ok());  // b: created first, changed last

  pb::RangeRequest newest;  // etcdctl get lock/ --prefix --sort-by=MODIFY --order=DESCEND
  newest.set_key("lock/");
  newest.set_range_end("lock0");
  newest.set_sort_target(pb::RangeRequest::MOD);
  newest.set_sort_order(pb::RangeRequest::DESCEND);
  pb::RangeResponse got;
  ASSERT_TRUE(Range(newest, &got).ok());
  ASSERT_EQ(got.kvs_size(), 3);
  EXPECT_EQ(got.kvs(0).key(), "lock/b");
  EXPECT_EQ(got.kvs(1).key(), "lock/c");
  EXPECT_EQ(got.kvs(2).key(), "lock/a");
  EXPECT_EQ(got.count(), 3);

  // etcd's Mutex: the waiter before me is the newest key created before my
  // own (sort by CREATE descending, max_create_revision, limit 1); the
  // owner is the oldest (CREATE ascending, limit 1).
  pb::RangeRequest owner;
  owner.set_key("lock/");
  owner.set_range_end("lock0");
  owner.set_sort_target(pb::RangeRequest::CREATE);
  owner.set_sort_order(pb::RangeRequest::ASCEND);
  owner.set_limit(1);
  ASSERT_TRUE(Range(owner, &got).ok());
  ASSERT_EQ(got.kvs_size(), 1);
  EXPECT_EQ(got.kvs(0).key(), "lock/b");
  EXPECT_EQ(got.kvs(0).create_revision(), b_rev);
  EXPECT_TRUE(got.more());
  EXPECT_EQ(got.count(), 3);
  pb::RangeRequest before_c = owner;
  before_c.set_sort_order(pb::RangeRequest::DESCEND);
  before_c.set_max_create_revision(a_rev);
  ASSERT_TRUE(Range(before_c, &got).ok());
  ASSERT_EQ(got.kvs_size(), 1);
  EXPECT_EQ(got.kvs(0).key(), "lock/a");
  EXPECT_TRUE(got.more());  // lock/b passed the filter too

  pb::RangeRequest changed;  // the keys changed since a's creation, in key order
  changed.set_key("lock/");
  changed.set_range_end("lock0");
  changed.set_min_mod_revision(a_rev + 1);
  ASSERT_TRUE(Range(changed, &got).ok());
  ASSERT_EQ(got.kvs_size(), 2);
  EXPECT_EQ(got.kvs(0).key(), "lock/b");
  EXPECT_EQ(got.kvs(1).key(), "lock/c");
}

TEST_F(EtcdKvTest, IgnoreFlagsRangeComparesAndNestedTxnsAnswerAsEtcd) {
  pb::PutResponse put;
  ASSERT_TRUE(Put("cfg/a", "1", &put).ok());
  ASSERT_TRUE(Put("cfg/b", "2", &put).ok());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::PutRequest keep;  // etcdctl put cfg/a --ignore-value
    keep.set_key("cfg/a");
    keep.set_ignore_value(true);
    ASSERT_TRUE(etcd_->Put(&ctx, keep, &put).ok());
  }
  pb::TxnRequest txn;  // if every cfg/ key exists then (if cfg/a has version 2 then put cfg/c)
  pb::Compare* all = txn.add_compare();
  all->set_key("cfg/");
  all->set_range_end("cfg0");
  all->set_target(pb::Compare::CREATE);
  all->set_result(pb::Compare::GREATER);
  all->set_create_revision(0);
  pb::TxnRequest* inner = txn.add_success()->mutable_request_txn();
  pb::Compare* version = inner->add_compare();
  version->set_key("cfg/a");
  version->set_target(pb::Compare::VERSION);
  version->set_result(pb::Compare::EQUAL);
  version->set_version(2);
  pb::PutRequest* c = inner->add_success()->mutable_request_put();
  c->set_key("cfg/c");
  c->set_value("3");
  inner->add_success()->mutable_request_range()->set_key("cfg/a");
  pb::TxnResponse done;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    ASSERT_TRUE(etcd_->Txn(&ctx, txn, &done).ok());
  }
  EXPECT_TRUE(done.succeeded());
  ASSERT_EQ(done.responses_size(), 1);
  ASSERT_TRUE(done.responses(0).has_response_txn());
  const pb::TxnResponse& nested = done.responses(0).response_txn();
  EXPECT_TRUE(nested.succeeded());
  EXPECT_EQ(nested.header().revision(), done.header().revision());
  ASSERT_EQ(nested.responses_size(), 2);
  ASSERT_EQ(nested.responses(1).response_range().kvs_size(), 1);
  EXPECT_EQ(nested.responses(1).response_range().kvs(0).value(), "1");  // kept by ignore_value
  pb::RangeRequest c_key;
  c_key.set_key("cfg/c");
  pb::RangeResponse got;
  ASSERT_TRUE(Range(c_key, &got).ok());
  ASSERT_EQ(got.kvs_size(), 1);
  EXPECT_EQ(got.kvs(0).value(), "3");
}

// The refusals clients tell apart carry etcd's code and exact message.
TEST_F(EtcdKvTest, ErrorsCarryEtcdsCodesAndMessages) {
  auto put = [&](const pb::PutRequest& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::PutResponse resp;
    return etcd_->Put(&ctx, req, &resp);
  };
  auto txn = [&](const pb::TxnRequest& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    pb::TxnResponse resp;
    return etcd_->Txn(&ctx, req, &resp);
  };
  auto expect = [](const grpc::Status& s, grpc::StatusCode code, const std::string& message) {
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_EQ(s.error_message(), message);
  };
  pb::RangeRequest empty;
  pb::RangeResponse got;
  expect(Range(empty, &got), grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: key is not provided");
  pb::PutResponse written;
  ASSERT_TRUE(Put("e", "1", &written).ok());
  pb::RangeRequest future;
  future.set_key("e");
  future.set_revision(written.header().revision() + 100);
  expect(Range(future, &got), grpc::StatusCode::OUT_OF_RANGE,
         "etcdserver: mvcc: required revision is a future revision");

  pb::PutRequest keep;
  keep.set_key("absent");
  keep.set_ignore_value(true);
  expect(put(keep), grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: key not found");
  keep.set_key("e");
  keep.set_value("v");
  expect(put(keep), grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: value is provided");
  pb::PutRequest keep_lease;
  keep_lease.set_key("e");
  keep_lease.set_ignore_lease(true);
  keep_lease.set_lease(5);
  expect(put(keep_lease), grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: lease is provided");
  pb::PutRequest leased;
  leased.set_key("e");
  leased.set_lease(12345);
  expect(put(leased), grpc::StatusCode::NOT_FOUND, "etcdserver: requested lease not found");

  pb::TxnRequest twice;
  pb::PutRequest* p = twice.add_success()->mutable_request_put();
  p->set_key("t");
  p = twice.add_success()->mutable_request_txn()->add_success()->mutable_request_put();
  p->set_key("t");
  expect(txn(twice), grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request");
  pb::TxnRequest many;
  for (int i = 0; i < 200; ++i) many.add_success()->mutable_request_range()->set_key("k" + std::to_string(i));
  expect(txn(many), grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: too many operations in txn request");
  pb::TxnRequest no_key;
  no_key.add_compare()->set_target(pb::Compare::VERSION);
  expect(txn(no_key), grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: key is not provided");

  pb::RangeRequest unsupported_v1_detail;  // no etcd counterpart: raftkv's own message
  unsupported_v1_detail.set_key("b");
  unsupported_v1_detail.set_range_end("a");
  grpc::Status s = Range(unsupported_v1_detail, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_CONTAINS(s.error_message(), "range_end");
}

}  // namespace
}  // namespace raftkv
