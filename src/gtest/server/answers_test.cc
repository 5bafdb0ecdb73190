// Answers that agree with themselves: every write answer carries the
// revision it produced, and every read answer's revision is the one the read
// was served at, never below a key's mod_revision in the same answer.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "gtest/common/service_test_util.h"
#include "gtest/server/server_fixture.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;

class AnswersTest : public ServerTest {};

TEST_F(AnswersTest, GetCarriesTheValueInItsKeyValue) {
  StartSingleLeader();
  ASSERT_TRUE(Put("k", "value").ok());
  for (bool stale : {false, true}) {
    GetResponse get;
    ASSERT_TRUE(Get("k", &get, stale).ok());
    ASSERT_TRUE(get.found());
    EXPECT_EQ(get.value(), "value");
    EXPECT_EQ(get.kv().value(), "value");
    EXPECT_EQ(get.kv().key(), "k");
  }
}

TEST_F(AnswersTest, CompareAndSwapAndBatchAnswerWithTheirRevision) {
  StartSingleLeader();
  PutResponse put;
  ASSERT_TRUE(Put("k", "a", &put).ok());
  const std::string a = "a";
  CompareAndSwapResponse swapped;
  ASSERT_TRUE(Cas("k", &a, "b", &swapped).ok());
  ASSERT_TRUE(swapped.swapped());
  EXPECT_EQ(swapped.revision(), put.revision() + 1);
  CompareAndSwapResponse refused;  // no change: the revision stays
  ASSERT_TRUE(Cas("k", &a, "c", &refused).ok());
  ASSERT_FALSE(refused.swapped());
  EXPECT_EQ(refused.revision(), swapped.revision());

  BatchRequest batch;
  for (const char* key : {"x", "y"}) {
    BatchOp* op = batch.add_ops();
    op->set_op(BatchOp::PUT);
    op->set_key(key);
    op->set_value("1");
  }
  BatchResponse done;
  ASSERT_TRUE(Batch(batch, &done).ok());
  EXPECT_EQ(done.revision(), swapped.revision() + 1);  // one revision for the batch
  GetResponse get;
  ASSERT_TRUE(Get("y", &get).ok());
  EXPECT_EQ(get.kv().mod_revision(), done.revision());
}

// Reads race a writer that rewrites the key they read: no answer may show a
// key modified at a revision above the answer's own.
TEST_F(AnswersTest, ReadRevisionsNeverTrailTheKeysTheyReturn) {
  StartSingleLeader();
  ASSERT_TRUE(Put("hot", "0").ok());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 1; !stop; ++i) Put("hot", std::to_string(i));
  });
  int checked = 0;
  const auto until = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < until && !HasFailure()) {
    GetResponse get;
    ASSERT_TRUE(Get("hot", &get, /*stale=*/checked % 2 == 0).ok());
    ASSERT_TRUE(get.found());
    EXPECT_LE(get.kv().mod_revision(), get.revision()) << "Get, read " << checked;

    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    RangeRequest range;
    range.set_key("hot");
    range.set_serializable(checked % 2 == 0);
    RangeResponse ranged;
    ASSERT_TRUE(kv_->Range(&ctx, range, &ranged).ok());
    ASSERT_EQ(ranged.kvs_size(), 1);
    EXPECT_LE(ranged.kvs(0).mod_revision(), ranged.header().revision()) << "Range, read " << checked;

    grpc::ClientContext txn_ctx;
    txn_ctx.set_deadline(In(10s));
    TxnRequest txn;
    *txn.add_success()->mutable_request_range() = range;
    TxnResponse answered;
    ASSERT_TRUE(kv_->Txn(&txn_ctx, txn, &answered).ok());
    ASSERT_EQ(answered.responses_size(), 1);
    const RangeResponse& r = answered.responses(0).response_range();
    ASSERT_EQ(r.kvs_size(), 1);
    EXPECT_LE(r.kvs(0).mod_revision(), answered.header().revision()) << "Txn, read " << checked;
    EXPECT_LE(r.kvs(0).mod_revision(), r.header().revision()) << "Txn's range, read " << checked;
    ++checked;
  }
  stop = true;
  writer.join();
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace raftkv
