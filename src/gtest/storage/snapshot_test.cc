// Snapshots: KvStateMachine::Snapshot()/Restore() round trips (including
// sessions and their saved results), decision equivalence of a restored copy,
// detection of torn and bit-flipped files, SnapshotStore fallback, pruning,
// and the raw-chunk transfer used later by InstallSnapshot.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifdef _WIN32
#include <windows.h>  // GetThreadTimes (CMake defines NOMINMAX, NOGDI)
#else
#include <time.h>
#endif

#include <glog/logging.h>
#include <gtest/gtest.h>

#include "gtest/common/full_disk.h"
#include "gtest/common/temp_dir.h"
#include "kv/kv_state_machine.h"
#include "storage/snapshot_format.h"
#include "storage/snapshot_store.h"

namespace raftkv {
namespace {

using testing_util::ReadFileBytes;
using testing_util::TempDir;
using testing_util::WriteFileBytes;

Entry CommandEntry(uint64_t index, uint64_t term, uint64_t time_ms, const Command& c) {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(ENTRY_COMMAND);
  e.set_cluster_time_ms(time_ms);
  e.set_data(c.SerializeAsString());
  return e;
}

Command Put(const std::string& key, const std::string& value, uint64_t client = 0,
            uint64_t seq = 0, uint64_t first_outstanding = 0) {
  Command c;
  c.set_op(Command::PUT);
  c.set_key(key);
  c.set_value(value);
  c.set_client_id(client);
  c.set_sequence(seq);
  c.set_first_outstanding(first_outstanding);
  return c;
}

Command OpenSession(uint64_t timeout_ms) {
  Command c;
  c.set_op(Command::OPEN_SESSION);
  c.set_session_timeout_ms(timeout_ms);
  return c;
}

// The whole state, as the bytes of a snapshot file: equal strings mean equal
// maps, sessions (saved results, expiry), cluster time, applied index/term.
std::string Encode(const KvStateMachine& sm, size_t chunk_bytes = snapshot_format::kChunkTargetBytes) {
  SnapshotWriter w(chunk_bytes);
  sm.Snapshot(&w);
  return EncodeSnapshotFile(w);
}

Status RestoreFromFile(const std::string& path, KvStateMachine* sm) {
  std::unique_ptr<SnapshotReader> reader;
  Status s = SnapshotReader::Open(path, &reader);
  if (!s.ok()) return s;
  return sm->Restore(reader.get());
}

std::string Describe(const ApplyResult& r) {
  return "ok=" + std::to_string(r.ok) + " existed=" + std::to_string(r.existed) +
         " swapped=" + std::to_string(r.swapped) + " found=" + std::to_string(r.found) +
         " current=" + r.current + " error=" + r.error +
         " session_error=" + std::to_string(static_cast<int>(r.session_error)) +
         " duplicate=" + std::to_string(r.duplicate) + " index=" + std::to_string(r.index) +
         " term=" + std::to_string(r.term) + " client_id=" + std::to_string(r.client_id) +
         " batch_existed=" + [&r] {
           std::string bits;
           for (bool e : r.batch_existed) bits += e ? '1' : '0';
           return bits;
         }();
}

// Writes the snapshot of `sm` into `store`.
SnapshotFileInfo WriteSnapshot(SnapshotStore* store, const KvStateMachine& sm,
                               const std::string& config = "") {
  SnapshotWriter w;
  sm.Snapshot(&w);
  w.meta().config = config;
  SnapshotFileInfo info;
  Status s = store->Write(w, &info);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return info;
}

// Generates a random but plausible committed log: sessions opened, used with
// new sequences, retries, stale sequences and advancing first_outstanding,
// closed, expired by cluster time; plain writes; CAS; NOOPs; junk commands.
class EntryGenerator {
 public:
  explicit EntryGenerator(uint32_t seed) : rng_(seed) {}

  Entry Next() {
    ++index_;
    if (Chance(2)) ++term_;
    time_ms_ += Uniform(0, 60);
    // Occasionally an entry stamped earlier than the last (a new leader's
    // clock): the state machine keeps the maximum.
    const uint64_t stamp = Chance(3) && time_ms_ > 100 ? time_ms_ - 100 : time_ms_;
    const int pick = static_cast<int>(Uniform(0, 99));
    if (pick < 8) {
      Entry e;
      e.set_index(index_);
      e.set_term(term_);
      e.set_type(ENTRY_NOOP);
      e.set_cluster_time_ms(stamp);
      return e;
    }
    if (pick < 10) {
      Entry e;
      e.set_index(index_);
      e.set_term(term_);
      e.set_type(ENTRY_COMMAND);
      e.set_cluster_time_ms(stamp);
      e.set_data(std::string("\xff\xff\xff", 3));  // does not parse
      return e;
    }
    if (pick < 16) {
      const uint64_t timeouts[] = {300, 1000, 5000, UINT64_MAX};
      sessions_.push_back({index_, 1, 1});
      return CommandEntry(index_, term_, stamp, OpenSession(timeouts[Uniform(0, 3)]));
    }
    if (pick < 18 && !sessions_.empty()) {
      Command c;
      c.set_op(Command::CLOSE_SESSION);
      c.set_client_id(sessions_[Uniform(0, sessions_.size() - 1)].id);
      return CommandEntry(index_, term_, stamp, c);
    }
    Command c;
    const int op = static_cast<int>(Uniform(0, 3));
    c.set_op(op == 0 ? Command::PUT : op == 1 ? Command::DELETE : op == 2 ? Command::CAS
                                                                          : Command::BATCH);
    if (c.op() == Command::BATCH) {
      for (uint64_t n = Uniform(1, 4); n > 0; --n) {
        Command* sub = c.add_ops();
        sub->set_op(Chance(70) ? Command::PUT : Command::DELETE);
        sub->set_key("k" + std::to_string(Uniform(0, 25)));
        if (sub->op() == Command::PUT) sub->set_value("b" + std::to_string(Uniform(0, 5)));
      }
    } else {
      c.set_key("k" + std::to_string(Uniform(0, 25)));
      c.set_value("v" + std::to_string(Uniform(0, 5)) + std::string(Uniform(0, 3), 'x'));
    }
    if (c.op() == Command::CAS) {
      c.set_has_expected(Chance(70));
      if (c.has_expected()) c.set_expected("v" + std::to_string(Uniform(0, 5)));
    }
    if (!sessions_.empty() && Chance(75)) {
      ClientView& s = sessions_[Uniform(0, sessions_.size() - 1)];
      c.set_client_id(Chance(3) ? s.id + 1000000 : s.id);  // sometimes unknown
      if (Chance(65) || s.next_seq == 1) {
        c.set_sequence(s.next_seq++);
      } else {
        // A retry of something recent, possibly already stale.
        const uint64_t low = s.first_outstanding > 3 ? s.first_outstanding - 3 : 1;
        c.set_sequence(Uniform(low, s.next_seq - 1));
      }
      if (Chance(40)) s.first_outstanding = Uniform(s.first_outstanding, s.next_seq);
      c.set_first_outstanding(s.first_outstanding);
    }
    return CommandEntry(index_, term_, stamp, c);
  }

 private:
  struct ClientView {
    uint64_t id;
    uint64_t next_seq;
    uint64_t first_outstanding;
  };
  uint64_t Uniform(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Chance(int percent) { return Uniform(0, 99) < static_cast<uint64_t>(percent); }

  std::mt19937_64 rng_;
  uint64_t index_ = 0;
  uint64_t term_ = 1;
  uint64_t time_ms_ = 0;
  std::vector<ClientView> sessions_;
};

// Collects glog messages of severity >= WARNING.
class CapturingSink : public google::LogSink {
 public:
  CapturingSink() { google::AddLogSink(this); }
  ~CapturingSink() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char* /*full_filename*/,
            const char* /*base_filename*/, int /*line*/,
            const google::LogMessageTime& /*time*/, const char* message,
            size_t message_len) override {
    if (severity < google::GLOG_WARNING) return;
    std::lock_guard<std::mutex> lock(mu_);
    messages_.emplace_back(message, message_len);
  }
  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> messages_;
};

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = SnapshotStore::Open(dir_.Join("snap"), &store_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // A small state: a few keys (one binary), two sessions with saved results
  // (one CAS result carrying a current value), cluster time, term 3.
  void BuildSmallState(KvStateMachine* sm) {
    uint64_t i = 0;
    auto apply = [&](const Command& c, uint64_t time) {
      return sm->Apply(CommandEntry(++i, 3, time, c));
    };
    apply(Put("a", "1"), 10);
    apply(Put(std::string("b\0b", 3), std::string("\x00\xff", 2)), 20);
    const uint64_t s1 = apply(OpenSession(5000), 30).client_id;
    const uint64_t s2 = apply(OpenSession(700), 40).client_id;
    apply(Put("c", "3", s1, 1, 1), 50);
    Command cas;
    cas.set_op(Command::CAS);
    cas.set_key("a");
    cas.set_has_expected(true);
    cas.set_expected("nope");
    cas.set_value("x");
    cas.set_client_id(s2);
    cas.set_sequence(1);
    cas.set_first_outstanding(1);
    apply(cas, 60);
    apply(Put("d", "", s2, 2, 1), 70);
    // A batch in session 3 (sequence 2): its saved result carries one
    // existed flag per op.
    Command batch;
    batch.set_op(Command::BATCH);
    batch.set_client_id(s1);
    batch.set_sequence(2);
    batch.set_first_outstanding(1);
    for (const char* key : {"a", "new", "c"}) {
      Command* op = batch.add_ops();
      op->set_op(std::string(key) == "c" ? Command::DELETE : Command::PUT);
      op->set_key(key);
      if (op->op() == Command::PUT) op->set_value("batched");
    }
    apply(batch, 75);
  }

  TempDir dir_{"snapshot"};
  std::unique_ptr<SnapshotStore> store_;
};

// ---- round trips ----

TEST_F(SnapshotTest, EmptyStateRoundTrips) {
  KvStateMachine original;
  SnapshotFileInfo info = WriteSnapshot(store_.get(), original);
  EXPECT_EQ(info.last_index, 0u);

  KvStateMachine restored;
  restored.Apply(CommandEntry(1, 1, 5, Put("gone", "x")));  // replaced by the restore
  SnapshotLoadResult result;
  Status s = store_->LoadNewestValid(&restored, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(result.found);
  EXPECT_TRUE(result.rejected.empty());
  EXPECT_EQ(restored.AppliedIndex(), 0u);
  EXPECT_EQ(restored.AppliedTerm(), 0u);
  EXPECT_EQ(restored.Size(), 0u);
  EXPECT_FALSE(restored.Get("gone").has_value());
  EXPECT_EQ(Encode(restored), Encode(original));
}

TEST_F(SnapshotTest, HundredThousandBinaryKeysRoundTrip) {
  std::mt19937_64 rng(7);
  auto random_bytes = [&rng](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xFF);
    return s;
  };
  KvStateMachine original;
  std::vector<std::pair<std::string, std::string>> written;
  for (uint64_t i = 1; i <= 100000; ++i) {
    std::string key = random_bytes(1 + rng() % 40);
    std::string value = random_bytes(rng() % 200);  // includes empty values
    original.Apply(CommandEntry(i, 1 + i / 30000, i, Put(key, value)));
    written.emplace_back(std::move(key), std::move(value));
  }
  SnapshotFileInfo info = WriteSnapshot(store_.get(), original, "config-blob\x01");
  EXPECT_EQ(info.last_index, 100000u);
  EXPECT_EQ(info.last_term, 1 + 100000u / 30000);

  KvStateMachine restored;
  SnapshotLoadResult result;
  ASSERT_TRUE(store_->LoadNewestValid(&restored, &result).ok());
  ASSERT_TRUE(result.found);
  EXPECT_EQ(result.meta.last_index, 100000u);
  EXPECT_EQ(result.meta.last_term, original.AppliedTerm());
  EXPECT_EQ(result.meta.cluster_time_ms, 100000u);
  EXPECT_EQ(result.meta.config, "config-blob\x01");
  EXPECT_EQ(restored.AppliedIndex(), original.AppliedIndex());
  EXPECT_EQ(restored.AppliedTerm(), original.AppliedTerm());
  EXPECT_EQ(restored.Size(), original.Size());
  // The last write of each key wins in both.
  for (const auto& [key, value] : written) {
    ASSERT_EQ(restored.Get(key), original.Get(key));
  }
  EXPECT_EQ(Encode(restored), Encode(original));
}

TEST_F(SnapshotTest, SessionsWithSavedResultsRoundTrip) {
  KvStateMachine original;
  BuildSmallState(&original);
  ASSERT_EQ(original.SessionCount(), 2u);
  WriteSnapshot(store_.get(), original);
  KvStateMachine restored;
  SnapshotLoadResult result;
  ASSERT_TRUE(store_->LoadNewestValid(&restored, &result).ok());
  ASSERT_TRUE(result.found);
  EXPECT_EQ(restored.SessionCount(), 2u);
  EXPECT_EQ(Encode(restored), Encode(original));

  // A retry of the failed CAS (session 4, sequence 1) gets the saved answer,
  // including the value the key had then, from both.
  Command cas;
  cas.set_op(Command::CAS);
  cas.set_key("a");
  cas.set_has_expected(true);
  cas.set_expected("nope");
  cas.set_value("x");
  cas.set_client_id(4);
  cas.set_sequence(1);
  cas.set_first_outstanding(1);
  const Entry retry = CommandEntry(9, 3, 80, cas);
  const ApplyResult a = original.Apply(retry);
  const ApplyResult b = restored.Apply(retry);
  EXPECT_TRUE(a.duplicate);
  EXPECT_FALSE(a.swapped);
  EXPECT_EQ(a.current, "1");
  EXPECT_EQ(a.index, 6u);
  EXPECT_EQ(Describe(b), Describe(a));
  // A retry of the batch (session 3, sequence 2) gets its per-op flags back
  // ("a" present, "new" absent, "c" present) from the restored copy too.
  Command batch;
  batch.set_op(Command::BATCH);
  batch.set_client_id(3);
  batch.set_sequence(2);
  batch.set_first_outstanding(1);
  const Entry batch_retry = CommandEntry(10, 3, 80, batch);
  const ApplyResult c = original.Apply(batch_retry);
  const ApplyResult d = restored.Apply(batch_retry);
  EXPECT_TRUE(c.duplicate);
  EXPECT_EQ(c.batch_existed, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(Describe(d), Describe(c));
  // Session 4 (timeout 700) expires at 80 + 700; an entry at 781 expires it
  // in both.
  const Entry late = CommandEntry(11, 3, 781, Put("z", "z", 4, 3, 1));
  EXPECT_EQ(Describe(restored.Apply(late)), Describe(original.Apply(late)));
  EXPECT_EQ(original.SessionCount(), 1u);
  EXPECT_EQ(Encode(restored), Encode(original));
}

// A restored copy decides every later entry exactly as the original does.
// The capture shares the map copy-on-write and the apply thread goes on
// while the image is encoded: the image must still be exactly the state at
// its applied index -- no later write, overwrite, delete or session change
// may leak into it. Checked against a state machine that applied only the
// entries up to that index.
TEST_F(SnapshotTest, ImageTakenWhileApplyGoesOnIsExactlyTheStateAtItsIndex) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    EntryGenerator gen(seed);
    std::vector<Entry> log;
    KvStateMachine sm;
    for (int i = 0; i < 20000; ++i) {
      log.push_back(gen.Next());
      sm.Apply(log.back());
    }
    std::atomic<bool> started{false};
    std::atomic<bool> captured{false};
    SnapshotWriter image;
    std::thread capture([&] {
      started = true;
      sm.Snapshot(&image);
      captured = true;
    });
    while (!started) std::this_thread::yield();
    // Keep changing the state (the generator overwrites and deletes the same
    // keys) while the capture runs, and a little more once it is done, so the
    // live state is always ahead of the image.
    while (!captured) {
      log.push_back(gen.Next());
      sm.Apply(log.back());
    }
    for (int extra = 0; extra < 1000; ++extra) {
      log.push_back(gen.Next());
      sm.Apply(log.back());
    }
    capture.join();
    const uint64_t at = image.meta().last_index;
    ASSERT_GE(at, 20000u);
    ASSERT_LT(at, sm.AppliedIndex());
    KvStateMachine reference;
    for (const Entry& e : log) {
      if (e.index() > at) break;
      reference.Apply(e);
    }
    EXPECT_EQ(EncodeSnapshotFile(image), Encode(reference));
  }
}

TEST_F(SnapshotTest, RestoredCopyMakesTheSameDecisions) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    EntryGenerator gen(seed);
    KvStateMachine original;
    const int prefix = 500 + static_cast<int>(seed) * 150;
    for (int i = 0; i < prefix; ++i) original.Apply(gen.Next());

    // Small chunks: the file has many DATA frames.
    SnapshotWriter w(seed % 2 == 0 ? 512 : snapshot_format::kChunkTargetBytes);
    original.Snapshot(&w);
    const std::string path = dir_.Join("equiv.snap");
    WriteFileBytes(path, EncodeSnapshotFile(w));
    KvStateMachine restored;
    Status s = RestoreFromFile(path, &restored);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(Encode(restored), Encode(original));
    ASSERT_EQ(restored.SessionCount(), original.SessionCount());

    int duplicates = 0, session_errors = 0;
    for (int i = 0; i < 3000; ++i) {
      const Entry e = gen.Next();
      const ApplyResult a = original.Apply(e);
      const ApplyResult b = restored.Apply(e);
      ASSERT_EQ(Describe(b), Describe(a)) << "entry " << e.index();
      duplicates += a.duplicate;
      session_errors += a.session_error != ApplyResult::SessionError::kNone;
    }
    EXPECT_GT(duplicates, 0) << "the suffix should exercise saved results";
    EXPECT_GT(session_errors, 0) << "the suffix should exercise session errors";
    for (int k = 0; k <= 25; ++k) {
      const std::string key = "k" + std::to_string(k);
      ASSERT_EQ(restored.Get(key), original.Get(key)) << key;
    }
    EXPECT_EQ(restored.Size(), original.Size());
    EXPECT_EQ(Encode(restored), Encode(original));
  }
}

// ---- damage ----

TEST_F(SnapshotTest, TornFileIsDetectedAtEveryOffset) {
  KvStateMachine sm;
  BuildSmallState(&sm);
  const std::string full = Encode(sm, /*chunk_bytes=*/40);  // several DATA frames
  const std::string path = dir_.Join("torn.snap");
  WriteFileBytes(path, full);
  {
    KvStateMachine check;
    ASSERT_TRUE(RestoreFromFile(path, &check).ok());
  }
  for (size_t len = 0; len < full.size(); ++len) {
    WriteFileBytes(path, full.substr(0, len));
    KvStateMachine target;
    target.Apply(CommandEntry(1, 1, 1, Put("keep", "me")));
    Status s = RestoreFromFile(path, &target);
    ASSERT_FALSE(s.ok()) << "truncated to " << len << " of " << full.size() << " bytes";
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
    // A failed restore leaves the state machine as it was.
    ASSERT_EQ(target.AppliedIndex(), 1u);
    ASSERT_EQ(target.Get("keep").value_or(""), "me");
  }
  // And bytes appended after the trailer.
  WriteFileBytes(path, full + std::string(1, '\0'));
  KvStateMachine target;
  EXPECT_TRUE(RestoreFromFile(path, &target).IsCorruption());
}

TEST_F(SnapshotTest, EveryBitFlipInASmallFileIsDetected) {
  KvStateMachine sm;
  BuildSmallState(&sm);
  const std::string full = Encode(sm, /*chunk_bytes=*/64);
  const std::string path = dir_.Join("flip.snap");
  for (size_t byte = 0; byte < full.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = full;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      WriteFileBytes(path, damaged);
      KvStateMachine target;
      Status s = RestoreFromFile(path, &target);
      ASSERT_FALSE(s.ok()) << "flip of bit " << bit << " of byte " << byte;
      ASSERT_EQ(target.AppliedIndex(), 0u);
    }
  }
}

TEST_F(SnapshotTest, RandomBitFlipsInALargerFileAreDetected) {
  KvStateMachine sm;
  for (uint64_t i = 1; i <= 20000; ++i) {
    sm.Apply(CommandEntry(i, 2, i, Put("key" + std::to_string(i), std::string(30, 'a' + i % 26))));
  }
  const std::string full = Encode(sm);
  const std::string path = dir_.Join("flips.snap");
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 150; ++trial) {
    std::string damaged = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % damaged.size();
      damaged[at] = static_cast<char>(damaged[at] ^ (1 << (rng() % 8)));
    }
    WriteFileBytes(path, damaged);
    KvStateMachine target;
    Status s = RestoreFromFile(path, &target);
    ASSERT_FALSE(s.ok()) << "trial " << trial;
    ASSERT_EQ(target.Size(), 0u);
  }
}

// Frame boundaries of an encoded file: (offset, total frame size).
std::vector<std::pair<size_t, size_t>> Frames(const std::string& file) {
  std::vector<std::pair<size_t, size_t>> frames;
  size_t pos = snapshot_format::kPreambleBytes;
  while (pos + snapshot_format::kFrameHeaderBytes <= file.size()) {
    size_t len = 0;
    for (int i = 0; i < 4; ++i) len |= static_cast<size_t>(static_cast<uint8_t>(file[pos + 1 + i])) << (8 * i);
    frames.emplace_back(pos, snapshot_format::kFrameHeaderBytes + len);
    pos += snapshot_format::kFrameHeaderBytes + len;
  }
  return frames;
}

// Each frame is intact, the counts are right: only the whole-file checksum
// can tell that two chunks were swapped.
TEST_F(SnapshotTest, SwappedChunksAreCaughtByTheWholeFileChecksum) {
  KvStateMachine sm;
  BuildSmallState(&sm);
  const std::string full = Encode(sm, /*chunk_bytes=*/40);
  const auto frames = Frames(full);
  ASSERT_GE(frames.size(), 4u);  // header, >= 2 data, trailer
  const auto& [a_off, a_len] = frames[1];
  const auto& [b_off, b_len] = frames[2];
  const std::string swapped = full.substr(0, a_off) + full.substr(b_off, b_len) +
                              full.substr(a_off, a_len) + full.substr(b_off + b_len);
  ASSERT_EQ(swapped.size(), full.size());
  const std::string path = dir_.Join("swapped.snap");
  WriteFileBytes(path, swapped);
  KvStateMachine target;
  // Restore may notice the records' order first; either way it refuses.
  EXPECT_TRUE(RestoreFromFile(path, &target).IsCorruption());
  EXPECT_EQ(target.AppliedIndex(), 0u);
  // The format layer alone (what a received file is checked with) catches it
  // by the whole-file checksum.
  std::unique_ptr<SnapshotReader> reader;
  ASSERT_TRUE(SnapshotReader::Open(path, &reader).ok());
  Status s = reader->VerifyAll();
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("whole-file checksum"), std::string::npos) << s.ToString();

  // Likewise a trailer whose own frame checksum is right but whose
  // whole-file checksum is wrong.
  const size_t trailer = frames.back().first;
  std::string payload = full.substr(trailer + snapshot_format::kFrameHeaderBytes);
  uint64_t records = 0, data_frames = 0;
  for (int i = 0; i < 8; ++i) {
    records |= static_cast<uint64_t>(static_cast<uint8_t>(payload[i])) << (8 * i);
    data_frames |= static_cast<uint64_t>(static_cast<uint8_t>(payload[8 + i])) << (8 * i);
  }
  WriteFileBytes(path, full.substr(0, trailer) +
                           snapshot_format::TrailerFrame(records, data_frames, 12345));
  s = RestoreFromFile(path, &target);
  EXPECT_NE(s.message().find("whole-file checksum"), std::string::npos) << s.ToString();
  // And the unmodified trailer rebuilt the same way is accepted.
  const uint32_t crc = snapshot_format::Crc(0, std::string_view(full.data(), trailer));
  WriteFileBytes(path, full.substr(0, trailer) +
                           snapshot_format::TrailerFrame(records, data_frames, crc));
  EXPECT_TRUE(RestoreFromFile(path, &target).ok());
}

// ---- the store ----

TEST_F(SnapshotTest, NewestCorruptFallsBackToThePreviousWithALoggedReason) {
  KvStateMachine sm;
  for (uint64_t i = 1; i <= 10; ++i) sm.Apply(CommandEntry(i, 1, i, Put("k", std::to_string(i))));
  const SnapshotFileInfo older = WriteSnapshot(store_.get(), sm);
  for (uint64_t i = 11; i <= 20; ++i) sm.Apply(CommandEntry(i, 2, i, Put("k", std::to_string(i))));
  const SnapshotFileInfo newer = WriteSnapshot(store_.get(), sm);
  ASSERT_EQ(newer.last_index, 20u);

  std::string bytes = ReadFileBytes(newer.path);
  bytes[bytes.size() / 2] ^= 0x10;
  WriteFileBytes(newer.path, bytes);

  CapturingSink sink;
  KvStateMachine restored;
  SnapshotLoadResult result;
  ASSERT_TRUE(store_->LoadNewestValid(&restored, &result).ok());
  ASSERT_TRUE(result.found);
  EXPECT_EQ(result.path, older.path);
  EXPECT_EQ(result.meta.last_index, 10u);
  EXPECT_EQ(restored.AppliedIndex(), 10u);
  EXPECT_EQ(restored.AppliedTerm(), 1u);
  EXPECT_EQ(restored.Get("k").value_or(""), "10");
  ASSERT_EQ(result.rejected.size(), 1u);
  EXPECT_NE(result.rejected[0].find(newer.path), std::string::npos) << result.rejected[0];
  EXPECT_NE(result.rejected[0].find("checksum"), std::string::npos) << result.rejected[0];
  bool logged = false;
  for (const std::string& m : sink.messages()) {
    if (m.find(newer.path) != std::string::npos && m.find("checksum") != std::string::npos) {
      logged = true;
    }
  }
  EXPECT_TRUE(logged) << "the skipped file and the reason must be logged";
}

TEST_F(SnapshotTest, NoValidSnapshotIsACleanNone) {
  KvStateMachine sm;
  sm.Apply(CommandEntry(1, 1, 1, Put("mine", "1")));
  SnapshotLoadResult result;
  ASSERT_TRUE(store_->LoadNewestValid(&sm, &result).ok());
  EXPECT_FALSE(result.found);
  EXPECT_TRUE(result.rejected.empty());
  EXPECT_EQ(sm.AppliedIndex(), 1u);

  // Only a corrupt one (and files that are not snapshots at all).
  const SnapshotFileInfo info = WriteSnapshot(store_.get(), sm);
  WriteFileBytes(info.path, ReadFileBytes(info.path).substr(0, 30));
  WriteFileBytes(store_->dir() + "/notes.txt", "hello");
  WriteFileBytes(store_->dir() + "/snap-1-1.snap", "short name: ignored");
  KvStateMachine fresh;
  ASSERT_TRUE(store_->LoadNewestValid(&fresh, &result).ok());
  EXPECT_FALSE(result.found);
  EXPECT_EQ(result.rejected.size(), 1u);
  EXPECT_EQ(fresh.AppliedIndex(), 0u);
}

TEST_F(SnapshotTest, FileNamesRoundTripAndSort) {
  uint64_t index = 0, term = 0;
  const std::string name = SnapshotStore::FileName(1234, 7);
  EXPECT_EQ(name, "snap-00000000000000001234-00000000000000000007.snap");
  ASSERT_TRUE(SnapshotStore::ParseFileName(name, &index, &term));
  EXPECT_EQ(index, 1234u);
  EXPECT_EQ(term, 7u);
  ASSERT_TRUE(SnapshotStore::ParseFileName(SnapshotStore::FileName(UINT64_MAX, UINT64_MAX),
                                           &index, &term));
  EXPECT_EQ(index, UINT64_MAX);
  EXPECT_FALSE(SnapshotStore::ParseFileName(name + ".tmp", &index, &term));
  EXPECT_FALSE(SnapshotStore::ParseFileName("snap-99999999999999999999-00000000000000000007.snap",
                                            &index, &term));  // overflows
}

TEST_F(SnapshotTest, PruneKeepsTheNewest) {
  KvStateMachine sm;
  std::vector<SnapshotFileInfo> written;
  for (uint64_t i = 1; i <= 5; ++i) {
    // Indexes 1, 2, 3, 9, 15.
    sm.Apply(CommandEntry(sm.AppliedIndex() + 1, i, i, Put("k", "v")));
    if (i >= 4) {
      for (int j = 0; j < 5; ++j) {
        sm.Apply(CommandEntry(sm.AppliedIndex() + 1, i, i, Put("k", "v")));
      }
    }
    written.push_back(WriteSnapshot(store_.get(), sm));
  }
  EXPECT_TRUE(store_->Prune(0).ToString().find("Invalid") != std::string::npos);
  ASSERT_TRUE(store_->Prune(2).ok());
  std::vector<SnapshotFileInfo> left;
  ASSERT_TRUE(store_->List(&left).ok());
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].path, written[3].path);
  EXPECT_EQ(left[1].path, written[4].path);
  EXPECT_FALSE(std::filesystem::exists(written[0].path));
  ASSERT_TRUE(store_->Prune(1).ok());
  ASSERT_TRUE(store_->List(&left).ok());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].last_index, sm.AppliedIndex());
  ASSERT_TRUE(store_->Prune(3).ok());  // fewer than 3: nothing to do
  ASSERT_TRUE(store_->List(&left).ok());
  EXPECT_EQ(left.size(), 1u);
}

TEST_F(SnapshotTest, OpenRemovesUnfinishedTemporaryFiles) {
  const std::string dir = store_->dir();
  WriteFileBytes(dir + "/" + SnapshotStore::FileName(5, 1) + ".tmp", "partial");
  WriteFileBytes(dir + "/" + SnapshotStore::FileName(6, 1) + ".recv.tmp", "partial");
  std::unique_ptr<SnapshotStore> reopened;
  ASSERT_TRUE(SnapshotStore::Open(dir, &reopened).ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// ---- streamed writes ----

// A snapshot encoded straight into the file is the same file, byte for
// byte, as one encoded into memory first.
TEST_F(SnapshotTest, AStreamedSnapshotIsTheSameFile) {
  KvStateMachine sm;
  for (uint64_t i = 1; i <= 3000; ++i) {
    sm.Apply(CommandEntry(i, 2, 10 * i, Put("key" + std::to_string(i % 2500), std::string(300, 'a' + i % 26))));
  }
  SnapshotWriter whole;
  sm.Snapshot(&whole);
  whole.meta().config = "members";
  const std::string expected = EncodeSnapshotFile(whole);
  ASSERT_GT(whole.chunks().size(), 3u);  // several chunks spilled

  SnapshotMeta meta;
  const auto image = sm.CaptureSnapshot(&meta);
  meta.config = "members";
  SnapshotFileInfo info;
  Status s = store_->WriteStreamed(meta, [&](SnapshotWriter* w) { KvStateMachine::EncodeSnapshot(*image, w); }, &info);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(info.last_index, 3000u);
  EXPECT_EQ(ReadFileBytes(info.path), expected);
}

// A disk that refuses the file midway: the error, and no file left behind.
TEST_F(SnapshotTest, AStreamedSnapshotOnAFullDiskLeavesNothing) {
  KvStateMachine sm;
  for (uint64_t i = 1; i <= 2000; ++i) {
    sm.Apply(CommandEntry(i, 2, 10 * i, Put("key" + std::to_string(i), std::string(1000, 'v'))));
  }
  testing_util::FullDisk disk;
  disk.only_under = store_->dir();
  testing_util::ScopedInterposer installed(&disk);
  SnapshotMeta meta;
  const auto image = sm.CaptureSnapshot(&meta);
  SnapshotFileInfo info;
  const Status s = store_->WriteStreamed(
      meta,
      [&](SnapshotWriter* w) {
        disk.full = true;  // from the first chunk on
        KvStateMachine::EncodeSnapshot(*image, w);
      },
      &info);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.ToString();
  disk.full = false;
  std::vector<SnapshotFileInfo> files;
  ASSERT_TRUE(store_->List(&files).ok());
  EXPECT_TRUE(files.empty());
  EXPECT_TRUE(std::filesystem::is_empty(store_->dir())) << "a refused snapshot left a file";
}

// ---- raw-chunk transfer (for InstallSnapshot) ----

class SnapshotTransferTest : public SnapshotTest {
 protected:
  void SetUp() override {
    SnapshotTest::SetUp();
    ASSERT_TRUE(SnapshotStore::Open(dir_.Join("peer"), &peer_).ok());
    BuildSmallState(&sm_);
    for (uint64_t i = sm_.AppliedIndex() + 1; i <= 3000; ++i) {
      sm_.Apply(CommandEntry(i, 4, 100 + i, Put("key" + std::to_string(i % 1700), "value")));
    }
    source_info_ = WriteSnapshot(store_.get(), sm_, "members");
    ASSERT_TRUE(store_->OpenSource(source_info_, &source_).ok());
  }

  // Sends the whole file in chunks of `chunk` bytes.
  Status SendAll(SnapshotReceiver* receiver, size_t chunk) {
    bool last = false;
    while (!last) {
      std::string data;
      Status s = source_->ReadChunk(receiver->bytes_received(), chunk, &data, &last);
      if (s.ok()) s = receiver->Append(receiver->bytes_received(), data);
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  std::vector<std::string> PeerFiles() {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(peer_->dir())) {
      names.push_back(e.path().filename().string());
    }
    return names;
  }

  std::unique_ptr<SnapshotStore> peer_;
  KvStateMachine sm_;
  SnapshotFileInfo source_info_;
  std::unique_ptr<SnapshotFileSource> source_;
};

TEST_F(SnapshotTransferTest, ChunksReproduceAnIdenticalLoadableFile) {
  for (size_t chunk : {size_t{1000}, size_t{4096}, size_t{1} << 20}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    std::unique_ptr<SnapshotReceiver> receiver;
    ASSERT_TRUE(peer_->BeginReceive(source_info_.last_index, source_info_.last_term, &receiver).ok());
    ASSERT_TRUE(SendAll(receiver.get(), chunk).ok());
    EXPECT_EQ(receiver->bytes_received(), source_->size());
    SnapshotFileInfo installed;
    Status s = receiver->Finish(&installed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(installed.last_index, source_info_.last_index);
    EXPECT_EQ(ReadFileBytes(installed.path), ReadFileBytes(source_info_.path));

    KvStateMachine follower;
    SnapshotLoadResult result;
    ASSERT_TRUE(peer_->LoadNewestValid(&follower, &result).ok());
    ASSERT_TRUE(result.found);
    EXPECT_EQ(result.meta.config, "members");
    EXPECT_EQ(Encode(follower), Encode(sm_));
    EXPECT_EQ(PeerFiles().size(), 1u) << "no temporary file left";
  }
  // A chunk read at the end is empty and last; past the end is refused.
  std::string data;
  bool last = false;
  ASSERT_TRUE(source_->ReadChunk(source_->size(), 10, &data, &last).ok());
  EXPECT_TRUE(data.empty());
  EXPECT_TRUE(last);
  EXPECT_FALSE(source_->ReadChunk(source_->size() + 1, 10, &data, &last).ok());
}

TEST_F(SnapshotTransferTest, GapsAndOverlapsAreRefused) {
  std::unique_ptr<SnapshotReceiver> receiver;
  ASSERT_TRUE(peer_->BeginReceive(source_info_.last_index, source_info_.last_term, &receiver).ok());
  std::string first, second;
  bool last = false;
  ASSERT_TRUE(source_->ReadChunk(0, 1000, &first, &last).ok());
  ASSERT_TRUE(source_->ReadChunk(1000, 1000, &second, &last).ok());
  ASSERT_TRUE(receiver->Append(0, first).ok());
  Status gap = receiver->Append(2000, second);
  EXPECT_FALSE(gap.ok());
  EXPECT_NE(gap.message().find("gap"), std::string::npos) << gap.ToString();
  EXPECT_FALSE(receiver->Append(500, second).ok());  // overlap
  EXPECT_EQ(receiver->bytes_received(), 1000u) << "a refused chunk writes nothing";
  // The sender resumes at bytes_received() and the transfer completes.
  ASSERT_TRUE(SendAll(receiver.get(), 3000).ok());
  SnapshotFileInfo installed;
  ASSERT_TRUE(receiver->Finish(&installed).ok());
  EXPECT_EQ(ReadFileBytes(installed.path), ReadFileBytes(source_info_.path));
}

TEST_F(SnapshotTransferTest, ABadFinalChecksumIsRefusedAndNothingInstalled) {
  std::unique_ptr<SnapshotReceiver> receiver;
  ASSERT_TRUE(peer_->BeginReceive(source_info_.last_index, source_info_.last_term, &receiver).ok());
  std::string all;
  bool last = false;
  ASSERT_TRUE(source_->ReadChunk(0, source_->size(), &all, &last).ok());
  ASSERT_TRUE(last);
  // The last 4 bytes are the trailer's whole-file checksum.
  all[all.size() - 1] ^= 0x01;
  ASSERT_TRUE(receiver->Append(0, all.substr(0, 5000)).ok());
  ASSERT_TRUE(receiver->Append(5000, all.substr(5000)).ok());
  SnapshotFileInfo installed;
  Status s = receiver->Finish(&installed);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(PeerFiles().empty()) << "neither the snapshot nor its temporary file may remain";
  EXPECT_FALSE(receiver->Append(receiver->bytes_received(), "x").ok()) << "finished";
}

TEST_F(SnapshotTransferTest, TruncatedOrMislabelledTransfersAreRefused) {
  {  // Finished before the last chunk.
    std::unique_ptr<SnapshotReceiver> receiver;
    ASSERT_TRUE(peer_->BeginReceive(source_info_.last_index, source_info_.last_term, &receiver).ok());
    std::string part;
    bool last = false;
    ASSERT_TRUE(source_->ReadChunk(0, source_->size() - 10, &part, &last).ok());
    ASSERT_TRUE(receiver->Append(0, part).ok());
    SnapshotFileInfo installed;
    EXPECT_TRUE(receiver->Finish(&installed).IsCorruption());
  }
  {  // Announced as another index than the file holds.
    std::unique_ptr<SnapshotReceiver> receiver;
    ASSERT_TRUE(peer_->BeginReceive(source_info_.last_index + 1, source_info_.last_term, &receiver).ok());
    ASSERT_TRUE(SendAll(receiver.get(), 1 << 20).ok());
    SnapshotFileInfo installed;
    EXPECT_TRUE(receiver->Finish(&installed).IsCorruption());
  }
  {  // Abandoned: the destructor removes the temporary file.
    std::unique_ptr<SnapshotReceiver> receiver;
    ASSERT_TRUE(peer_->BeginReceive(source_info_.last_index, source_info_.last_term, &receiver).ok());
    ASSERT_TRUE(receiver->Append(0, "RKSN").ok());
  }
  EXPECT_TRUE(PeerFiles().empty());
}

// ---- timing (prints; asserts only correctness) ----

TEST_F(SnapshotTest, TimingOneMillionKeys) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count() / 1000.0;
  };
  constexpr uint64_t kKeys = 1000000;
  KvStateMachine sm;
  {
    char key[17];
    const std::string value(64, 'v');
    Command c;
    c.set_op(Command::PUT);
    c.set_value(value);
    Entry e;
    e.set_term(1);
    e.set_type(ENTRY_COMMAND);
    for (uint64_t i = 1; i <= kKeys; ++i) {
      std::snprintf(key, sizeof(key), "%016llx", static_cast<unsigned long long>(i * 0x9E3779B97F4A7C15ull));
      c.set_key(key, 16);
      e.set_index(i);
      c.SerializeToString(e.mutable_data());
      sm.Apply(e);
    }
  }
  ASSERT_EQ(sm.Size(), kKeys);

  // CPU time of this thread as well as wall time: on a busy machine the wall
  // time mostly measures waiting for a core.
  auto cpu_ms = [] {
#ifdef _WIN32
    FILETIME created, exited, kernel, user;  // 100 ns units
    if (!GetThreadTimes(GetCurrentThread(), &created, &exited, &kernel, &user)) return -1.0;
    auto to_ms = [](const FILETIME& t) {
      return static_cast<double>((static_cast<uint64_t>(t.dwHighDateTime) << 32) |
                                 t.dwLowDateTime) / 1e4;
    };
    return to_ms(kernel) + to_ms(user);
#else
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
#endif
  };
  const auto t0 = Clock::now();
  const double c0 = cpu_ms();
  SnapshotWriter image;
  sm.Snapshot(&image);  // the part that holds the state machine's lock
  const auto t1 = Clock::now();
  const double c1 = cpu_ms();
  SnapshotFileInfo info;
  ASSERT_TRUE(store_->Write(image, &info).ok());
  const auto t2 = Clock::now();
  const double c2 = cpu_ms();
  KvStateMachine restored;
  SnapshotLoadResult result;
  ASSERT_TRUE(store_->LoadNewestValid(&restored, &result).ok());
  const auto t3 = Clock::now();
  const double c3 = cpu_ms();
  ASSERT_TRUE(result.found);
  ASSERT_EQ(restored.Size(), kKeys);
  const uint64_t file_bytes = std::filesystem::file_size(info.path);
  std::printf(
      "[ snapshot ] 1M keys (16 B keys, 64 B values), wall / thread CPU:\n"
      "[ snapshot ]   capture under the lock  %8.1f / %8.1f ms (image %.1f MB in %zu chunks)\n"
      "[ snapshot ]   write + fsync + rename  %8.1f / %8.1f ms\n"
      "[ snapshot ]   load (verify + restore) %8.1f / %8.1f ms\n"
      "[ snapshot ]   file %llu bytes (%.1f MB)\n",
      ms(t1 - t0), c1 - c0, image.data_bytes() / 1e6, image.chunks().size(), ms(t2 - t1),
      c2 - c1, ms(t3 - t2), c3 - c2, static_cast<unsigned long long>(file_bytes),
      file_bytes / 1e6);
}

}  // namespace
}  // namespace raftkv
