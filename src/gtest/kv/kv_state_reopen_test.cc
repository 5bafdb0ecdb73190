// A state machine on a persistent store, reopened: random entries of every
// kind (keys, transactions, sessions with duplicates and dropped answers,
// leases, alarms, compaction, CONFIG entries, cluster time that expires
// sessions) are applied to it and to a twin in memory; the reopened state
// machine must equal the twin in every read and answer the next entries as
// it does. Over a store that keeps every write (the memory engine behind a
// persistent() front) and, when built, RocksDB, reopened after a clean
// close and after a crash that loses what was not flushed (the log then
// replays the rest).
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gtest/common/temp_dir.h"
#include "gtest/kv/kept_store.h"
#include "gtest/kv/store_options.h"
#include "gtest/kv/txn_ops.h"
#include "kv/kv_state_machine.h"
#include "kv/mvcc_keys.h"
#include "storage/memory_backend.h"
#ifdef RAFTKV_HAVE_ROCKSDB
#include "storage/rocksdb_backend.h"
#endif

namespace raftkv {
namespace {

using testing_txn::Cmp;
using testing_txn::DelOp;
using testing_txn::PutOp;
using testing_kv::KeptMemoryStore;

std::string Describe(const ApplyResult& r) {
  std::string out = "ok=" + std::to_string(r.ok) + " err=" + r.error + " existed=" + std::to_string(r.existed) +
                    " swapped=" + std::to_string(r.swapped) + " found=" + std::to_string(r.found) +
                    " current=" + r.current + " session_error=" + std::to_string(static_cast<int>(r.session_error)) +
                    " dup=" + std::to_string(r.duplicate) + " index=" + std::to_string(r.index) +
                    " client=" + std::to_string(r.client_id) + " batch=";
  for (bool b : r.batch_existed) out += b ? '1' : '0';
  return out + " answer={" + r.answer.ShortDebugString() + "}";
}

std::string Describe(const std::vector<KvEvent>& events) {
  std::string out;
  for (const KvEvent& e : events) {
    out += "@" + std::to_string(e.revision) + (e.is_delete ? " DEL " : " PUT ") + e.key + "=" + e.kv.value +
           " c" + std::to_string(e.kv.create_revision) + " v" + std::to_string(e.kv.version) + " l" +
           std::to_string(e.kv.lease) + (e.has_prev ? " prev=" + e.prev.value + " m" + std::to_string(e.prev.mod_revision) : "") +
           "\n";
  }
  return out;
}

// Random committed entries, the same for both state machines.
class EntrySource {
 public:
  explicit EntrySource(uint32_t seed) : rng_(seed) {}

  Entry Next(uint64_t index, int64_t revision) {
    Entry e;
    e.set_term(1 + index / 50);
    e.set_index(index);
    time_ms_ += Pick(300);
    e.set_cluster_time_ms(time_ms_);
    const uint32_t kind = Pick(100);
    if (kind < 4) {
      e.set_type(ENTRY_NOOP);
    } else if (kind < 7) {
      e.set_type(ENTRY_CONFIG);
      e.set_data("config at " + std::to_string(index));
    } else {
      e.set_type(ENTRY_COMMAND);
      Command c = RandomCommand(index, revision);
      e.set_data(c.SerializeAsString());
    }
    return e;
  }

 private:
  uint32_t Pick(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }
  std::string Key() { return std::string(1, static_cast<char>('a' + Pick(8))); }
  std::string Value() { return std::string(1 + Pick(40), static_cast<char>('0' + Pick(10))); }

  Command RandomCommand(uint64_t index, int64_t revision) {
    Command c;
    switch (Pick(14)) {
      case 0:
        c.set_op(Command::OPEN_SESSION);
        c.set_session_timeout_ms(2000 + Pick(20000));
        sessions_.push_back(index);
        return c;
      case 1:
        c.set_op(Command::CLOSE_SESSION);
        c.set_client_id(sessions_.empty() ? 1 : sessions_[Pick(sessions_.size())]);
        return c;
      case 2:
        c.set_op(Command::LEASE_GRANT);
        c.set_lease(1 + Pick(3));
        c.set_lease_ttl(10);
        break;
      case 3:
        c.set_op(Pick(3) == 0 ? Command::LEASE_REVOKE : Command::LEASE_GRANT);
        c.set_lease(1 + Pick(4));
        c.set_lease_ttl(20);
        break;
      case 4:
        c.set_op(Command::COMPACT);
        c.set_compact_revision(revision - Pick(8));
        break;
      case 5:
        c.set_op(Command::ALARM);
        // Raised now and then, cleared at the next alarm entry (it refuses
        // every put while it is raised).
        c.set_alarm_action(alarm_ || Pick(3) != 0 ? 2 : 1);
        alarm_ = c.alarm_action() == 1;
        c.set_alarm_type(1);
        c.set_alarm_member(7);
        break;
      case 6:
        c.set_op(Command::DELETE_RANGE);
        c.set_key(Key());
        c.set_range_end(Key());
        c.set_prev_kv(Pick(2) == 0);
        c.set_max_result_bytes(Pick(2) == 0 ? 0 : 200);
        break;
      case 7: {
        c.set_op(Command::BATCH);
        for (uint32_t i = 1 + Pick(4); i > 0; --i) {
          Command* op = c.add_ops();
          op->set_op(Pick(3) == 0 ? Command::DELETE : Command::PUT);
          op->set_key(Key());
          op->set_value(Value());
        }
        break;
      }
      case 8: {
        c.set_op(Command::TXN);
        const std::string k = Key();
        *c.mutable_txn() = testing_txn::Txn({Cmp(Compare::VERSION, Compare::EQUAL, k, 0)},
                                            {PutOp(k, Value()), PutOp(Key(), Value())}, {DelOp(Key(), Key())});
        c.set_max_result_bytes(1 << 20);
        break;
      }
      case 9:
        c.set_op(Command::CAS);
        c.set_key(Key());
        c.set_value(Value());
        c.set_has_expected(Pick(2) == 0);
        c.set_expected(Value());
        break;
      case 10:
        c.set_op(Command::DELETE);
        c.set_key(Key());
        break;
      default:
        c.set_op(Command::PUT);
        c.set_key(Key());
        c.set_value(Value());
        if (Pick(3) == 0) {  // keys only ever put with a lease (4 does not exist)
          c.set_key("lease" + std::to_string(Pick(6)));
          c.set_lease(1 + Pick(4));
        }
        c.set_prev_kv(Pick(2) == 0);
        break;
    }
    if (!sessions_.empty() && Pick(3) != 0) InSession(&c);
    return c;
  }

  // A new sequence, an old one again (a duplicate, or stale), bounds that
  // make the state machine drop saved answers.
  void InSession(Command* c) {
    const uint64_t id = sessions_[Pick(sessions_.size())];
    uint64_t& next = sequences_[id];
    c->set_client_id(id);
    c->set_sequence(Pick(4) == 0 && next > 0 ? Pick(next) : next++);
    if (Pick(5) == 0) c->set_first_outstanding(next > 3 ? next - 3 : 0);
    c->set_session_saved_bytes(Pick(2) == 0 ? 0 : 2000);
    c->set_saved_bytes_total(Pick(2) == 0 ? 0 : 6000);
  }

  std::mt19937 rng_;
  uint64_t time_ms_ = 0;
  bool alarm_ = false;
  std::vector<uint64_t> sessions_;
  std::map<uint64_t, uint64_t> sequences_;
};

class KvStateReopenTest : public testing::TestWithParam<std::string> {
 protected:
  // Where a restore creates its store: a new memory store, or a new RocksDB
  // database beside the current one; Commit makes it the one Open() opens.
  class Stores final : public KvBackendFactory {
   public:
    explicit Stores(KvStateReopenTest* test) : test_(test) {}
    Status Create(uint64_t index, uint64_t term, std::unique_ptr<KvBackend>* out) override {
      ++created;
      if (test_->GetParam() == "memory") {
        pending_ = std::make_shared<MemoryBackend>();
        *out = std::make_unique<KeptMemoryStore>(pending_);
        return Status::OK();
      }
#ifdef RAFTKV_HAVE_ROCKSDB
      std::unique_ptr<RocksDbBackend> db;
      Status s = RocksDbBackend::Open(test_->dir_.path() + "/" + Name(index, term), testing_kv::StoreOptions(), &db);
      if (s.ok()) *out = std::move(db);
      return s;
#else
      return Status::InvalidArgument("built without RocksDB");
#endif
    }
    Status Commit(uint64_t index, uint64_t term) override {
      ++committed;
      test_->mem_ = pending_;
      test_->db_name_ = Name(index, term);
      return Status::OK();
    }
    void RemoveStale() override {}
    int created = 0, committed = 0;

   private:
    static std::string Name(uint64_t index, uint64_t term) {
      return "db-" + std::to_string(index) + "-" + std::to_string(term);
    }
    KvStateReopenTest* const test_;
    std::shared_ptr<MemoryBackend> pending_;
  };

  KvBackend* store_ = nullptr;  // sm_'s store, as opened
  static constexpr size_t kWindowRevisions = 25;
  static constexpr size_t kWindowBytes = 4000;

  // Opens the state machine on the store (a new one the first time).
  void Open(bool crash_loses_unflushed = false) {
    sm_.reset();  // closes the store (RocksDB: flushes unless a crash is modelled)
    std::unique_ptr<KvBackend> store;
    if (GetParam() == "memory") {
      if (!mem_) mem_ = std::make_shared<MemoryBackend>();
      store = std::make_unique<KeptMemoryStore>(mem_);
    } else {
#ifdef RAFTKV_HAVE_ROCKSDB
      const RocksDbBackend::Options options = testing_kv::StoreOptions(!crash_loses_unflushed);
      std::unique_ptr<RocksDbBackend> db;
      const Status s = RocksDbBackend::Open(dir_.path() + "/" + db_name_, options, &db);
      ASSERT_TRUE(s.ok()) << s.ToString();
      rocksdb_ = db.get();
      store = std::move(db);
#endif
    }
    store_ = store.get();
    const Status s = KvStateMachine::Open(std::move(store), &sm_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    sm_->SetHistoryLimits(kWindowRevisions, kWindowBytes);
    sm_->SetBackendFactory(&stores_);
  }

  // The history rows the store holds at or below `revision`.
  size_t HistoryRowsThrough(int64_t revision) const {
    const std::string lower(1, mvcc::kHistoryPrefix);
    auto it = store_->View()->NewIterator(lower, mvcc::HistoryKey(revision + 1, 0));
    size_t rows = 0;
    for (it->Seek(lower); it->Valid(); it->Next()) ++rows;
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return rows;
  }

  // Applies the next random entry to both, comparing the answers.
  void Step() {
    const Entry e = source_.Next(twin_.AppliedIndex() + 1, twin_.Revision());
    entries_.push_back(e);
    const ApplyResult want = twin_.Apply(e);
    const ApplyResult got = sm_->Apply(e);
    ASSERT_EQ(Describe(got), Describe(want)) << "entry " << e.index();
  }

  // Applies `c` to both as the next entry; the answers must agree.
  ApplyResult Both(const Command& c) {
    Entry e;
    e.set_term(1);
    e.set_index(twin_.AppliedIndex() + 1);
    e.set_type(ENTRY_COMMAND);
    e.set_data(c.SerializeAsString());
    entries_.push_back(e);
    const ApplyResult want = twin_.Apply(e);
    EXPECT_EQ(Describe(sm_->Apply(e)), Describe(want)) << "entry " << e.index();
    return want;
  }
  ApplyResult SessionPut(uint64_t client, uint64_t sequence, uint64_t saved_bytes_total = 0) {
    Command c;
    c.set_op(Command::PUT);
    c.set_key("k" + std::to_string(sequence));
    c.set_value("v");
    c.set_client_id(client);
    c.set_sequence(sequence);
    c.set_saved_bytes_total(saved_bytes_total);
    return Both(c);
  }

  // Every read of sm_ equals the twin's.
  void ExpectSameState() {
    const KvStateMachine& a = *sm_;
    const KvStateMachine& b = twin_;
    ASSERT_EQ(a.AppliedIndex(), b.AppliedIndex());
    EXPECT_EQ(a.AppliedTerm(), b.AppliedTerm());
    EXPECT_EQ(a.AppliedConfig(), b.AppliedConfig());
    EXPECT_EQ(a.Revision(), b.Revision());
    EXPECT_EQ(a.CompactRevision(), b.CompactRevision());
    EXPECT_EQ(a.CompactedRevision(), b.CompactedRevision());
    EXPECT_EQ(a.Size(), b.Size());
    EXPECT_EQ(a.SessionCount(), b.SessionCount());
    EXPECT_EQ(a.SavedAnswerBytes(), b.SavedAnswerBytes());
    EXPECT_EQ(a.HistoryBytes(), b.HistoryBytes());
    EXPECT_EQ(a.StateBytes(), b.StateBytes());
    EXPECT_EQ(a.NoSpaceAlarm(), b.NoSpaceAlarm());
    EXPECT_EQ(a.Alarms().size(), b.Alarms().size());
    const std::vector<LeaseInfo> leases = b.LeaseInfos();
    seen_.sessions = std::max(seen_.sessions, b.SessionCount());
    seen_.saved_bytes = std::max(seen_.saved_bytes, b.SavedAnswerBytes());
    seen_.alarms = std::max(seen_.alarms, b.Alarms().size());
    ASSERT_EQ(a.LeaseInfos().size(), leases.size());
    for (size_t i = 0; i < leases.size(); ++i) {
      EXPECT_EQ(a.LeaseInfos()[i].id, leases[i].id);
      EXPECT_EQ(a.LeaseInfos()[i].granted_index, leases[i].granted_index);
      int64_t ttl_a = 0, ttl_b = 0;
      std::vector<std::string> keys_a, keys_b;
      ASSERT_TRUE(a.GetLease(leases[i].id, &ttl_a, &keys_a));
      ASSERT_TRUE(b.GetLease(leases[i].id, &ttl_b, &keys_b));
      EXPECT_EQ(ttl_a, ttl_b);
      EXPECT_EQ(keys_a, keys_b) << "lease " << leases[i].id;
      seen_.lease_keys = std::max(seen_.lease_keys, keys_b.size());
    }
    for (int64_t rev = std::max<int64_t>(1, b.CompactRevision()); rev <= b.Revision(); ++rev) {
      if (rev < b.CompactedRevision()) continue;
      RangeRequest req;
      req.set_key("");
      req.set_range_end(std::string(1, '\0'));
      req.set_revision(rev);
      RangeResponse ra, rb;
      const Status sa = a.Range(req, &ra), sb = b.Range(req, &rb);
      EXPECT_EQ(sa.ToString(), sb.ToString()) << "revision " << rev;
      EXPECT_EQ(ra.ShortDebugString(), rb.ShortDebugString()) << "revision " << rev;
    }
    KvStateMachine::EventBatch ea, eb;
    const int64_t from = b.CompactedRevision() + 1;
    const Status sa = a.ReadEvents("", std::string(1, '\0'), from, 1 << 30, &ea);
    const Status sb = b.ReadEvents("", std::string(1, '\0'), from, 1 << 30, &eb);
    EXPECT_EQ(sa.ToString(), sb.ToString());
    EXPECT_EQ(Describe(ea.events), Describe(eb.events));
  }

  testing_util::TempDir dir_;
  std::shared_ptr<MemoryBackend> mem_;
  std::string db_name_ = "db";  // RocksDB: the database Open() opens
  Stores stores_{this};
#ifdef RAFTKV_HAVE_ROCKSDB
  RocksDbBackend* rocksdb_ = nullptr;  // owned by sm_
#endif
  std::unique_ptr<KvStateMachine> sm_;
  KvStateMachine twin_;
  EntrySource source_{7};
  std::vector<Entry> entries_;
  // The most of each kind of row the checks compared.
  struct {
    size_t sessions = 0, saved_bytes = 0, lease_keys = 0, alarms = 0;
  } seen_;
};

TEST_P(KvStateReopenTest, AReopenedStoreIsTheStateItWasClosedAt) {
  twin_.SetHistoryLimits(kWindowRevisions, kWindowBytes);
  ASSERT_NO_FATAL_FAILURE(Open());
  int lagging = 0;  // rounds that closed with dropped revisions not yet swept
  for (int round = 0; round < 16; ++round) {
    for (int i = 0; i < 40; ++i) ASSERT_NO_FATAL_FAILURE(Step());
    if (HistoryRowsThrough(sm_->CompactedRevision()) > 0) ++lagging;
    ASSERT_NO_FATAL_FAILURE(Open());
    ASSERT_NO_FATAL_FAILURE(ExpectSameState()) << "after round " << round;
    // Opening sweeps what the window dropped.
    EXPECT_EQ(HistoryRowsThrough(sm_->CompactedRevision()), 0u) << "after round " << round;
  }
  EXPECT_GT(lagging, 0);
  // The checks compared every kind of state the rows keep.
  EXPECT_GT(seen_.sessions, 1u);
  EXPECT_GT(seen_.saved_bytes, 0u);
  EXPECT_GT(seen_.lease_keys, 1u);
  EXPECT_GT(seen_.alarms, 0u);
  EXPECT_GT(twin_.CompactRevision(), 0);
  EXPECT_FALSE(twin_.AppliedConfig().empty());
}

// Entries applied in passes (one store write per pass, each entry reading
// the rows of the ones before it in the pass) answer and leave the state
// exactly as entries applied one by one; passes longer than the longest
// are split.
TEST_P(KvStateReopenTest, EntriesAppliedInPassesAreAppliedAsOneByOne) {
  twin_.SetHistoryLimits(kWindowRevisions, kWindowBytes);
  ASSERT_NO_FATAL_FAILURE(Open());
  std::mt19937 rng(11);
  const size_t sizes[] = {1, 2, 7, 30, KvStateMachine::kMaxPassEntries + 9};
  for (int round = 0; round < 24; ++round) {
    const size_t n = sizes[std::uniform_int_distribution<size_t>(0, 4)(rng)];
    std::deque<Entry> pass;
    std::vector<std::string> want;
    for (size_t i = 0; i < n; ++i) {
      pass.push_back(source_.Next(twin_.AppliedIndex() + 1, twin_.Revision()));
      entries_.push_back(pass.back());
      want.push_back(Describe(twin_.Apply(pass.back())));
    }
    std::vector<ApplyResult> got;
    sm_->ApplyAll(pass, &got);
    ASSERT_EQ(got.size(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(Describe(got[i]), want[i]) << "entry " << pass[i].index();
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSameState()) << "after round " << round;
    if (round % 6 == 5) {
      ASSERT_NO_FATAL_FAILURE(Open());
      ASSERT_NO_FATAL_FAILURE(ExpectSameState()) << "reopened after round " << round;
    }
  }
  EXPECT_GT(twin_.CompactRevision(), 0);
}

// The bound on all saved answers drops one session's answers while another
// is applied: that session's row changes too, though it sent nothing.
TEST_P(KvStateReopenTest, AnAnswerAnotherSessionDroppedStaysDropped) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Command open;
  open.set_op(Command::OPEN_SESSION);
  open.set_session_timeout_ms(60000);
  const uint64_t a = Both(open).client_id;
  const uint64_t b = Both(open).client_id;
  for (uint64_t seq = 0; seq < 3; ++seq) SessionPut(a, seq);
  // One byte in all: every answer but the newest of each session goes.
  SessionPut(b, 0, /*saved_bytes_total=*/1);
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(ExpectSameState());
  EXPECT_EQ(SessionPut(a, 1).session_error, ApplyResult::SessionError::kStaleSequence);
  EXPECT_TRUE(SessionPut(a, 2).duplicate);
}

TEST_P(KvStateReopenTest, AnEmptyStoreOpensEmpty) {
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_EQ(sm_->AppliedIndex(), 0u);
  EXPECT_EQ(sm_->Revision(), 0);
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_EQ(sm_->AppliedIndex(), 0u);
}

// A snapshot file restored into a persistent state machine goes into a new
// store, made current once written: the state equals the snapshot's, goes
// on alike, and is what a reopen finds.
TEST_P(KvStateReopenTest, ARestoredSnapshotGoesIntoANewStoreThatReopens) {
  twin_.SetHistoryLimits(kWindowRevisions, kWindowBytes);
  ASSERT_NO_FATAL_FAILURE(Open());
  for (int i = 0; i < 5; ++i) ASSERT_NO_FATAL_FAILURE(Step());  // replaced whole
  KvStateMachine leader;
  leader.SetHistoryLimits(kWindowRevisions, kWindowBytes);
  for (const Entry& e : entries_) leader.Apply(e);
  EntrySource more(11);
  for (int i = 0; i < 300; ++i) {
    const Entry e = more.Next(leader.AppliedIndex() + 1, leader.Revision());
    leader.Apply(e);
    twin_.Apply(e);
    entries_.push_back(e);
  }
  const std::string path = dir_.path() + "/leader.snap";
  testing_txn::WriteSnapshotOf(leader, path);
  std::unique_ptr<SnapshotReader> reader;
  ASSERT_TRUE(SnapshotReader::Open(path, &reader).ok());
  const Status s = sm_->Restore(reader.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stores_.created, 1);
  EXPECT_EQ(stores_.committed, 1);
  ASSERT_NO_FATAL_FAILURE(ExpectSameState());
  for (int i = 0; i < 40; ++i) ASSERT_NO_FATAL_FAILURE(Step());
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(ExpectSameState());
}

TEST_P(KvStateReopenTest, ASnapshotFileIsRefusedWithoutAFactory) {
  ASSERT_NO_FATAL_FAILURE(Open());
  sm_->SetBackendFactory(nullptr);
  KvStateMachine empty;
  const std::string path = dir_.path() + "/snap";
  testing_txn::WriteSnapshotOf(empty, path);
  std::unique_ptr<SnapshotReader> reader;
  ASSERT_TRUE(SnapshotReader::Open(path, &reader).ok());
  const Status s = sm_->Restore(reader.get());
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s;
}

#ifdef RAFTKV_HAVE_ROCKSDB
// A crash loses what was not flushed: the store opens at the last flush,
// and replaying the log from there gives the state the twin has.
// Only RocksDB loses unflushed writes.
class KvStateCrashTest : public KvStateReopenTest {};

TEST_P(KvStateCrashTest, AfterACrashTheLogReplaysWhatTheStoreLost) {
  twin_.SetHistoryLimits(kWindowRevisions, kWindowBytes);
  ASSERT_NO_FATAL_FAILURE(Open(/*crash_loses_unflushed=*/true));
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 30; ++i) ASSERT_NO_FATAL_FAILURE(Step());
    ASSERT_TRUE(rocksdb_->Flush().ok());
    const uint64_t flushed = twin_.AppliedIndex();
    for (int i = 0; i < 20; ++i) ASSERT_NO_FATAL_FAILURE(Step());
    ASSERT_NO_FATAL_FAILURE(Open(/*crash_loses_unflushed=*/true));
    ASSERT_EQ(sm_->AppliedIndex(), flushed) << "round " << round;
    for (uint64_t i = flushed; i < entries_.size(); ++i) sm_->Apply(entries_[i]);
    ASSERT_NO_FATAL_FAILURE(ExpectSameState()) << "after round " << round;
  }
}
#endif

#ifdef RAFTKV_HAVE_ROCKSDB
INSTANTIATE_TEST_SUITE_P(Engines, KvStateReopenTest, testing::Values("memory", "rocksdb"));
INSTANTIATE_TEST_SUITE_P(Engines, KvStateCrashTest, testing::Values("rocksdb"));
#else
INSTANTIATE_TEST_SUITE_P(Engines, KvStateReopenTest, testing::Values("memory"));
#endif

}  // namespace
}  // namespace raftkv
