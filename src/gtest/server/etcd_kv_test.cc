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

// What raftkv cannot do yet is refused by name, never ignored.
TEST_F(EtcdKvTest, WhatIsNotSupportedYetIsRefusedByName) {
  pb::RangeRequest sorted;
  sorted.set_key("a");
  sorted.set_range_end("z");
  sorted.set_sort_order(pb::RangeRequest::DESCEND);
  pb::RangeResponse got;
  grpc::Status s = Range(sorted, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_CONTAINS(s.error_message(), "sort_order");

  grpc::ClientContext ctx;
  ctx.set_deadline(In(10s));
  pb::PutRequest ignore;
  ignore.set_key("a");
  ignore.set_ignore_value(true);
  pb::PutResponse put;
  s = etcd_->Put(&ctx, ignore, &put);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_CONTAINS(s.error_message(), "ignore_value");

  pb::RangeRequest empty;  // the same checks as raftkv.v1
  s = Range(empty, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

}  // namespace
}  // namespace raftkv
