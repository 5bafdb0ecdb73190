// The KV API in the state machine: revisions, ranges (also at a past
// revision), DeleteRange, transactions, leases, the history window and
// snapshots that keep all of it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gtest/kv/txn_ops.h"
#include "kv/kv_state_machine.h"

namespace raftkv {
namespace {

class KvApiStateTest : public ::testing::Test {
 protected:
  ApplyResult Run(const Command& c) { return testing_txn::ApplyNext(&sm_, &index_, c); }
  // Restores `copy` from a snapshot file of sm_.
  void SnapshotInto(KvStateMachine* copy) { testing_txn::RestoreCopy(sm_, copy); }
  ApplyResult Put(const std::string& k, const std::string& v, int64_t lease = 0, bool prev = false) {
    Command c;
    c.set_op(Command::PUT);
    c.set_key(k);
    c.set_value(v);
    c.set_lease(lease);
    c.set_prev_kv(prev);
    return Run(c);
  }
  ApplyResult Del(const std::string& k, const std::string& end = "", bool prev = false) {
    Command c;
    c.set_op(Command::DELETE_RANGE);
    c.set_key(k);
    c.set_range_end(end);
    c.set_prev_kv(prev);
    return Run(c);
  }
  ApplyResult Grant(int64_t ttl, int64_t id = 0) {
    Command c;
    c.set_op(Command::LEASE_GRANT);
    c.set_lease(id);
    c.set_lease_ttl(ttl);
    return Run(c);
  }
  ApplyResult Revoke(int64_t id) {
    Command c;
    c.set_op(Command::LEASE_REVOKE);
    c.set_lease(id);
    return Run(c);
  }
  RangeResponse Range(const std::string& k, const std::string& end = "", int64_t rev = 0,
                      int64_t limit = 0, bool keys_only = false, bool count_only = false) {
    RangeRequest r;
    r.set_key(k);
    r.set_range_end(end);
    r.set_revision(rev);
    r.set_limit(limit);
    r.set_keys_only(keys_only);
    r.set_count_only(count_only);
    RangeResponse resp;
    Status s = sm_.Range(r, &resp);
    EXPECT_TRUE(s.ok()) << s;
    return resp;
  }
  static std::vector<std::string> Keys(const RangeResponse& r) {
    std::vector<std::string> out;
    for (const KeyValue& kv : r.kvs()) out.push_back(kv.key() + "=" + kv.value());
    return out;
  }

  KvStateMachine sm_;
  uint64_t index_ = 0;
};

TEST_F(KvApiStateTest, EveryChangingEntryIsOneRevisionAndKeysCarryTheirs) {
  EXPECT_EQ(Put("a", "1").answer.revision(), 1);
  EXPECT_EQ(Put("b", "1").answer.revision(), 2);
  EXPECT_EQ(Put("a", "2").answer.revision(), 3);
  const KvRecord a = *sm_.GetRecord("a");
  EXPECT_EQ(a.create_revision, 1);
  EXPECT_EQ(a.mod_revision, 3);
  EXPECT_EQ(a.version, 2);
  // A delete of nothing changes nothing: no revision.
  EXPECT_EQ(Del("zzz").answer.revision(), 3);
  EXPECT_EQ(Del("a").answer.deleted(), 1);
  EXPECT_EQ(sm_.Revision(), 4);
  // Re-created: a new life, version 1.
  Put("a", "3");
  EXPECT_EQ(sm_.GetRecord("a")->create_revision, 5);
  EXPECT_EQ(sm_.GetRecord("a")->version, 1);
  // A batch of several writes is one revision.
  Command batch;
  batch.set_op(Command::BATCH);
  for (const char* k : {"x", "y", "x"}) {
    Command* op = batch.add_ops();
    op->set_op(Command::PUT);
    op->set_key(k);
    op->set_value("v");
  }
  EXPECT_EQ(Run(batch).answer.revision(), 6);
  EXPECT_EQ(sm_.GetRecord("x")->version, 2);
  EXPECT_EQ(sm_.GetRecord("x")->mod_revision, 6);
}

TEST_F(KvApiStateTest, RangesArePrefixesOrIntervalsWithLimitKeysOnlyAndCountOnly) {
  for (const char* k : {"a", "p/1", "p/2", "p/3", "q"}) Put(k, std::string("v") + k);
  EXPECT_EQ(Keys(Range("p/", "p0")), (std::vector<std::string>{"p/1=vp/1", "p/2=vp/2", "p/3=vp/3"}));
  RangeResponse limited = Range("p/", "p0", 0, 2);
  EXPECT_EQ(limited.kvs_size(), 2);
  EXPECT_TRUE(limited.more());
  EXPECT_EQ(limited.count(), 3);
  RangeResponse keys = Range("p/", "p0", 0, 0, true);
  ASSERT_EQ(keys.kvs_size(), 3);
  EXPECT_EQ(keys.kvs(0).value(), "");
  EXPECT_EQ(keys.kvs(0).key(), "p/1");
  RangeResponse count = Range("a", std::string(1, '\0'), 0, 0, false, true);
  EXPECT_EQ(count.count(), 5);
  EXPECT_EQ(count.kvs_size(), 0);
  EXPECT_EQ(Keys(Range("q")), (std::vector<std::string>{"q=vq"}));
  EXPECT_EQ(Range("nope").count(), 0);
  EXPECT_EQ(Range("a").header().revision(), 5);
}

TEST_F(KvApiStateTest, AReadAtAPastRevisionSeesTheStoreAsItWas) {
  Put("k1", "a");             // 1
  Put("k2", "b");             // 2
  Put("k1", "c");             // 3
  Del("k2");                  // 4
  Put("k3", "d");             // 5
  EXPECT_EQ(Keys(Range("k", "l", 1)), (std::vector<std::string>{"k1=a"}));
  EXPECT_EQ(Keys(Range("k", "l", 2)), (std::vector<std::string>{"k1=a", "k2=b"}));
  EXPECT_EQ(Keys(Range("k", "l", 3)), (std::vector<std::string>{"k1=c", "k2=b"}));
  EXPECT_EQ(Keys(Range("k", "l", 4)), (std::vector<std::string>{"k1=c"}));
  EXPECT_EQ(Keys(Range("k", "l", 5)), (std::vector<std::string>{"k1=c", "k3=d"}));
  EXPECT_EQ(Range("k1", "", 2).kvs(0).mod_revision(), 1);
  RangeRequest future;
  future.set_key("k1");
  future.set_revision(6);
  RangeResponse resp;
  Status s = sm_.Range(future, &resp);
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange);
  EXPECT_NE(s.message().find("future"), std::string::npos) << s;
}

TEST_F(KvApiStateTest, TheHistoryWindowDropsWholeOldRevisionsAndSaysWhichIsOldest) {
  sm_.SetHistoryLimits(3, 1 << 20);
  for (int i = 1; i <= 10; ++i) Put("k", std::to_string(i));
  EXPECT_EQ(sm_.CompactedRevision(), 7);
  EXPECT_EQ(Keys(Range("k", "", 7)), (std::vector<std::string>{"k=7"}));
  RangeRequest old;
  old.set_key("k");
  old.set_revision(6);
  RangeResponse resp;
  Status s = sm_.Range(old, &resp);
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange);
  EXPECT_NE(s.message().find("oldest revision kept is 7"), std::string::npos) << s;
  KvStateMachine::EventBatch batch;
  s = sm_.ReadEvents("k", "", 7, 1 << 20, &batch);
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange);
  EXPECT_NE(s.message().find("may start at is 8"), std::string::npos) << s;
  ASSERT_TRUE(sm_.ReadEvents("k", "", 8, 1 << 20, &batch).ok());
  ASSERT_EQ(batch.events.size(), 3u);
  EXPECT_EQ(batch.events[0].revision, 8);
  EXPECT_EQ(batch.events[0].kv.value, "8");
  EXPECT_EQ(batch.events[0].prev.value, "7");
  EXPECT_EQ(batch.next_revision, 11);
  // By bytes: a revision bigger than the limit alone is still kept.
  sm_.SetHistoryLimits(1000, 10);
  Put("big", std::string(1000, 'x'));
  ASSERT_TRUE(sm_.ReadEvents("big", "", 11, 1 << 20, &batch).ok());
  EXPECT_EQ(batch.events.size(), 1u);
}

// The versions and history rows a window or a compaction no longer needs
// leave the store, whichever way the window moves.
TEST_F(KvApiStateTest, TheStoreHoldsOnlyWhatTheHistoryWindowKeeps) {
  constexpr size_t kVersion = 1100;  // a 1000-byte value's version and history rows, at most
  sm_.SetHistoryLimits(10, 1 << 20);
  const std::string value(1000, 'v');
  for (int i = 0; i < 200; ++i) Put("k", value);
  // Ten revisions of history and the version below them, and those the
  // window dropped since the last sweep.
  EXPECT_GT(sm_.StoredBytes(), 11 * 1000u);
  EXPECT_LT(sm_.StoredBytes(), (11 + KvStateMachine::kSweepRevisions) * kVersion);
  // A member restored from it with a smaller window drops the rest.
  KvStateMachine copy;
  copy.SetHistoryLimits(2, 1 << 20);
  ASSERT_NO_FATAL_FAILURE(SnapshotInto(&copy));
  EXPECT_LT(copy.StoredBytes(), 3 * kVersion);
  RangeRequest at;
  at.set_key("k");
  at.set_revision(198);
  RangeResponse resp;
  ASSERT_TRUE(copy.Range(at, &resp).ok());
  EXPECT_EQ(resp.kvs_size(), 1);
  at.set_revision(197);
  EXPECT_EQ(copy.Range(at, &resp).code(), Status::Code::kOutOfRange);
  // A smaller window here.
  sm_.SetHistoryLimits(1, 1 << 20);
  EXPECT_LT(sm_.StoredBytes(), 2 * kVersion);
  // Keys deleted, then compacted away: nothing of them is left.
  sm_.SetHistoryLimits(1000, 1 << 20);
  const size_t before = sm_.StoredBytes();
  for (int i = 0; i < 50; ++i) Put("d" + std::to_string(i), value);
  Del("d", "e");
  Put("k", value);
  EXPECT_GT(sm_.StoredBytes(), before + 50 * 1000);
  Command compact;
  compact.set_op(Command::COMPACT);
  compact.set_compact_revision(sm_.Revision());
  ASSERT_FALSE(Run(compact).rejected());
  EXPECT_LT(sm_.StoredBytes(), 2 * kVersion);
  EXPECT_EQ(sm_.Size(), 1u);
}

TEST_F(KvApiStateTest, ReadEventsKeepsRevisionsWholeAndFiltersByRange) {
  Command batch;
  batch.set_op(Command::BATCH);
  for (const char* k : {"w/a", "w/b", "other"}) {
    Command* op = batch.add_ops();
    op->set_op(Command::PUT);
    op->set_key(k);
    op->set_value("v");
  }
  Run(batch);            // 1: three events
  Put("w/c", "v");       // 2
  Del("w/a");            // 3
  KvStateMachine::EventBatch b;
  // A byte limit of 1 still returns whole revisions, one at a time.
  ASSERT_TRUE(sm_.ReadEvents("w/", "w0", 1, 1, &b).ok());
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.next_revision, 2);
  ASSERT_TRUE(sm_.ReadEvents("w/", "w0", 2, 1 << 20, &b).ok());
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_FALSE(b.events[0].is_delete);
  EXPECT_TRUE(b.events[1].is_delete);
  EXPECT_EQ(b.events[1].kv.mod_revision, 3);
  EXPECT_EQ(b.next_revision, 4);
  // From the future: nothing yet, and the position is kept.
  ASSERT_TRUE(sm_.ReadEvents("w/", "w0", 9, 1 << 20, &b).ok());
  EXPECT_TRUE(b.events.empty());
  EXPECT_EQ(b.next_revision, 9);
}

TEST_F(KvApiStateTest, DeleteRangeCountsAndReturnsWhatItDeleted) {
  for (const char* k : {"d/1", "d/2", "e"}) Put(k, "v");
  ApplyResult r = Del("d/", "d0", true);
  EXPECT_EQ(r.answer.deleted(), 2);
  ASSERT_EQ(r.answer.prev_kvs_size(), 2);
  EXPECT_EQ(r.answer.prev_kvs(1).key(), "d/2");
  EXPECT_EQ(r.answer.revision(), 4);  // one revision for both
  EXPECT_EQ(sm_.Size(), 1u);
  EXPECT_EQ(Del("d/", "d0").answer.deleted(), 0);
}

using testing_txn::Cmp;
using testing_txn::DelOp;
using testing_txn::GetOp;
using testing_txn::PutOp;
using testing_txn::Txn;

TEST_F(KvApiStateTest, TransactionsCompareThenRunOneListAtomicallyAtOneRevision) {
  Put("k", "v1");  // 1
  auto run = [&](const TxnRequest& t) {
    Command c;
    c.set_op(Command::TXN);
    *c.mutable_txn() = t;
    return Run(c);
  };
  // Value equal: success list; reads see the writes before them.
  ApplyResult r = run(Txn({Cmp(Compare::VALUE, Compare::EQUAL, "k", 0, "v1")},
                          {PutOp("k", "v2"), PutOp("j", "x"), GetOp("j")}, {PutOp("k", "failed")}));
  ASSERT_FALSE(r.rejected());
  EXPECT_TRUE(r.answer.txn().succeeded());
  EXPECT_EQ(r.answer.revision(), 2);
  ASSERT_EQ(r.answer.txn().responses_size(), 3);
  EXPECT_EQ(r.answer.txn().responses(2).response_range().kvs(0).value(), "x");
  EXPECT_EQ(sm_.GetRecord("k")->mod_revision, 2);
  EXPECT_EQ(sm_.GetRecord("j")->mod_revision, 2);
  // Every target and operator.
  struct Case {
    Compare c;
    bool holds;
  } cases[] = {
      {Cmp(Compare::VALUE, Compare::NOT_EQUAL, "k", 0, "v1"), true},
      {Cmp(Compare::VALUE, Compare::GREATER, "k", 0, "v1"), true},
      {Cmp(Compare::VALUE, Compare::LESS, "k", 0, "v3"), true},
      {Cmp(Compare::VALUE, Compare::EQUAL, "absent", 0, ""), false},
      {Cmp(Compare::VALUE, Compare::NOT_EQUAL, "absent", 0, "x"), false},
      {Cmp(Compare::VERSION, Compare::EQUAL, "k", 2), true},
      {Cmp(Compare::VERSION, Compare::EQUAL, "absent", 0), true},
      {Cmp(Compare::CREATE, Compare::EQUAL, "k", 1), true},
      {Cmp(Compare::CREATE, Compare::EQUAL, "absent", 0), true},
      {Cmp(Compare::MOD, Compare::GREATER, "k", 1), true},
      {Cmp(Compare::MOD, Compare::LESS, "k", 2), false},
      {Cmp(Compare::LEASE, Compare::EQUAL, "k", 0), true},
  };
  for (const Case& tc : cases) {
    ApplyResult got = run(Txn({tc.c}, {GetOp("k")}, {}));
    EXPECT_EQ(got.answer.txn().succeeded(), tc.holds) << tc.c.ShortDebugString();
  }
  // A failed compare runs the failure list; a read-only outcome changes no revision.
  const int64_t before = sm_.Revision();
  r = run(Txn({Cmp(Compare::VERSION, Compare::EQUAL, "k", 99)}, {PutOp("k", "no")}, {GetOp("k")}));
  EXPECT_FALSE(r.answer.txn().succeeded());
  EXPECT_EQ(sm_.Revision(), before);
  EXPECT_EQ(sm_.Get("k"), "v2");
  // The same transaction evaluated as a read gives the same answer.
  TxnResponse read;
  sm_.ReadTxn(Txn({Cmp(Compare::VALUE, Compare::EQUAL, "k", 0, "v2")}, {GetOp("j")}, {}), &read);
  EXPECT_TRUE(read.succeeded());
  EXPECT_EQ(read.responses(0).response_range().kvs(0).value(), "x");
  // A delete in a transaction.
  r = run(Txn({}, {DelOp("j")}, {}));
  EXPECT_EQ(r.answer.txn().responses(0).response_delete_range().deleted(), 1);
}

TEST_F(KvApiStateTest, LeasesAttachKeysAndRevokingDeletesThemAtOneRevision) {
  ApplyResult g = Grant(10);
  ASSERT_FALSE(g.rejected()) << g.answer.reject_message();
  const int64_t id = g.answer.lease_id();
  EXPECT_EQ(id, static_cast<int64_t>(index_));  // the grant's index
  EXPECT_EQ(g.answer.lease_ttl(), 10);
  EXPECT_EQ(Grant(5, id).Rejection().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(Grant(5, 777).answer.lease_id(), 777);
  Put("l/1", "v", id);
  Put("l/2", "v", id);
  Put("l/3", "v", 777);
  Put("free", "v");
  int64_t ttl = 0;
  std::vector<std::string> keys;
  ASSERT_TRUE(sm_.GetLease(id, &ttl, &keys));
  EXPECT_EQ(keys, (std::vector<std::string>{"l/1", "l/2"}));
  // Moving a key to no lease detaches it.
  Put("l/2", "v2");
  ASSERT_TRUE(sm_.GetLease(id, &ttl, &keys));
  EXPECT_EQ(keys, (std::vector<std::string>{"l/1"}));
  // A put on an unknown lease is refused whole.
  ApplyResult bad = Put("x", "v", 12345);
  EXPECT_EQ(bad.Rejection().code(), Status::Code::kNotFound);
  EXPECT_FALSE(sm_.Get("x").has_value());
  const int64_t rev = sm_.Revision();
  ApplyResult r = Revoke(id);
  EXPECT_FALSE(r.rejected());
  EXPECT_EQ(r.answer.revision(), rev + 1);
  EXPECT_FALSE(sm_.Get("l/1").has_value());
  EXPECT_TRUE(sm_.Get("l/2").has_value());
  EXPECT_TRUE(sm_.Get("l/3").has_value());
  EXPECT_FALSE(sm_.GetLease(id, &ttl, nullptr));
  EXPECT_EQ(Revoke(id).Rejection().code(), Status::Code::kNotFound);
  EXPECT_EQ(sm_.Leases().size(), 1u);
}

TEST_F(KvApiStateTest, SnapshotsKeepRevisionsVersionsAndLeases) {
  const int64_t id = Grant(30).answer.lease_id();
  Put("a", "1");
  Put("a", "2", id);
  Put("b", "3");
  Del("b");
  Put("c", "4", id);
  KvStateMachine copy;
  ASSERT_NO_FATAL_FAILURE(SnapshotInto(&copy));
  EXPECT_EQ(copy.Revision(), sm_.Revision());
  EXPECT_EQ(copy.CompactedRevision(), 0);  // the whole history came along (default window)
  const KvRecord a = *copy.GetRecord("a");
  EXPECT_EQ(a.create_revision, 1);
  EXPECT_EQ(a.mod_revision, 2);
  EXPECT_EQ(a.version, 2);
  EXPECT_EQ(a.lease, id);
  int64_t ttl = 0;
  std::vector<std::string> keys;
  ASSERT_TRUE(copy.GetLease(id, &ttl, &keys));
  EXPECT_EQ(ttl, 30);
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "c"}));
  // The copy goes on exactly as the original.
  Entry e;
  e.set_term(1);
  e.set_index(index_ + 1);
  e.set_type(ENTRY_COMMAND);
  Command rv;
  rv.set_op(Command::LEASE_REVOKE);
  rv.set_lease(id);
  e.set_data(rv.SerializeAsString());
  EXPECT_EQ(copy.Apply(e).answer.revision(), sm_.Apply(e).answer.revision());
  EXPECT_EQ(copy.Size(), 0u);
}

// As etcd: after Compact(C) reads at C and later are served, earlier ones
// are refused; a watch may start at C (its events are kept) but not before.
// A snapshot carries C, so a restored member refuses the same reads.
TEST_F(KvApiStateTest, CompactKeepsTheCompactRevisionsEventsAndASnapshotCarriesIt) {
  for (int i = 0; i < 5; ++i) Put("c/" + std::to_string(i % 2), "v" + std::to_string(i));  // 1..5
  Command compact;
  compact.set_op(Command::COMPACT);
  compact.set_compact_revision(3);
  ASSERT_FALSE(Run(compact).rejected());
  auto check = [](const KvStateMachine& sm, const char* who) {
    SCOPED_TRACE(who);
    EXPECT_EQ(sm.CompactRevision(), 3);
    RangeRequest at;
    at.set_key("c/0");
    at.set_revision(2);
    RangeResponse resp;
    EXPECT_EQ(sm.Range(at, &resp).reason(), Status::Reason::kCompacted);
    at.set_revision(3);
    ASSERT_TRUE(sm.Range(at, &resp).ok());
    ASSERT_EQ(resp.kvs_size(), 1);
    EXPECT_EQ(resp.kvs(0).value(), "v2");
    KvStateMachine::EventBatch b;
    EXPECT_EQ(sm.ReadEvents("c/", "c0", 2, 1 << 20, &b).reason(), Status::Reason::kCompacted);
    ASSERT_TRUE(sm.ReadEvents("c/", "c0", 3, 1 << 20, &b).ok());
    ASSERT_EQ(b.events.size(), 3u);
    EXPECT_EQ(b.events[0].revision, 3);
    EXPECT_EQ(b.events[0].kv.value, "v2");
  };
  check(sm_, "original");
  // Compacting at or below the compact revision again is refused.
  EXPECT_TRUE(Run(compact).rejected());
  sm_.SetSnapshotHistory(100);
  KvStateMachine copy;
  ASSERT_NO_FATAL_FAILURE(SnapshotInto(&copy));
  check(copy, "restored");
}

// A COMPACT is decided on the replicated state alone: a member whose local
// window dropped the revision already accepts it as one that keeps it does.
TEST_F(KvApiStateTest, CompactIsAcceptedAlikeWhateverTheLocalWindow) {
  KvStateMachine small_window;
  small_window.SetHistoryLimits(2, 1 << 20);
  uint64_t small_index = 0;
  for (int i = 0; i < 10; ++i) {
    Command put;
    put.set_op(Command::PUT);
    put.set_key("w");
    put.set_value(std::to_string(i));
    Run(put);
    testing_txn::ApplyNext(&small_window, &small_index, put);
  }
  ASSERT_GT(small_window.CompactedRevision(), 5);
  Command compact;
  compact.set_op(Command::COMPACT);
  compact.set_compact_revision(5);
  EXPECT_FALSE(Run(compact).rejected());
  EXPECT_FALSE(testing_txn::ApplyNext(&small_window, &small_index, compact).rejected());
  EXPECT_EQ(small_window.CompactRevision(), sm_.CompactRevision());
  EXPECT_TRUE(testing_txn::ApplyNext(&small_window, &small_index, compact).rejected());
}

// A snapshot carries the newest revisions of the history, so a restored
// member serves watches and past reads from before it.
TEST_F(KvApiStateTest, SnapshotsCarryTheNewestRevisionsOfTheHistory) {
  for (int i = 0; i < 6; ++i) Put("h/" + std::to_string(i % 2), "v" + std::to_string(i));  // 1..6
  Del("h/0");  // 7
  auto restored = [&](size_t history) {
    sm_.SetSnapshotHistory(history);
    auto copy = std::make_unique<KvStateMachine>();
    EXPECT_NO_FATAL_FAILURE(testing_txn::RestoreCopy(sm_, copy.get()));
    return copy;
  };
  auto events = [](const KvStateMachine& sm, int64_t from) {
    KvStateMachine::EventBatch b;
    EXPECT_TRUE(sm.ReadEvents("h/", "h0", from, 1 << 20, &b).ok());
    std::vector<std::string> out;
    for (const KvEvent& e : b.events) {
      out.push_back(std::to_string(e.revision) + (e.is_delete ? " DELETE " : " PUT ") + e.key + "=" +
                    e.kv.value + (e.has_prev ? " prev " + e.prev.value : ""));
    }
    return out;
  };
  auto three = restored(3);
  EXPECT_EQ(three->CompactedRevision(), 4);
  EXPECT_EQ(events(*three, 5), events(sm_, 5));
  EXPECT_EQ(events(*three, 5).size(), 3u);
  KvStateMachine::EventBatch b;
  EXPECT_EQ(three->ReadEvents("h/", "h0", 4, 1 << 20, &b).code(), Status::Code::kOutOfRange);
  // A read at a past revision inside the carried window.
  RangeRequest at5;
  at5.set_key("h/0");
  at5.set_revision(5);
  RangeResponse resp;
  ASSERT_TRUE(three->Range(at5, &resp).ok());
  ASSERT_EQ(resp.kvs_size(), 1);
  EXPECT_EQ(resp.kvs(0).value(), "v4");
  EXPECT_EQ(resp.kvs(0).mod_revision(), 5);

  auto none = restored(0);
  EXPECT_EQ(none->CompactedRevision(), sm_.Revision());
  auto all = restored(100);
  EXPECT_EQ(all->CompactedRevision(), 0);
  EXPECT_EQ(events(*all, 1), events(sm_, 1));
  // The restored history goes on like the original's.
  Put("h/1", "after");
  Entry e;
  e.set_term(1);
  e.set_index(index_);
  e.set_type(ENTRY_COMMAND);
  Command put;
  put.set_op(Command::PUT);
  put.set_key("h/1");
  put.set_value("after");
  e.set_data(put.SerializeAsString());
  all->Apply(e);
  EXPECT_EQ(events(*all, 1), events(sm_, 1));
}

}  // namespace
}  // namespace raftkv
