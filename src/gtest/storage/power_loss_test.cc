// Power loss at every step of every storage operation (FaultFs,
// src/gtest/common/fault_fs.h). Each test runs an operation once per file
// call it makes, cutting the power just before that call (and once after
// the last): the directory is then reduced to what a disk would hold, the
// storage is reopened, and the test checks what the operation promised --
// everything acknowledged (a sync or a save that returned) is there, and
// what is there is a state the code could have been in: never a torn mix
// of old and new, never a file that opens as damaged.
//
// The suites are named PowerLoss* so `ctest -R PowerLoss` runs them with the
// node and cluster ones (node_tests). scripts/powerloss_mutants.sh runs
// them with each kind of sync dropped (RAFTKV_FAULTFS_DROP_SYNC) and checks
// that every kind makes at least one fail.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/common/fault_fs.h"
#include "gtest/common/temp_dir.h"
#include "storage/hard_state_file.h"
#include "kv/kv_state_machine.h"
#include "storage/log_store.h"
#include "storage/snapshot_format.h"
#include "storage/snapshot_store.h"
#ifdef RAFTKV_HAVE_ROCKSDB
#include "storage/checkpoint_store.h"
#include "storage/rocksdb_backend.h"
#include "storage/rocksdb_store_dir.h"
#endif

namespace raftkv {
namespace {

using testing_util::FaultFs;
using testing_util::TempDir;

// What an action tells the check: the op counts at which its promises were
// made (a sync returned, a save returned), and the cut.
struct PowerRun {
  std::vector<uint64_t> acks;
  // Calls the action had made when the power was cut (nullopt: the cut came
  // after the action ended, so every ack holds).
  std::optional<uint64_t> cut_at;
  // Whether promise i was made before the cut.
  bool Acked(size_t i) const { return i < acks.size() && (!cut_at || acks[i] <= *cut_at); }
};

// Runs `setup` and then `action` on a fresh directory, once for every file
// call of the action with the power cut just before it, and once with the
// cut after the action; after each cut the directory holds only what was
// durable and `check` runs. `action` records promises with ack() and must
// close what it opened before returning.
void AtEveryStep(const std::function<void(const std::string& dir)>& setup,
                 const std::function<void(const std::string& dir, const std::function<void()>& ack)>& action,
                 const std::function<void(const std::string& dir, const PowerRun& run)>& check) {
  for (uint64_t k = 0;; ++k) {
    SCOPED_TRACE("power cut before file call " + std::to_string(k) + " of the action");
    TempDir dir("powerloss");
    FaultFs fs(dir.path());
    setup(dir.path());
    if (::testing::Test::HasFatalFailure()) return;
    const uint64_t base = fs.op_count();
    fs.CaptureBeforeOp(dir.path(), k);
    PowerRun run;
    action(dir.path(), [&] { run.acks.push_back(fs.op_count() - base); });
    if (::testing::Test::HasFatalFailure()) return;
    std::optional<FaultFs::Image> image = fs.TakeCaptured();
    const bool cut_inside = image.has_value();
    if (cut_inside) {
      run.cut_at = k;
    } else {
      image = fs.Capture(dir.path());
    }
    fs.Restore(*image);
    check(dir.path(), run);
    if (::testing::Test::HasFailure() || !cut_inside) return;
  }
}

Entry MakeEntry(uint64_t index, uint64_t term, size_t bytes = 40) {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(ENTRY_COMMAND);
  e.set_data("t" + std::to_string(term) + "-i" + std::to_string(index) + "-" +
             std::string(bytes, static_cast<char>('a' + index % 26)));
  return e;
}

std::vector<Entry> Entries(uint64_t first, uint64_t last, uint64_t term, size_t bytes = 40) {
  std::vector<Entry> out;
  for (uint64_t i = first; i <= last; ++i) out.push_back(MakeEntry(i, term, bytes));
  return out;
}

bool SameEntry(const Entry& a, const Entry& b) {
  return a.index() == b.index() && a.term() == b.term() && a.data() == b.data();
}

SegmentedLogOptions SmallSegments(uint64_t bytes) {
  SegmentedLogOptions o;
  o.max_segment_bytes = bytes;
  return o;
}

// Opens the log at dir/log; the recovered entries in *out.
void OpenLog(const std::string& dir, const SegmentedLogOptions& options,
             std::unique_ptr<SegmentedLog>* log, LogRecovery* recovery) {
  Status s = SegmentedLog::Open(dir + "/log", options, log, recovery);
  ASSERT_TRUE(s.ok()) << "the log does not open after the power cut: " << s.ToString();
}

void WriteLog(const std::string& dir, const SegmentedLogOptions& options,
              const std::vector<Entry>& entries) {
  std::unique_ptr<SegmentedLog> log;
  LogRecovery rec;
  OpenLog(dir, options, &log, &rec);
  ASSERT_TRUE(log->Append(entries).ok());
  ASSERT_TRUE(log->Sync().ok());
}

// The recovered entries hold `want` at their indexes (those present).
void ExpectIndexesHold(const LogRecovery& rec, const std::vector<Entry>& want, uint64_t from,
                       uint64_t to, const char* what) {
  for (uint64_t i = from; i <= to; ++i) {
    const Entry* got = nullptr;
    for (const Entry& e : rec.entries) {
      if (e.index() == i) got = &e;
    }
    const Entry* expected = nullptr;
    for (const Entry& e : want) {
      if (e.index() == i) expected = &e;
    }
    ASSERT_NE(expected, nullptr);
    ASSERT_NE(got, nullptr) << what << ": entry " << i << " is missing after the power cut";
    EXPECT_TRUE(SameEntry(*got, *expected)) << what << ": entry " << i << " differs";
  }
}

// ---------------------------------------------------------------------------
// The log
// ---------------------------------------------------------------------------

// Appends and syncs in three batches: each synced batch survives, what
// follows the last sync is a prefix of what was appended.
// The first 5 are written with `setup_options` (default: `options`).
void AppendScenario(const SegmentedLogOptions& options,
                    std::optional<SegmentedLogOptions> setup_options = std::nullopt) {
  const std::vector<Entry> all = Entries(1, 30, 1, 60);
  AtEveryStep(
      [&](const std::string& dir) {
        WriteLog(dir, setup_options.value_or(options),
                 std::vector<Entry>(all.begin(), all.begin() + 5));
      },
      [&](const std::string& dir, const std::function<void()>& ack) {
        std::unique_ptr<SegmentedLog> log;
        LogRecovery rec;
        OpenLog(dir, options, &log, &rec);
        ASSERT_TRUE(log->Append(std::vector<Entry>(all.begin() + 5, all.begin() + 9)).ok());
        ASSERT_TRUE(log->Sync().ok());
        ack();  // 1..9
        ASSERT_TRUE(log->Append(std::vector<Entry>(all.begin() + 9, all.begin() + 15)).ok());
        ASSERT_TRUE(log->Append(std::vector<Entry>(all.begin() + 15, all.begin() + 20)).ok());
        ASSERT_TRUE(log->Sync().ok());
        ack();  // 1..20
        ASSERT_TRUE(log->Append(std::vector<Entry>(all.begin() + 20, all.end())).ok());
        ASSERT_TRUE(log->Sync().ok());
        ack();  // 1..30
      },
      [&](const std::string& dir, const PowerRun& run) {
        std::unique_ptr<SegmentedLog> log;
        LogRecovery rec;
        OpenLog(dir, options, &log, &rec);
        ASSERT_FALSE(rec.entries.empty());
        EXPECT_EQ(rec.entries.front().index(), 1u);
        const uint64_t last = rec.entries.back().index();
        ExpectIndexesHold(rec, all, 1, last, "recovered log");
        uint64_t promised = 5;
        if (run.Acked(0)) promised = 9;
        if (run.Acked(1)) promised = 20;
        if (run.Acked(2)) promised = 30;
        EXPECT_GE(last, promised) << "a synced entry was lost";
        // The log goes on from where it recovered.
        ASSERT_TRUE(log->Append({MakeEntry(last + 1, 2)}).ok());
        ASSERT_TRUE(log->Sync().ok());
      });
}

TEST(PowerLossLog, AppendAndSyncAtEveryStep) { AppendScenario(SegmentedLogOptions()); }

// Segments of ~3 entries: appends rotate into new segment files (created,
// then the directory synced) at several points.
TEST(PowerLossLog, SegmentRotationAtEveryStep) { AppendScenario(SmallSegments(300)); }

// The first segment was preallocated for a larger segment size (a restart
// with a smaller one): the first append completes it, cutting its zeros
// (truncate, fsync) before the next segment file is created.
TEST(PowerLossLog, CuttingAPreallocatedSegmentAtEveryStep) {
  AppendScenario(SmallSegments(300), SegmentedLogOptions());
}

// A follower replaces a conflicting suffix (6..10 of term 1) by the new
// leader's entries (6..9 of term 2). Before the sync returns the log holds
// 1..5 and then a prefix of either suffix, never a mix: a mix would claim to
// match the new leader at an index where it holds the old entry.
TEST(PowerLossLog, TruncateSuffixAtEveryStep) {
  const SegmentedLogOptions options = SmallSegments(300);
  const std::vector<Entry> old_log = Entries(1, 10, 1, 60);
  std::vector<Entry> new_log(old_log.begin(), old_log.begin() + 5);
  for (const Entry& e : Entries(6, 9, 2, 60)) new_log.push_back(e);
  AtEveryStep([&](const std::string& dir) { WriteLog(dir, options, old_log); },
              [&](const std::string& dir, const std::function<void()>& ack) {
                std::unique_ptr<SegmentedLog> log;
                LogRecovery rec;
                OpenLog(dir, options, &log, &rec);
                ASSERT_TRUE(log->Append(std::vector<Entry>(new_log.begin() + 5, new_log.end())).ok());
                ASSERT_TRUE(log->Sync().ok());
                ack();
              },
              [&](const std::string& dir, const PowerRun& run) {
                std::unique_ptr<SegmentedLog> log;
                LogRecovery rec;
                OpenLog(dir, options, &log, &rec);
                ASSERT_GE(rec.entries.size(), 5u) << "entries below the conflict were lost";
                const uint64_t last = rec.entries.back().index();
                const bool is_new = last > 5 && rec.entries[5].term() == 2;
                ExpectIndexesHold(rec, is_new ? new_log : old_log, 1, last,
                                  is_new ? "new suffix" : "old suffix");
                if (run.Acked(0)) {
                  EXPECT_TRUE(is_new && last == 9) << "the synced new suffix was lost (last " << last
                                                   << ")";
                }
              });
}

// Compaction deletes whole segments below an index: the entries above it
// survive every cut, and the log still starts at or below that index + 1.
TEST(PowerLossLog, CompactPrefixAtEveryStep) {
  const SegmentedLogOptions options = SmallSegments(300);
  const std::vector<Entry> all = Entries(1, 40, 1, 60);
  AtEveryStep([&](const std::string& dir) { WriteLog(dir, options, all); },
              [&](const std::string& dir, const std::function<void()>& ack) {
                std::unique_ptr<SegmentedLog> log;
                LogRecovery rec;
                OpenLog(dir, options, &log, &rec);
                ASSERT_TRUE(log->CompactPrefix(25).ok());
                ack();
                ASSERT_TRUE(log->Append({MakeEntry(41, 1, 60)}).ok());
                ASSERT_TRUE(log->Sync().ok());
                ack();
              },
              [&](const std::string& dir, const PowerRun& run) {
                std::unique_ptr<SegmentedLog> log;
                LogRecovery rec;
                OpenLog(dir, options, &log, &rec);
                ASSERT_FALSE(rec.entries.empty());
                EXPECT_LE(rec.entries.front().index(), 26u);
                std::vector<Entry> want = all;
                want.push_back(MakeEntry(41, 1, 60));
                ExpectIndexesHold(rec, want, 26, run.Acked(1) ? 41 : 40, "after compaction");
                for (size_t i = 1; i < rec.entries.size(); ++i) {
                  ASSERT_EQ(rec.entries[i].index(), rec.entries[i - 1].index() + 1) << "gap";
                }
              });
}

// Reset (a follower installs a snapshot at 50): the log is either the old
// one, whole, or empty from 51 on; once Reset returned, the new one.
TEST(PowerLossLog, ResetAtEveryStep) {
  const SegmentedLogOptions options = SmallSegments(300);
  const std::vector<Entry> old_log = Entries(1, 10, 1, 60);
  AtEveryStep([&](const std::string& dir) { WriteLog(dir, options, old_log); },
              [&](const std::string& dir, const std::function<void()>& ack) {
                std::unique_ptr<SegmentedLog> log;
                LogRecovery rec;
                OpenLog(dir, options, &log, &rec);
                ASSERT_TRUE(log->Reset(51).ok());
                ack();
                ASSERT_TRUE(log->Append(Entries(51, 53, 3, 60)).ok());
                ASSERT_TRUE(log->Sync().ok());
                ack();
              },
              [&](const std::string& dir, const PowerRun& run) {
                std::unique_ptr<SegmentedLog> log;
                LogRecovery rec;
                OpenLog(dir, options, &log, &rec);
                const bool reset = rec.first_index == 51;
                if (run.Acked(0)) {
                  EXPECT_TRUE(reset) << "the reset was lost";
                }
                if (reset) {
                  if (run.Acked(1)) {
                    ASSERT_EQ(rec.entries.size(), 3u);
                    ExpectIndexesHold(rec, Entries(51, 53, 3, 60), 51, 53, "after the reset");
                  }
                  for (const Entry& e : rec.entries) EXPECT_GE(e.index(), 51u);
                } else {
                  EXPECT_EQ(rec.first_index, 1u);
                  ASSERT_EQ(rec.entries.size(), old_log.size()) << "the old log came back damaged";
                  ExpectIndexesHold(rec, old_log, 1, 10, "the old log");
                }
              });
}

// Membership-changing entries are log entries like the others: a
// configuration entry that was synced is recovered, with its bytes.
TEST(PowerLossLog, ConfigurationEntriesAtEveryStep) {
  const SegmentedLogOptions options = SmallSegments(300);
  std::vector<Entry> all = Entries(1, 4, 1, 40);
  for (uint64_t i = 5; i <= 8; ++i) {
    MembershipConfig config;
    for (uint64_t id = 1; id <= i - 2; ++id) {
      MemberConfig* m = config.add_members();
      m->set_id(id);
      m->set_address("10.0.0." + std::to_string(id) + ":7001");
      m->set_voter(id < i - 2);
    }
    Entry e;
    e.set_index(i);
    e.set_term(1);
    e.set_type(ENTRY_CONFIG);
    e.set_data(config.SerializeAsString());
    all.push_back(e);
  }
  AtEveryStep([&](const std::string& dir) {
                WriteLog(dir, options, std::vector<Entry>(all.begin(), all.begin() + 4));
              },
              [&](const std::string& dir, const std::function<void()>& ack) {
                std::unique_ptr<SegmentedLog> log;
                LogRecovery rec;
                OpenLog(dir, options, &log, &rec);
                for (size_t i = 4; i < all.size(); ++i) {
                  ASSERT_TRUE(log->Append({all[i]}).ok());
                  ASSERT_TRUE(log->Sync().ok());
                  ack();
                }
              },
              [&](const std::string& dir, const PowerRun& run) {
                std::unique_ptr<SegmentedLog> log;
                LogRecovery rec;
                OpenLog(dir, options, &log, &rec);
                ASSERT_FALSE(rec.entries.empty());
                uint64_t promised = 4;
                for (size_t i = 0; i < 4; ++i) {
                  if (run.Acked(i)) promised = 5 + i;
                }
                EXPECT_GE(rec.entries.back().index(), promised);
                ExpectIndexesHold(rec, all, 1, rec.entries.back().index(), "configuration entries");
                for (const Entry& e : rec.entries) {
                  if (e.type() != ENTRY_CONFIG) continue;
                  MembershipConfig config;
                  EXPECT_TRUE(config.ParseFromString(e.data())) << "entry " << e.index();
                }
              });
}

// ---------------------------------------------------------------------------
// The hard state
// ---------------------------------------------------------------------------

TEST(PowerLossHardState, SaveAtEveryStep) {
  AtEveryStep(
      [&](const std::string& dir) {
        HardStateFile f(dir + "/hardstate");
        ASSERT_TRUE(f.Save(HardState{3, 1}).ok());
      },
      [&](const std::string& dir, const std::function<void()>& ack) {
        HardStateFile f(dir + "/hardstate");
        ASSERT_TRUE(f.Save(HardState{4, 2}).ok());
        ack();
        ASSERT_TRUE(f.Save(HardState{5, 0}).ok());
        ack();
      },
      [&](const std::string& dir, const PowerRun& run) {
        HardStateFile f(dir + "/hardstate");
        HardState hs;
        Status s = f.Load(&hs);
        ASSERT_TRUE(s.ok()) << "the hard state does not load: " << s.ToString();
        if (run.Acked(1)) {
          EXPECT_EQ(hs, (HardState{5, 0}));
        } else if (run.Acked(0)) {
          EXPECT_TRUE(hs == (HardState{4, 2}) || hs == (HardState{5, 0}))
              << "term " << hs.term << " vote " << hs.vote;
        } else {
          EXPECT_TRUE(hs == (HardState{3, 1}) || hs == (HardState{4, 2}) || hs == (HardState{5, 0}))
              << "term " << hs.term << " vote " << hs.vote;
        }
      });
}

// The first save into a new directory: before it returns there may be no
// hard state at all (term 0), after it there must be.
TEST(PowerLossHardState, FirstSaveAtEveryStep) {
  AtEveryStep([&](const std::string& dir) {},
              [&](const std::string& dir, const std::function<void()>& ack) {
                HardStateFile f(dir + "/hardstate");
                ASSERT_TRUE(f.Save(HardState{1, 1}).ok());
                ack();
              },
              [&](const std::string& dir, const PowerRun& run) {
                HardStateFile f(dir + "/hardstate");
                HardState hs;
                Status s = f.Load(&hs);
                ASSERT_TRUE(s.ok()) << s.ToString();
                if (run.Acked(0)) {
EXPECT_EQ(hs, (HardState{1, 1}));
}
                EXPECT_TRUE(hs == (HardState{0, 0}) || hs == (HardState{1, 1}));
              });
}

// ---------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------

// A state machine with `keys` keys, applied up to index `keys`.
std::unique_ptr<KvStateMachine> StateWithKeys(uint64_t keys, uint64_t term) {
  auto sm = std::make_unique<KvStateMachine>();
  for (uint64_t i = 1; i <= keys; ++i) {
    Command cmd;
    cmd.set_op(Command::PUT);
    cmd.set_key("k" + std::to_string(i));
    cmd.set_value(std::string(100, static_cast<char>('a' + i % 26)));
    Entry e;
    e.set_index(i);
    e.set_term(term);
    e.set_type(ENTRY_COMMAND);
    e.set_data(cmd.SerializeAsString());
    sm->Apply(e);
  }
  return sm;
}

void WriteSnapshot(const std::string& dir, uint64_t keys, uint64_t term) {
  std::unique_ptr<SnapshotStore> store;
  ASSERT_TRUE(SnapshotStore::Open(dir + "/snap", &store).ok());
  SnapshotWriter writer(1024);
  StateWithKeys(keys, term)->Snapshot(&writer);
  SnapshotFileInfo info;
  Status s = store->Write(writer, &info);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// Loads the newest intact snapshot: its index (0: none). No file with a
// snapshot name may be damaged.
uint64_t LoadNewest(const std::string& dir) {
  std::unique_ptr<SnapshotStore> store;
  Status s = SnapshotStore::Open(dir + "/snap", &store);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return 0;
  KvStateMachine sm;
  SnapshotLoadResult result;
  s = store->LoadNewestValid(&sm, &result);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (const std::string& r : result.rejected) {
    ADD_FAILURE() << "a file with a snapshot name is damaged after the power cut: " << r;
  }
  if (!result.found) return 0;
  EXPECT_EQ(sm.Size(), result.meta.last_index) << "the snapshot lost keys";
  return result.meta.last_index;
}

// The check of an operation that replaces snapshot `before` by `after`: the
// newest intact snapshot is one of them, and `after` once it returned.
std::function<void(const std::string&, const PowerRun&)> BeforeOrAfter(uint64_t before,
                                                                          uint64_t after) {
  return [before, after](const std::string& dir, const PowerRun& run) {
    const uint64_t index = LoadNewest(dir);
    if (run.Acked(0)) {
      EXPECT_EQ(index, after) << "the snapshot was lost after the call returned";
    } else {
      EXPECT_TRUE(index == before || index == after) << index;
    }
  };
}

TEST(PowerLossSnapshot, WriteAtEveryStep) {
  AtEveryStep([&](const std::string& dir) { WriteSnapshot(dir, 20, 1); },
              [&](const std::string& dir, const std::function<void()>& ack) {
                WriteSnapshot(dir, 60, 2);
                ack();
              },
              BeforeOrAfter(20, 60));
}

// The first snapshot into a new directory (snap/ is created by the store).
TEST(PowerLossSnapshot, FirstWriteAtEveryStep) {
  AtEveryStep([&](const std::string& dir) {},
              [&](const std::string& dir, const std::function<void()>& ack) {
                WriteSnapshot(dir, 30, 1);
                ack();
              },
              BeforeOrAfter(0, 30));
}

// A follower receives the leader's snapshot file in chunks (InstallSnapshot).
TEST(PowerLossSnapshot, ReceiveAtEveryStep) {
  SnapshotWriter writer(512);
  StateWithKeys(50, 3)->Snapshot(&writer);
  const std::string bytes = EncodeSnapshotFile(writer);
  AtEveryStep([&](const std::string& dir) { WriteSnapshot(dir, 10, 1); },
              [&](const std::string& dir, const std::function<void()>& ack) {
                std::unique_ptr<SnapshotStore> store;
                ASSERT_TRUE(SnapshotStore::Open(dir + "/snap", &store).ok());
                std::unique_ptr<SnapshotReceiver> receiver;
                ASSERT_TRUE(store->BeginReceive(50, 3, &receiver).ok());
                for (size_t off = 0; off < bytes.size(); off += 700) {
                  ASSERT_TRUE(receiver->Append(off, std::string_view(bytes).substr(off, 700)).ok());
                }
                SnapshotFileInfo info;
                Status s = receiver->Finish(&info);
                ASSERT_TRUE(s.ok()) << s.ToString();
                ack();
              },
              BeforeOrAfter(10, 50));
}

// Pruning deletes the oldest files: the two newest survive every cut.
TEST(PowerLossSnapshot, PruneAtEveryStep) {
  AtEveryStep(
      [&](const std::string& dir) {
        WriteSnapshot(dir, 10, 1);
        WriteSnapshot(dir, 20, 1);
        WriteSnapshot(dir, 30, 2);
        WriteSnapshot(dir, 40, 2);
      },
      [&](const std::string& dir, const std::function<void()>& ack) {
        std::unique_ptr<SnapshotStore> store;
        ASSERT_TRUE(SnapshotStore::Open(dir + "/snap", &store).ok());
        ASSERT_TRUE(store->Prune(2).ok());
        ack();
      },
      [&](const std::string& dir, const PowerRun& run) {
        std::unique_ptr<SnapshotStore> store;
        ASSERT_TRUE(SnapshotStore::Open(dir + "/snap", &store).ok());
        std::vector<SnapshotFileInfo> files;
        ASSERT_TRUE(store->List(&files).ok());
        ASSERT_GE(files.size(), 2u);
        EXPECT_EQ(files[files.size() - 2].last_index, 30u);
        EXPECT_EQ(files.back().last_index, 40u);
        if (run.Acked(0)) {
EXPECT_EQ(files.size(), 2u);
}
        EXPECT_EQ(LoadNewest(dir), 40u);
      });
}

// FaultFs itself: what was not synced is gone, what was is kept.
TEST(PowerLossFaultFs, KeepsOnlyWhatWasSynced) {
  TempDir dir("faultfs");
  FaultFs fs(dir.path());
  fs.DropSyncs("");  // a test of the simulator, not of the server's syncs
  const std::string a = dir.Join("a");
  file::File f;
  ASSERT_TRUE(file::File::Open(a, file::OpenMode::kCreateTruncate, &f).ok());
  ASSERT_TRUE(f.WriteAt("hello", 5, 0).ok());
  ASSERT_TRUE(f.Sync().ok());
  // The file's data is durable, its name is not.
  FaultFs::Image image = fs.Capture(dir.path());
  EXPECT_EQ(image.files.count(a), 0u);
  ASSERT_TRUE(file::SyncDir(dir.path()).ok());
  ASSERT_TRUE(f.WriteAt(" world", 6, 5).ok());
  ASSERT_TRUE(f.WriteAt("J", 1, 0).ok());
  image = fs.Capture(dir.path());
  ASSERT_EQ(image.files.count(a), 1u);
  EXPECT_EQ(image.files[a], "hello");
  ASSERT_TRUE(f.Truncate(2).ok());
  ASSERT_TRUE(file::Rename(a, dir.Join("b")).ok());
  image = fs.Capture(dir.path());
  EXPECT_EQ(image.files[a], "hello");
  EXPECT_EQ(image.files.count(dir.Join("b")), 0u);
  ASSERT_TRUE(f.Sync().ok());
  ASSERT_TRUE(file::SyncDir(dir.path()).ok());
  image = fs.Capture(dir.path());
  EXPECT_EQ(image.files.count(a), 0u);
  EXPECT_EQ(image.files[dir.Join("b")], "Je");
  ASSERT_TRUE(file::Remove(dir.Join("b")).ok());
  ASSERT_TRUE(f.Close().ok());
  fs.PowerCut(dir.path());
  EXPECT_EQ(testing_util::ReadFileBytes(dir.Join("b")), "Je") << "an unsynced removal survived";
  ASSERT_TRUE(file::CreateDirs(dir.Join("x/y")).ok());
  fs.PowerCut(dir.path());
  EXPECT_FALSE(std::filesystem::exists(dir.Join("x"))) << "an unsynced directory survived";
}

// A hard link (RocksDB's checkpoints link SSTs, storage/rocksdb_fs.h) keeps
// its source's durable bytes, and survives only once its directory is synced.
TEST(PowerLossFaultFs, HardLinkIsANewNameForTheDurableBytes) {
  TempDir dir("faultfs");
  FaultFs fs(dir.path());
  fs.DropSyncs("");  // a test of the simulator, not of the server's syncs
  const std::string a = dir.Join("a");
  const std::string b = dir.Join("b");
  file::File f;
  ASSERT_TRUE(file::File::Open(a, file::OpenMode::kCreateTruncate, &f).ok());
  ASSERT_TRUE(f.WriteAt("synced", 6, 0).ok());
  ASSERT_TRUE(f.Sync().ok());
  ASSERT_TRUE(f.WriteAt("!", 1, 6).ok());
  ASSERT_TRUE(f.Close().ok());
  ASSERT_TRUE(file::SyncDir(dir.path()).ok());
  const auto link = [&] {
    std::error_code ec;
    std::filesystem::create_hard_link(a, b, ec);
    return ec ? Status::IOError(ec.message()) : Status::OK();
  };
  ASSERT_TRUE(fs.Link(a, b, link).ok());
  EXPECT_EQ(fs.Capture(dir.path()).files.count(b), 0u) << "an unsynced link survived";
  ASSERT_TRUE(file::SyncDir(dir.path()).ok());
  ASSERT_TRUE(file::Remove(a).ok());
  ASSERT_TRUE(file::SyncDir(dir.path()).ok());
  fs.PowerCut(dir.path());
  EXPECT_FALSE(std::filesystem::exists(a));
  EXPECT_EQ(testing_util::ReadFileBytes(b), "synced");
}

#ifdef RAFTKV_HAVE_ROCKSDB
// ---------------------------------------------------------------------------
// RocksDB (its file calls reach FaultFs through storage/rocksdb_fs.h)
// ---------------------------------------------------------------------------

std::map<std::string, std::string> Contents(const KvBackend& db) {
  std::map<std::string, std::string> out;
  std::unique_ptr<BackendIterator> it = db.View()->NewIterator("", "");
  for (it->Seek(""); it->Valid(); it->Next()) out.emplace(it->key(), it->value());
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

// Batch `i` of the scenario, also applied to *model: puts of new keys,
// overwrites, deletes and now and then a DeleteRange.
BackendBatch ScenarioBatch(int i, std::map<std::string, std::string>* model) {
  const auto key = [](int k) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "key%03d", k);
    return std::string(buf);
  };
  BackendBatch batch;
  for (int j = 0; j < 12; ++j) {
    const std::string k = key((i * 7 + j * 5) % 60);
    const std::string v = "batch" + std::to_string(i) + "-" + std::string(80, char('a' + j));
    batch.Put(k, v);
    (*model)[k] = v;
  }
  const std::string gone = key((i * 11) % 60);
  batch.Delete(gone);
  model->erase(gone);
  if (i % 4 == 3) {
    const std::string from = key(i % 50);
    const std::string to = key(i % 50 + 6);
    batch.DeleteRange(from, to);
    model->erase(model->lower_bound(from), model->lower_bound(to));
  }
  return batch;
}

// A database created and written in batches, with a Flush() after every
// three (five flushes: the fourth level-0 file starts a compaction in the
// background, so RocksDB also deletes files), cut before every file call
// from the creation on. After the cut it opens and holds exactly the
// contents at one Flush(): none older than the last that returned, none
// newer than the last that started (the memtables die with the power, and
// a flush is all or nothing).
TEST(PowerLossRocksDb, FlushAtEveryStep) {
  constexpr int kFlushes = 5;
  constexpr int kBatchesPerFlush = 3;
  std::vector<BackendBatch> batches;
  std::vector<std::map<std::string, std::string>> states(1);  // [f]: after f flushes
  std::map<std::string, std::string> model;
  for (int f = 0; f < kFlushes; ++f) {
    for (int b = 0; b < kBatchesPerFlush; ++b) {
      batches.push_back(ScenarioBatch(f * kBatchesPerFlush + b, &model));
    }
    states.push_back(model);
  }
  AtEveryStep(
      [](const std::string&) {},
      [&](const std::string& dir, const std::function<void()>& ack) {
        std::unique_ptr<RocksDbBackend> db;
        Status s = RocksDbBackend::Open(dir + "/db", RocksDbBackend::Options(), &db);
        ASSERT_TRUE(s.ok()) << s.ToString();
        for (int f = 0; f < kFlushes; ++f) {
          for (int b = 0; b < kBatchesPerFlush; ++b) {
            ASSERT_TRUE(db->Write(batches[f * kBatchesPerFlush + b]).ok());
          }
          ack();  // 2f: flush f+1 starts
          s = db->Flush();
          ASSERT_TRUE(s.ok()) << s.ToString();
          ack();  // 2f+1: flush f+1 returned
        }
      },
      [&](const std::string& dir, const PowerRun& run) {
        std::unique_ptr<RocksDbBackend> db;
        Status s = RocksDbBackend::Open(dir + "/db", RocksDbBackend::Options(), &db);
        ASSERT_TRUE(s.ok()) << "the database does not open after the power cut: " << s.ToString();
        int returned = 0;
        int started = 0;
        for (int f = 0; f < kFlushes; ++f) {
          if (run.Acked(2 * f)) started = f + 1;
          if (run.Acked(2 * f + 1)) returned = f + 1;
        }
        const std::map<std::string, std::string> got = Contents(*db);
        bool matched = false;
        for (int f = returned; f <= started && !matched; ++f) matched = got == states[f];
        EXPECT_TRUE(matched) << "the database holds " << got.size()
                             << " keys, not the contents at a flush from the last that returned ("
                             << returned << ") to the last that started (" << started << ")";
        // It goes on from there.
        BackendBatch more;
        more.Put("after", "the cut");
        ASSERT_TRUE(db->Write(more).ok());
        ASSERT_TRUE(db->Flush().ok());
      });
}

// A leader's checkpoint (outside the power-cut directory) at index 40,
// term 3, holding `*rows`; *dir is where it is.
void LeaderCheckpoint(const TempDir& leader, std::map<std::string, std::string>* rows, std::string* dir) {
  std::unique_ptr<RocksDbBackend> db;
  ASSERT_TRUE(RocksDbBackend::Open(leader.Join("db"), RocksDbBackend::Options(), &db).ok());
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(db->Write(ScenarioBatch(i, rows)).ok());
    if (i % 3 == 2) {
      ASSERT_TRUE(db->Flush().ok());  // several SST files
    }
  }
  std::unique_ptr<CheckpointStore> store;
  ASSERT_TRUE(CheckpointStore::Open(leader.Join("snap"), &store).ok());
  CheckpointInfo info;
  const Status s = store->Create(db.get(), "rocksdb",
                                 [](const std::string&, SnapshotMeta* meta) {
                                   meta->last_index = 40;
                                   meta->last_term = 3;
                                   return Status::OK();
                                 },
                                 &info);
  ASSERT_TRUE(s.ok()) << s.ToString();
  *dir = info.path;
}

// A follower receives the leader's checkpoint as one stream: after a cut
// it has either no checkpoint or the whole of it, sound; once Finish()
// returned, the whole of it.
TEST(PowerLossCheckpoint, ReceiveAtEveryStep) {
  TempDir leader("ckpt_leader");
  std::map<std::string, std::string> rows;
  std::string leader_dir;
  ASSERT_NO_FATAL_FAILURE(LeaderCheckpoint(leader, &rows, &leader_dir));
  std::unique_ptr<CheckpointStore> leader_store;
  ASSERT_TRUE(CheckpointStore::Open(leader.Join("snap"), &leader_store).ok());
  std::unique_ptr<CheckpointSource> source;
  ASSERT_TRUE(leader_store->OpenSource(40, 3, &source).ok());
  AtEveryStep(
      [](const std::string&) {},
      [&](const std::string& dir, const std::function<void()>& ack) {
        std::unique_ptr<CheckpointStore> store;
        ASSERT_TRUE(CheckpointStore::Open(dir + "/snap", &store).ok());
        std::unique_ptr<SnapshotSink> sink = store->BeginReceiveStream(40, 3, RocksDbBackend::VerifyDirectory);
        for (uint64_t offset = 0;;) {
          std::string chunk;
          bool last = false;
          ASSERT_TRUE(source->ReadChunk(offset, 3000, &chunk, &last).ok());
          ASSERT_TRUE(sink->Append(offset, chunk).ok());
          offset += chunk.size();
          if (last) break;
        }
        SnapshotFileInfo installed;
        const Status s = sink->Finish(&installed);
        ASSERT_TRUE(s.ok()) << s.ToString();
        ack();
      },
      [&](const std::string& dir, const PowerRun& run) {
        std::unique_ptr<CheckpointStore> store;
        ASSERT_TRUE(CheckpointStore::Open(dir + "/snap", &store).ok());
        std::vector<CheckpointInfo> kept;
        ASSERT_TRUE(store->List(&kept).ok());
        if (run.Acked(0)) {
          ASSERT_EQ(kept.size(), 1u) << "the received checkpoint was lost after Finish returned";
        }
        ASSERT_LE(kept.size(), 1u);
        if (kept.empty()) return;
        CheckpointContents contents;
        Status s = checkpoint::ReadManifest(kept[0].path, &contents);
        if (s.ok()) s = checkpoint::VerifyFiles(kept[0].path, contents);
        if (s.ok()) s = RocksDbBackend::VerifyDirectory(kept[0].path);
        ASSERT_TRUE(s.ok()) << "a checkpoint that is not whole survived the cut: " << s.ToString();
        std::unique_ptr<RocksDbBackend> db;
        RocksDbBackend::Options read_only;
        read_only.read_only = true;
        read_only.create_if_missing = false;
        ASSERT_TRUE(RocksDbBackend::Open(kept[0].path, read_only, &db).ok());
        EXPECT_EQ(Contents(*db), rows);
      });
}

// A follower makes a new store of a received checkpoint and commits it
// (KV_CURRENT): after a cut the data directory opens on the old store or on
// the whole new one; once the commit returned, on the new one.
TEST(PowerLossCheckpoint, InstallAtEveryStep) {
  TempDir leader("ckpt_leader");
  std::map<std::string, std::string> rows;
  std::string leader_dir;
  ASSERT_NO_FATAL_FAILURE(LeaderCheckpoint(leader, &rows, &leader_dir));
  const std::string name = CheckpointStore::DirName(40, 3);
  AtEveryStep(
      [&](const std::string& dir) {
        std::unique_ptr<RocksDbStoreDir> stores;
        std::unique_ptr<KvBackend> current;
        ASSERT_TRUE(RocksDbStoreDir::Open(dir, &stores, &current).ok());
        std::filesystem::create_directories(dir + "/snap");
        std::filesystem::copy(leader_dir, dir + "/snap/" + name);
      },
      [&](const std::string& dir, const std::function<void()>& ack) {
        std::unique_ptr<RocksDbStoreDir> stores;
        std::unique_ptr<KvBackend> current;
        ASSERT_TRUE(RocksDbStoreDir::Open(dir, &stores, &current).ok());
        std::unique_ptr<KvBackend> fresh;
        Status s = stores->CreateFromCheckpoint(dir + "/snap/" + name, 40, 3, &fresh);
        ASSERT_TRUE(s.ok()) << s.ToString();
        s = stores->Commit(40, 3);
        ASSERT_TRUE(s.ok()) << s.ToString();
        ack();
      },
      [&](const std::string& dir, const PowerRun& run) {
        std::unique_ptr<RocksDbStoreDir> stores;
        std::unique_ptr<KvBackend> current;
        const Status s = RocksDbStoreDir::Open(dir, &stores, &current);
        ASSERT_TRUE(s.ok()) << "the data directory does not open after the cut: " << s.ToString();
        if (stores->current() == RocksDbStoreDir::StoreName(40, 3)) {
          EXPECT_EQ(Contents(*current), rows) << "the new store is not whole";
        } else {
          EXPECT_FALSE(run.Acked(0)) << "the committed store was lost";
          EXPECT_EQ(stores->current(), "kv-0-0");
          EXPECT_TRUE(Contents(*current).empty());
        }
      });
}
#endif  // RAFTKV_HAVE_ROCKSDB

}  // namespace
}  // namespace raftkv
