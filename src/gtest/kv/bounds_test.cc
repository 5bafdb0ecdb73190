// What one entry may cost a replica: write-transaction answers refused whole
// past their budget, ranges bounded as they are walked, saved session
// answers bounded per session and in all, sessions bounded in number, and
// the counters the Raft path reads without waiting for an apply.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/common/temp_dir.h"
#include "kv/kv_state_machine.h"
#include "storage/snapshot_format.h"

namespace raftkv {
namespace {

class BoundsTest : public ::testing::Test {
 protected:
  ApplyResult Run(const Command& c, KvStateMachine* sm = nullptr) {
    Entry e;
    e.set_term(1);
    e.set_index(++index_);
    e.set_type(ENTRY_COMMAND);
    e.set_data(c.SerializeAsString());
    return (sm != nullptr ? sm : &sm_)->Apply(e);
  }
  void Put(const std::string& k, const std::string& v) {
    Command c;
    c.set_op(Command::PUT);
    c.set_key(k);
    c.set_value(v);
    ASSERT_FALSE(Run(c).rejected());
  }
  // 100 keys of 1 KiB under "p/".
  void Fill() {
    for (int i = 0; i < 100; ++i) Put("p/" + std::to_string(1000 + i), std::string(1024, 'x'));
  }
  static RequestOp Prefix(const std::string& prefix, int64_t limit = 0, bool count_only = false) {
    RequestOp op;
    RangeRequest* r = op.mutable_request_range();
    r->set_key(prefix);
    std::string end = prefix;
    end.back()++;
    r->set_range_end(end);
    r->set_limit(limit);
    r->set_count_only(count_only);
    return op;
  }
  static RequestOp PutOp(const std::string& k, const std::string& v) {
    RequestOp op;
    op.mutable_request_put()->set_key(k);
    op.mutable_request_put()->set_value(v);
    return op;
  }
  void Grant(int64_t id, int64_t ttl) {
    Command g;
    g.set_op(Command::LEASE_GRANT);
    g.set_lease(id);
    g.set_lease_ttl(ttl);
    ASSERT_FALSE(Run(g).rejected());
  }
  static Command Revoke(int64_t id) {
    Command rv;
    rv.set_op(Command::LEASE_REVOKE);
    rv.set_lease(id);
    return rv;
  }
  uint64_t OpenSession(uint64_t max_sessions = 0) {
    Command c;
    c.set_op(Command::OPEN_SESSION);
    c.set_session_timeout_ms(60000);
    c.set_max_sessions(max_sessions);
    ApplyResult r = Run(c);
    return r.rejected() ? 0 : r.client_id;
  }

  // A copy of sm_ through a snapshot file, as a restarted member gets it.
  void RoundTrip(KvStateMachine* copy) {
    testing_util::TempDir dir;
    SnapshotWriter w;
    sm_.Snapshot(&w);
    testing_util::WriteFileBytes(dir.path() + "/snap", EncodeSnapshotFile(w));
    std::unique_ptr<SnapshotReader> reader;
    ASSERT_TRUE(SnapshotReader::Open(dir.path() + "/snap", &reader).ok());
    ASSERT_TRUE(copy->Restore(reader.get()).ok());
  }

  KvStateMachine sm_;
  uint64_t index_ = 0;
};

TEST_F(BoundsTest, AWriteTransactionOverItsAnswerBudgetIsRefusedWholeBeforeAnyChange) {
  Fill();  // ~100 KiB under p/
  const int64_t revision = sm_.Revision();
  Command c;
  c.set_op(Command::TXN);
  c.set_max_result_bytes(64 << 10);
  *c.mutable_txn()->add_success() = PutOp("written", "1");
  *c.mutable_txn()->add_success() = Prefix("p/");
  ApplyResult r = Run(c);
  ASSERT_TRUE(r.rejected());
  EXPECT_EQ(r.Rejection().code(), Status::Code::kResourceExhausted) << r.Rejection();
  EXPECT_NE(r.Rejection().message().find("--max_txn_result_bytes"), std::string::npos);
  EXPECT_FALSE(sm_.Get("written").has_value()) << "a refused transaction changes nothing";
  EXPECT_EQ(sm_.Revision(), revision);
  EXPECT_EQ(r.answer.txn().responses_size(), 0) << "nothing was read into the answer";
  // The leader's check before proposing says the same.
  EXPECT_EQ(sm_.CheckTxnAnswer(c.txn(), 64 << 10).code(), Status::Code::kResourceExhausted);

  // Within budget (a limit), or without one (an entry from before budgets): applied.
  c.mutable_txn()->mutable_success(1)->mutable_request_range()->set_limit(10);
  EXPECT_TRUE(sm_.CheckTxnAnswer(c.txn(), 64 << 10).ok());
  r = Run(c);
  ASSERT_FALSE(r.rejected()) << r.Rejection();
  EXPECT_EQ(r.answer.txn().responses(1).response_range().kvs_size(), 10);
  EXPECT_EQ(r.answer.txn().responses(1).response_range().count(), 100);
  c.mutable_txn()->mutable_success(1)->mutable_request_range()->set_limit(0);
  c.mutable_txn()->mutable_success(0)->mutable_request_put()->set_key("written2");
  c.set_max_result_bytes(0);
  EXPECT_FALSE(Run(c).rejected());
}

// What a transaction puts counts against a range only when the range could
// show it: a large put beside reads of other keys is not refused.
TEST_F(BoundsTest, APutCountsOnlyAgainstTheRangesThatCouldShowIt) {
  Put("other", "small");
  Command c;
  c.set_op(Command::TXN);
  c.set_max_result_bytes(64 << 10);
  *c.mutable_txn()->add_success() = PutOp("large", std::string(100 << 10, 'l'));
  for (int i = 0; i < 5; ++i) {
    RequestOp get;
    get.mutable_request_range()->set_key("other");
    *c.mutable_txn()->add_success() = get;
  }
  EXPECT_FALSE(Run(c).rejected());
  // A range that covers the put carries it.
  RequestOp covering;
  covering.mutable_request_range()->set_key("large");
  *c.mutable_txn()->add_success() = covering;
  c.mutable_txn()->mutable_success(0)->mutable_request_put()->set_key("large");
  EXPECT_EQ(sm_.CheckTxnAnswer(c.txn(), 64 << 10).code(), Status::Code::kResourceExhausted);
}

TEST_F(BoundsTest, EveryKeyATransactionVisitsCostsItsBudgetEvenWhenOnlyCounted) {
  for (int i = 0; i < 1000; ++i) Put("c/" + std::to_string(1000 + i), "v");
  Command c;
  c.set_op(Command::TXN);
  c.set_max_result_bytes(1000);  // ~31 keys visited
  *c.mutable_txn()->add_success() = PutOp("w", "1");
  *c.mutable_txn()->add_success() = Prefix("c/", 0, /*count_only=*/true);
  ApplyResult r = Run(c);
  ASSERT_TRUE(r.rejected());
  EXPECT_EQ(r.Rejection().code(), Status::Code::kResourceExhausted);
  c.set_max_result_bytes(1000 * KvStateMachine::kVisitCost + 1000);
  r = Run(c);
  ASSERT_FALSE(r.rejected()) << r.Rejection();
  EXPECT_EQ(r.answer.txn().responses(1).response_range().count(), 1000);
}

TEST_F(BoundsTest, ADeleteWithPreviousValuesOverBudgetIsRefusedWhole) {
  Fill();
  Command c;
  c.set_op(Command::DELETE_RANGE);
  c.set_key("p/");
  c.set_range_end("p0");
  c.set_prev_kv(true);
  c.set_max_result_bytes(10 << 10);
  EXPECT_EQ(sm_.CheckDeleteAnswer("p/", "p0", 10 << 10).code(), Status::Code::kResourceExhausted);
  ApplyResult r = Run(c);
  ASSERT_TRUE(r.rejected());
  EXPECT_EQ(r.Rejection().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(sm_.Size(), 100u);
  c.set_prev_kv(false);  // without previous values the answer is a count
  r = Run(c);
  ASSERT_FALSE(r.rejected());
  EXPECT_EQ(r.answer.deleted(), 100);
  EXPECT_EQ(sm_.Size(), 0u);
}

TEST_F(BoundsTest, ARangeStopsCopyingAtItsByteBoundAndSaysSo) {
  Fill();
  RangeRequest all = Prefix("p/").request_range();
  RangeResponse resp;
  Status s = sm_.Range(all, &resp, 20 << 10);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("limit"), std::string::npos) << s;
  EXPECT_LE(resp.kvs_size(), 20);
  // A limit within the bound is fine; count still counts every key.
  all.set_limit(5);
  ASSERT_TRUE(sm_.Range(all, &resp, 20 << 10).ok());
  EXPECT_EQ(resp.kvs_size(), 5);
  EXPECT_EQ(resp.count(), 100);
  EXPECT_TRUE(resp.more());
  // A past revision is bounded the same way.
  RangeRequest past = Prefix("p/").request_range();
  past.set_revision(sm_.Revision() - 1);
  EXPECT_EQ(sm_.Range(past, &resp, 20 << 10).code(), Status::Code::kResourceExhausted);
  // So is a read-only transaction, in all its ranges together.
  TxnRequest txn;
  for (int i = 0; i < 4; ++i) {
    *txn.add_success() = Prefix("p/");
    txn.mutable_success(i)->mutable_request_range()->set_limit(10);
  }
  TxnResponse tr;
  EXPECT_TRUE(sm_.ReadTxn(txn, &tr, 60 << 10).ok());
  EXPECT_EQ(sm_.ReadTxn(txn, &tr, 30 << 10).code(), Status::Code::kResourceExhausted);
}

// The merge of the map with the history gives exactly the state at the
// revision, with limit, count and more, without copying the whole range.
TEST_F(BoundsTest, APastRevisionRangeMergesTheHistoryInKeyOrder) {
  Put("k/b", "b1");
  Put("k/d", "d1");
  Put("k/f", "f1");
  const int64_t at = sm_.Revision();
  Put("k/a", "a2");  // created after
  Put("k/d", "d2");  // changed after
  Command del;
  del.set_op(Command::DELETE_RANGE);
  del.set_key("k/f");
  Run(del);          // deleted after
  Put("k/g", "g2");
  RangeRequest r = Prefix("k/").request_range();
  r.set_revision(at);
  RangeResponse resp;
  ASSERT_TRUE(sm_.Range(r, &resp).ok());
  std::vector<std::string> got;
  for (const KeyValue& kv : resp.kvs()) got.push_back(kv.key() + "=" + kv.value());
  EXPECT_EQ(got, (std::vector<std::string>{"k/b=b1", "k/d=d1", "k/f=f1"}));
  EXPECT_EQ(resp.count(), 3);
  r.set_limit(2);
  ASSERT_TRUE(sm_.Range(r, &resp).ok());
  ASSERT_EQ(resp.kvs_size(), 2);
  EXPECT_EQ(resp.kvs(1).key(), "k/d");
  EXPECT_EQ(resp.kvs(1).value(), "d1");
  EXPECT_EQ(resp.count(), 3);
  EXPECT_TRUE(resp.more());
}

TEST_F(BoundsTest, SavedAnswersAreBoundedPerSessionAndInAll) {
  Fill();
  const uint64_t a = OpenSession();
  const uint64_t b = OpenSession();
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  // Each answer carries ~10 KiB (a range of 10 keys); the client never
  // advances first_outstanding.
  auto write = [&](uint64_t session, uint64_t seq, uint64_t per_session, uint64_t total) {
    Command c;
    c.set_op(Command::TXN);
    c.set_client_id(session);
    c.set_sequence(seq);
    c.set_first_outstanding(1);
    c.set_session_saved_bytes(per_session);
    c.set_saved_bytes_total(total);
    *c.mutable_txn()->add_success() = PutOp("s/" + std::to_string(session), std::to_string(seq));
    *c.mutable_txn()->add_success() = Prefix("p/", 10);
    return Run(c);
  };
  for (uint64_t seq = 1; seq <= 20; ++seq) ASSERT_FALSE(write(a, seq, 50 << 10, 0).rejected());
  EXPECT_LE(sm_.SavedAnswerBytes(), (50u << 10) + (11u << 10));
  // The oldest are gone and their sequences stale (refused, never re-applied).
  ApplyResult old = write(a, 1, 50 << 10, 0);
  EXPECT_EQ(old.session_error, ApplyResult::SessionError::kStaleSequence);
  EXPECT_EQ(sm_.Get("s/" + std::to_string(a)).value_or(""), "20");
  // The newest is answered as a duplicate.
  ApplyResult dup = write(a, 20, 50 << 10, 0);
  EXPECT_TRUE(dup.duplicate);
  EXPECT_EQ(dup.answer.txn().responses(1).response_range().kvs_size(), 10);

  // In all: session b's answers push out a's oldest, but never a's newest.
  for (uint64_t seq = 1; seq <= 20; ++seq) ASSERT_FALSE(write(b, seq, 0, 40 << 10).rejected());
  EXPECT_LE(sm_.SavedAnswerBytes(), (40u << 10) + 2 * (11u << 10));
  EXPECT_TRUE(write(a, 20, 0, 40 << 10).duplicate) << "a session's newest answer is kept";
  EXPECT_TRUE(write(b, 20, 0, 40 << 10).duplicate);
  EXPECT_EQ(write(b, 1, 0, 40 << 10).session_error, ApplyResult::SessionError::kStaleSequence);

  // The bounds survive a snapshot: the restored copy drops the same answers.
  KvStateMachine copy;
  ASSERT_NO_FATAL_FAILURE(RoundTrip(&copy));
  EXPECT_EQ(copy.SavedAnswerBytes(), sm_.SavedAnswerBytes());
  const uint64_t at = index_;
  for (uint64_t seq = 21; seq <= 25; ++seq) write(b, seq, 0, 30 << 10);
  index_ = at;
  for (uint64_t seq = 21; seq <= 25; ++seq) {
    Command c;
    c.set_op(Command::TXN);
    c.set_client_id(b);
    c.set_sequence(seq);
    c.set_first_outstanding(1);
    c.set_saved_bytes_total(30 << 10);
    *c.mutable_txn()->add_success() = PutOp("s/" + std::to_string(b), std::to_string(seq));
    *c.mutable_txn()->add_success() = Prefix("p/", 10);
    Run(c, &copy);
  }
  EXPECT_EQ(copy.SavedAnswerBytes(), sm_.SavedAnswerBytes());
}

TEST_F(BoundsTest, SessionsAreBoundedInNumberByTheLeadersStamp) {
  EXPECT_NE(OpenSession(2), 0u);
  EXPECT_NE(OpenSession(2), 0u);
  Command c;
  c.set_op(Command::OPEN_SESSION);
  c.set_session_timeout_ms(60000);
  c.set_max_sessions(2);
  ApplyResult r = Run(c);
  ASSERT_TRUE(r.rejected());
  EXPECT_EQ(r.Rejection().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(r.Rejection().message().find("--max_sessions"), std::string::npos);
  EXPECT_EQ(sm_.SessionCount(), 2u);
  EXPECT_NE(OpenSession(0), 0u) << "an entry without the stamp (older) is not bounded";
}

TEST_F(BoundsTest, LeasesRememberTheEntryThatGrantedThemAcrossSnapshots) {
  Grant(7, 60);
  const uint64_t first = index_;
  Run(Revoke(7));
  Grant(7, 60);  // the same id granted again: a new lease
  std::vector<LeaseInfo> leases = sm_.LeaseInfos();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, 7);
  EXPECT_EQ(leases[0].granted_index, index_);
  EXPECT_NE(leases[0].granted_index, first);
  KvStateMachine copy;
  ASSERT_NO_FATAL_FAILURE(RoundTrip(&copy));
  ASSERT_EQ(copy.LeaseInfos().size(), 1u);
  EXPECT_EQ(copy.LeaseInfos()[0].granted_index, index_);
}

// The expiry of a lease names its grant: once the id is revoked and granted
// again, a late expiry of the first grant revokes nothing.
TEST_F(BoundsTest, AnExpiryOfAnEarlierGrantDoesNotRevokeANewGrantOfTheSameId) {
  Grant(9, 60);
  const uint64_t first = index_;
  Run(Revoke(9));
  Grant(9, 60);
  Command expiry = Revoke(9);
  expiry.set_lease_expired(true);
  expiry.set_lease_granted_index(first);
  ApplyResult r = Run(expiry);
  ASSERT_TRUE(r.rejected());
  EXPECT_EQ(r.Rejection().code(), Status::Code::kNotFound);
  EXPECT_EQ(sm_.LeaseCount(), 1u);
  expiry.set_lease_granted_index(index_ - 1);  // the second grant's own expiry
  EXPECT_FALSE(Run(expiry).rejected());
  EXPECT_EQ(sm_.LeaseCount(), 0u);
}

// The counters the node's status reads are published, not read under the
// lock: a reader is never held up by an apply in progress.
TEST_F(BoundsTest, CountersAreReadWithoutWaitingForTheLock) {
  Fill();
  std::promise<void> inside;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  sm_.SetApplyHookForTest([&](const Entry&) {
    inside.set_value();
    released.wait();
  });
  std::thread apply([&] { Put("late", "1"); });
  inside.get_future().wait();  // the apply holds the lock now
  auto read = std::async(std::launch::async, [&] {
    return sm_.Revision() + static_cast<int64_t>(sm_.SessionCount() + sm_.Size() + sm_.AppliedIndex() +
                                                 sm_.AppliedTerm() + sm_.LeaseGeneration() +
                                                 sm_.SavedAnswerBytes());
  });
  const bool answered = read.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  release.set_value();
  apply.join();
  sm_.SetApplyHookForTest(nullptr);
  EXPECT_TRUE(answered) << "a counter waited for the apply's lock";
  EXPECT_EQ(sm_.Revision(), 101);
}

}  // namespace
}  // namespace raftkv
