// Crash durability of real raftkv-server processes:
//
//  * CrashDurability.RandomKillsDuringWriteStream: SIGKILL one member (or two
//    at once: the cluster loses its quorum) at random points of a concurrent
//    write stream, many times; after each restart the member must recover
//    its log cleanly (no Corruption; a torn tail, if any, reported), and in
//    the end every acknowledged write must be readable, linearizably and from
//    every member's own state.
//  * CrashDurability.KillDuringFsyncWindowAllMembers: SIGKILL *every* member
//    at once in the middle of a write burst (no replica survives), several
//    times. Before the restart some members also get a torn record written
//    after the last record of their last segment (over its preallocated
//    zeros) -- what a crash in the middle of a write leaves (SIGKILL alone
//    practically never does: the kernel completes a write() it has started).
//    Recovery must cut exactly those bytes, report it, and lose no
//    acknowledged write.
//  * CrashDurability.BitFlipsAreRefused: single-byte damage anywhere in a
//    stopped follower's log segments or hard state file. The server must
//    refuse to start with a message naming the file and the offset of the
//    damaged record; only damage to the very last record of the log (which
//    looks exactly like a torn write) may instead be cut off and reported,
//    unless the on-disk store applied it (it was synced: refused). In no case
//    may it serve a value that was not written. Over both engines.
//
// The existing tests of failover_test.cc (CrashRecoveryLoop,
// LeaderCrashLosesNoAcknowledgedWrite) kill one member a few times and check
// the data at the end; storage_recovery_test.cc covers one hand-picked damage
// of each kind. These go further: many more crashes, crashes of two or all
// members, segment rollover during the crashes (small --segment_bytes), a
// check of each restart's recovery, and damage at many places.
//
// Seeds: $RAFTKV_TEST_SEED replays a run (each test prints its seed).
#include <cstdlib>
#include <random>

#include "gtest/common/temp_dir.h"
#include "gtest/integration/integration_test_util.h"

namespace raftkv {
namespace integration {
namespace {

// ---------------------------------------------------------------------------
// The segment format (storage/log_store.h), re-implemented here on purpose:
// record := crc32c:u32le length:u32le payload (a serialized Entry); the CRC
// covers the length bytes and the payload.

uint32_t Crc32c(const char* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= static_cast<uint8_t>(p[i]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t Fixed32(const std::string& b, size_t pos) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[pos])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[pos + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[pos + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[pos + 3])) << 24;
}

void PutFixed32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string EncodeRecord(const Entry& entry) {
  const std::string payload = entry.SerializeAsString();
  std::string length;
  PutFixed32(&length, static_cast<uint32_t>(payload.size()));
  std::string record;
  PutFixed32(&record, Crc32c((length + payload).data(), length.size() + payload.size()));
  return record + length + payload;
}

struct Record {
  size_t offset = 0;
  size_t length = 0;  // payload bytes
  Entry entry;
};

struct SegmentScan {
  std::vector<Record> records;  // every valid record from the start, in order
  size_t valid_bytes = 0;       // end of the last valid record
  std::string problem;          // why the scan stopped before the end ("" = clean)
};

// First index of a segment file: its name is <20-digit first index>.seg.
uint64_t SegmentFirstIndex(const std::string& path) {
  const std::string name = path.substr(path.rfind('/') + 1);
  return std::strtoull(name.substr(0, 20).c_str(), nullptr, 10);
}

SegmentScan ScanSegmentBytes(const std::string& bytes, uint64_t first_index) {
  SegmentScan scan;
  size_t pos = 0;
  while (pos < bytes.size()) {
    // Only zeros from here: preallocated space, the clean end of the records.
    if (bytes.find_first_not_of('\0', pos) == std::string::npos) break;
    if (bytes.size() - pos < 8) {
      scan.problem = "short header at " + std::to_string(pos);
      break;
    }
    const size_t length = Fixed32(bytes, pos + 4);
    if (length > bytes.size() - pos - 8) {
      scan.problem = "short payload at " + std::to_string(pos);
      break;
    }
    if (Crc32c(bytes.data() + pos + 4, 4 + length) != Fixed32(bytes, pos)) {
      scan.problem = "checksum mismatch at " + std::to_string(pos);
      break;
    }
    Record r;
    r.offset = pos;
    r.length = length;
    if (!r.entry.ParseFromArray(bytes.data() + pos + 8, static_cast<int>(length)) ||
        r.entry.index() != first_index + scan.records.size()) {
      scan.problem = "bad entry at " + std::to_string(pos);
      break;
    }
    scan.records.push_back(std::move(r));
    pos += 8 + length;
  }
  scan.valid_bytes = pos;
  return scan;
}

// The line of `text` holding `needle` (without the newline); "" if none.
std::string LineWith(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at);
  const size_t from = begin == std::string::npos ? 0 : begin + 1;
  const size_t end = text.find('\n', at);
  return text.substr(from, (end == std::string::npos ? text.size() : end) - from);
}

// Counts the occurrences of `needle` in `text`.
int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// ---------------------------------------------------------------------------
// Recovery of one restart.

// What recovery must find in member i's (stopped) log, by the parser above:
// the last index of the valid records, and how many bytes after them in the
// last segment form a torn tail to cut (0: none).
struct Prediction {
  uint64_t last_index = 0;
  size_t torn_bytes = 0;
  std::string problem;  // damage recovery must refuse (not expected after a kill)
};

Prediction PredictRecovery(ProcessCluster& cluster, int i) {
  Prediction p;
  const std::vector<std::string> segments = cluster.SegmentFiles(i);
  for (size_t k = 0; k < segments.size(); ++k) {
    const std::string bytes = ReadFileOrEmpty(segments[k]);
    const uint64_t first = SegmentFirstIndex(segments[k]);
    const SegmentScan scan = ScanSegmentBytes(bytes, first);
    p.last_index = first + scan.records.size() - 1;
    if (scan.problem.empty()) continue;
    if (k + 1 < segments.size()) {
      p.problem = segments[k] + ": " + scan.problem;
    } else {
      p.torn_bytes = bytes.size() - scan.valid_bytes;
    }
  }
  return p;
}

struct Recovery {
  bool up = false;          // the member answered Status
  bool torn = false;        // it reported cutting a torn tail
  std::string torn_line;    // the glog line saying so
  std::string opened_line;  // "opened log in ...: N segment(s), last index I"
};

// Waits until the just-(re)started member i answers Status and checks what
// its recovery logged: the log was opened, nothing was reported corrupt. A
// member that exits instead is a failure (recovery refused its own crash).
//
// With a prediction (taken while the member was down), recovery must also
// have kept exactly the valid records -- "last index" as predicted -- and cut
// exactly the torn bytes, no more, no fewer.
Recovery ExpectCleanRecovery(ProcessCluster& cluster, int i, const std::string& context,
                             const Prediction* predicted = nullptr) {
  Recovery r;
  StatusResponse st;
  const bool up = WaitUntil(
      [&] { return !cluster.IsRunning(i) || cluster.StatusOf(i, &st, 300).ok(); }, 10000, 20);
  r.up = up && cluster.IsRunning(i);
  const std::string log = cluster.LastRunLogText(i);
  const std::string out = cluster.LastRunOutput(i);
  EXPECT_TRUE(r.up) << context << ": member " << i
                    << (up ? " exited while recovering:\n" : " did not answer within 10 s:\n")
                    << out << "\n--- its log ---\n"
                    << log;
  r.opened_line = LineWith(log, "opened log in ");
  EXPECT_FALSE(r.opened_line.empty()) << context << ": member " << i << " logged no recovery";
  EXPECT_EQ(log.find("Corruption"), std::string::npos)
      << context << ": member " << i << ":\n" << LineWith(log, "Corruption");
  EXPECT_EQ(out.find("Corruption"), std::string::npos) << context << ": member " << i << ":\n"
                                                       << out;
  r.torn_line = LineWith(log, "torn tail");
  r.torn = !r.torn_line.empty();
  if (predicted != nullptr && r.up) {
    EXPECT_TRUE(predicted->problem.empty()) << context << ": member " << i
                                            << " started on a damaged log: " << predicted->problem;
    const std::string last = "last index " + std::to_string(predicted->last_index);
    EXPECT_TRUE(r.opened_line.size() >= last.size() &&
                r.opened_line.compare(r.opened_line.size() - last.size(), last.size(), last) == 0)
        << context << ": member " << i << " should have recovered up to " << last
        << " (the last intact record on disk); it logged: " << r.opened_line;
    if (predicted->torn_bytes == 0) {
      EXPECT_FALSE(r.torn) << context << ": member " << i
                           << " cut a tail from a log that ends cleanly: " << r.torn_line;
    } else {
      EXPECT_NE(r.torn_line.find("truncated " + std::to_string(predicted->torn_bytes) +
                                 " bytes of torn tail"),
                std::string::npos)
          << context << ": member " << i << " should have cut the " << predicted->torn_bytes
          << " bytes after its last intact record; it logged: '" << r.torn_line << "'";
      // A warning, not an info line (glog lines start with the severity).
      EXPECT_TRUE(!r.torn_line.empty() && (r.torn_line[0] == 'W' || r.torn_line[0] == 'E'))
          << r.torn_line;
    }
  }
  return r;
}

// ---------------------------------------------------------------------------
// A stream of Puts of distinct keys by several writer threads, each with its
// own client. Every key is written once, so an acknowledged key must read
// back with exactly its value; a key whose Put failed has an unknown outcome
// and is not checked.

class WriteStream {
 public:
  WriteStream(ProcessCluster& cluster, int writers, std::string prefix, uint64_t seed)
      : cluster_(cluster), prefix_(std::move(prefix)), token_(std::to_string(seed % 100000)) {
    for (int w = 0; w < writers; ++w) writers_.push_back(std::make_unique<Writer>());
  }
  ~WriteStream() { Stop(); }

  void Start() {
    for (size_t w = 0; w < writers_.size(); ++w) {
      threads_.emplace_back([this, w] {
        auto client = cluster_.NewClient(3000, 500);
        Writer& me = *writers_[w];
        for (int n = 0; !stop_; ++n) {
          const std::string key = prefix_ + std::to_string(w) + "-" + std::to_string(n);
          const std::string value = "v" + std::to_string(n) + "-w" + std::to_string(w) + "-" + token_;
          grpc::Status s = client->Put(key, value);
          std::lock_guard<std::mutex> lock(me.mu);
          if (s.ok()) {
            me.acked.emplace_back(key, value);
            ++total_acks_;
          } else {
            ++me.failures;
            me.last_error = Code(s);
          }
        }
      });
    }
  }

  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  int total_acks() const { return total_acks_; }

  // Every write acknowledged so far.
  KvMap Acked() const { return Recent(SIZE_MAX); }

  // The last `n` writes each writer had acknowledged so far.
  KvMap Recent(size_t n) const {
    KvMap out;
    for (const auto& w : writers_) {
      std::lock_guard<std::mutex> lock(w->mu);
      const size_t from = w->acked.size() > n ? w->acked.size() - n : 0;
      out.insert(w->acked.begin() + static_cast<std::ptrdiff_t>(from), w->acked.end());
    }
    return out;
  }

  std::string Summary() const {
    std::string out;
    for (size_t w = 0; w < writers_.size(); ++w) {
      std::lock_guard<std::mutex> lock(writers_[w]->mu);
      out += "writer " + std::to_string(w) + ": " + std::to_string(writers_[w]->acked.size()) +
             " acked, " + std::to_string(writers_[w]->failures) + " failed (last: " +
             writers_[w]->last_error + ")\n";
    }
    return out;
  }

 private:
  struct Writer {
    mutable std::mutex mu;
    std::vector<std::pair<std::string, std::string>> acked;  // in acknowledgement order
    int failures = 0;
    std::string last_error;
  };
  ProcessCluster& cluster_;
  const std::string prefix_;
  const std::string token_;
  std::vector<std::unique_ptr<Writer>> writers_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> total_acks_{0};
};

// Every write of `acked` reads back through the leader, and every member,
// once it has applied the leader's commit index, serves all of them from its
// own state.
void ExpectAllDurableEverywhere(ProcessCluster& cluster, const KvMap& acked, uint64_t seed) {
  const auto start = Steady::now();
  auto client = cluster.NewClient(10000, 1000);
  std::vector<std::string> problems = CheckAll(*client, acked, /*stale=*/false, 8);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << acked.size()
                                << " acknowledged writes lost or wrong (seed " << seed << "):\n"
                                << JoinLines(problems);
  std::string error;
  const uint64_t leader = cluster.WaitForLeader(10000, &error);
  ASSERT_NE(leader, 0u) << error;
  const uint64_t commit = MustStatus(cluster, static_cast<int>(leader)).commit_index();
  for (int i = 1; i <= cluster.size(); ++i) {
    StatusResponse st;
    EXPECT_TRUE(WaitForApplied(cluster, i, commit, 10000, &st))
        << "member " << i << " applied " << st.applied_index() << " of " << commit;
    auto local = cluster.NewClientFor(i, 5000, 1000);
    problems = CheckAll(*local, acked, /*stale=*/true, 8);
    EXPECT_TRUE(problems.empty()) << "stale reads on member " << i << " (seed " << seed << "), "
                                  << problems.size() << " problems:\n"
                                  << JoinLines(problems);
  }
  std::cerr << "[ info     ] " << acked.size() << " acknowledged writes checked through the "
            << "leader and on all " << cluster.size() << " members in " << ElapsedMs(start)
            << " ms\n";
}

// Small segments, so that the stream rolls over to new segment files many
// times and crashes also hit segment creation.
std::vector<std::string> CrashFlags() {
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--segment_bytes=32768");
  return flags;
}

uint64_t PrintSeed(const char* test) {
  const uint64_t seed = TestSeed();
  std::cerr << "[ info     ] " << test << " seed " << seed << " (replay with RAFTKV_TEST_SEED="
            << seed << ")\n";
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

class CrashDurability : public Integration {
 protected:
  // Kills members at random points of a write stream, `rounds` times at
  // most (fewer once `budget_ms` is spent, but at least `min_rounds`).
  void RandomKills(const char* test, const std::vector<std::string>& flags, int rounds_at_most,
                   int min_rounds, int64_t budget_ms);
  // Damages a stopped follower's log segments and hard state one byte at a
  // time and restarts it on each (`flags`: more server flags).
  void BitFlips(const char* test, const std::vector<std::string>& flags);
};

TEST_F(CrashDurability, RandomKillsDuringWriteStream) {
  RandomKills("RandomKillsDuringWriteStream", CrashFlags(), 30, 12, 60000);
}

// The same over the on-disk engine: a killed member reopens its store at the
// last entry it flushed and applies only the log after it.
TEST_F(CrashDurability, RandomKillsOverTheRocksDbEngine) {
#ifndef RAFTKV_HAVE_ROCKSDB
  GTEST_SKIP() << "built without RocksDB";
#endif
  std::vector<std::string> flags = CrashFlags();
  flags.push_back("--storage_engine=rocksdb");
  flags.push_back("--snapshot_entries=400");  // snapshots (and flushes) between the kills
  RandomKills("RandomKillsOverTheRocksDbEngine", flags, 12, 6, 30000);
  if (HasFailure()) return;
  // Restarts opened their stores where they were, not empty.
  int resumed = 0;
  for (int i = 1; i <= cluster().size(); ++i) {
    const std::string log = cluster().LogText(i);
    const std::string mark = "opened the key-value store ";
    for (size_t at = log.find(mark); at != std::string::npos; at = log.find(mark, at + 1)) {
      const size_t index = log.find(" at index ", at);
      if (index != std::string::npos && std::strtoull(log.c_str() + index + 10, nullptr, 10) > 0) ++resumed;
    }
  }
  EXPECT_GT(resumed, 0) << "no restart found its store holding entries";
}

void CrashDurability::RandomKills(const char* test, const std::vector<std::string>& flags,
                                  int rounds_at_most, int min_rounds, int64_t budget_ms) {
  const uint64_t seed = PrintSeed(test);
  std::mt19937_64 rng(seed);
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));
  WriteStream stream(cluster(), 4, "rk-", seed);
  stream.Start();
  auto verifier = cluster().NewClient(10000, 1000);

  const int kRounds = rounds_at_most;
  const int kMinRounds = min_rounds;
  const int64_t kBudgetMs = budget_ms;  // rounds stop early on a slow machine
  const auto start = Steady::now();
  int rounds = 0, torn_rounds = 0, two_member_rounds = 0, leader_kills = 0;
  for (int round = 1; round <= kRounds && !HasFailure(); ++round) {
    if (ElapsedMs(start) > kBudgetMs) break;
    ++rounds;
    const int acks_before = stream.total_acks();
    const int delay_ms = static_cast<int>(rng() % 301);
    std::this_thread::sleep_for(Millis(delay_ms));
    // Who dies: two members (the leader and another: no quorum until one of
    // them is back) one round in five, else the leader or a random member.
    std::vector<int> victims;
    const int mode = static_cast<int>(rng() % 10);
    if (mode < 2) {
      victims = {static_cast<int>(leader), OtherThan(cluster(), static_cast<int>(leader))};
      if (rng() % 2 == 0) victims[1] = OtherThan(cluster(), victims[0], victims[1]);
      ++two_member_rounds;
    } else if (mode < 6) {
      victims = {static_cast<int>(leader)};
    } else {
      victims = {1 + static_cast<int>(rng() % 3)};
    }
    for (int v : victims) leader_kills += v == static_cast<int>(leader);
    std::string what;
    for (int v : victims) {
      cluster().Kill(v);
      what += " " + std::to_string(v) + (v == static_cast<int>(leader) ? " (leader)" : "");
    }
    // What must survive: everything acknowledged before the members died.
    const KvMap recent = stream.Recent(10);
    const int down_ms = static_cast<int>(rng() % 200);
    std::this_thread::sleep_for(Millis(down_ms));
    std::string recovered;
    for (int v : victims) {
      const std::string context = "round " + std::to_string(round);
      const Prediction predicted = PredictRecovery(cluster(), v);
      ASSERT_TRUE(cluster().Restart(v)) << context;
      const Recovery r = ExpectCleanRecovery(cluster(), v, context, &predicted);
      if (!r.up) break;
      if (r.torn) {
        ++torn_rounds;
        std::cerr << "[ info     ] round " << round << ": member " << v
                  << " cut a torn tail: " << r.torn_line << "\n";
      }
      recovered += " [" + std::to_string(v) + ": " +
                   r.opened_line.substr(r.opened_line.find("segment") == std::string::npos
                                            ? 0
                                            : r.opened_line.rfind(':') + 2) +
                   "]";
    }
    if (HasFailure()) break;
    std::string error;
    leader = cluster().WaitForLeader(10000, &error);
    ASSERT_NE(leader, 0u) << "round " << round << ": " << error;
    for (int i = 1; i <= 3; ++i) {
      ASSERT_TRUE(cluster().IsRunning(i)) << "round " << round << ": member " << i << " died";
    }
    // The stream goes on, and the last writes acknowledged before the crash
    // read back.
    EXPECT_TRUE(WaitUntil([&] { return stream.total_acks() > acks_before + 10; }, 10000))
        << "round " << round << ": writes stalled";
    const std::vector<std::string> problems = CheckAll(*verifier, recent, /*stale=*/false);
    EXPECT_TRUE(problems.empty()) << "round " << round << " (seed " << seed
                                  << "): writes acknowledged just before the crash:\n"
                                  << JoinLines(problems);
    std::cerr << "[ info     ] round " << round << ": killed" << what << " " << delay_ms
              << " ms into the round, down " << down_ms << " ms; recovered" << recovered << "; leader "
              << leader << "; " << stream.total_acks() << " acks so far\n";
  }
  stream.Stop();
  std::cerr << "[ info     ] " << rounds << " rounds in " << ElapsedMs(start) << " ms ("
            << leader_kills << " leader kills, " << two_member_rounds
            << " with two members down); torn tails cut in " << torn_rounds << " restarts\n"
            << stream.Summary();
  if (HasFailure()) return;
  EXPECT_GE(rounds, kMinRounds) << "too slow to run enough crash rounds";
  const KvMap acked = stream.Acked();
  ASSERT_GT(acked.size(), 500u) << stream.Summary();
  ExpectAllDurableEverywhere(cluster(), acked, seed);
}

// Appends to member i's last segment a torn record -- one of the shapes a
// crash in the middle of writing the next record can leave -- and returns its
// size (0 if the segment does not end cleanly, which is then left alone).
size_t AppendTornRecord(ProcessCluster& cluster, int i, std::mt19937_64& rng, std::string* how) {
  const std::vector<std::string> segments = cluster.SegmentFiles(i);
  if (segments.empty()) return 0;
  const std::string path = segments.back();
  const std::string bytes = ReadFileOrEmpty(path);
  const SegmentScan scan = ScanSegmentBytes(bytes, SegmentFirstIndex(path));
  if (!scan.problem.empty()) {
    *how = path + " does not end cleanly (" + scan.problem + "); left alone";
    return 0;
  }
  Entry next;
  next.set_term(scan.records.empty() ? 1 : scan.records.back().entry.term());
  next.set_index(SegmentFirstIndex(path) + scan.records.size());
  std::string data(20 + rng() % 200, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  next.set_data(data);
  const std::string record = EncodeRecord(next);
  std::string torn;
  switch (rng() % 3) {
    case 0: {  // the write stopped part-way (maybe inside the header)
      const size_t keep = 1 + rng() % (record.size() - 1);
      torn = record.substr(0, keep);
      *how = "first " + std::to_string(keep) + " of " + std::to_string(record.size()) + " bytes";
      break;
    }
    case 1: {  // full length, but the last sectors never made it (zeros)
      const size_t zeros = 1 + rng() % (record.size() - 8);
      torn = record.substr(0, record.size() - zeros) + std::string(zeros, '\0');
      *how = "whole record, last " + std::to_string(zeros) + " bytes zero";
      break;
    }
    default: {  // part-way, and the file was extended with zeros to a page
      const size_t keep = 1 + rng() % (record.size() - 1);
      torn = record.substr(0, keep);
      const size_t end = scan.valid_bytes + torn.size();
      torn.append((4096 - end % 4096) % 4096 + 4096 * (rng() % 2), '\0');
      *how = "first " + std::to_string(keep) + " of " + std::to_string(record.size()) +
             " bytes, zero-filled to " + std::to_string(scan.valid_bytes + torn.size());
      break;
    }
  }
  // Written where the next record would go: right after the last one, over
  // the segment's preallocated zeros (which then still follow it).
  std::string damaged = bytes.substr(0, scan.valid_bytes) + torn;
  if (bytes.size() > damaged.size()) damaged += bytes.substr(damaged.size());
  *how = path + " + " + std::to_string(torn.size()) + " bytes at " +
         std::to_string(scan.valid_bytes) + " (" + *how + ")";
  if (torn.find_first_not_of('\0') == std::string::npos) {
    *how += ": all zero, no record";
    return 0;
  }
  testing_util::WriteFileBytes(path, damaged);
  return damaged.size() - scan.valid_bytes;  // what recovery cuts: the record and the zeros after
}

TEST_F(CrashDurability, KillDuringFsyncWindowAllMembers) {
  const uint64_t seed = PrintSeed("KillDuringFsyncWindowAllMembers");
  std::mt19937_64 rng(seed);
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, CrashFlags(), &leader));
  WriteStream stream(cluster(), 4, "all-", seed);
  stream.Start();
  auto verifier = cluster().NewClient(10000, 1000);

  constexpr int kRounds = 12;
  int injected = 0, natural_torn = 0;
  const auto start = Steady::now();
  for (int round = 1; round <= kRounds && !HasFailure(); ++round) {
    const std::string context = "round " + std::to_string(round);
    // Let the burst get going (after a restart the first writes wait for an
    // election), then kill every member, in a random order, back to back.
    const int acks_before = stream.total_acks();
    WaitUntil([&] { return stream.total_acks() > acks_before + 20; }, 10000);
    std::this_thread::sleep_for(Millis(static_cast<int>(rng() % 301)));
    std::vector<int> order = {1, 2, 3};
    std::shuffle(order.begin(), order.end(), rng);
    for (int v : order) cluster().Kill(v);
    // No member is left: every write acknowledged until now was acknowledged
    // before the crash and must survive it.
    const KvMap before_crash = stream.Acked();
    const KvMap recent = stream.Recent(25);
    // Some members also "crashed in the middle of a write".
    std::map<int, size_t> torn_bytes;
    for (int i = 1; i <= 3; ++i) {
      if (rng() % 2 != 0) continue;
      std::string how;
      const size_t n = AppendTornRecord(cluster(), i, rng, &how);
      std::cerr << "[ info     ] " << context << ": member " << i << ": " << how << "\n";
      if (n > 0) torn_bytes[i] = n;
    }
    std::map<int, Prediction> predicted;
    for (int i = 1; i <= 3; ++i) predicted[i] = PredictRecovery(cluster(), i);
    std::shuffle(order.begin(), order.end(), rng);
    for (int v : order) {
      ASSERT_TRUE(cluster().Restart(v)) << context;
      std::this_thread::sleep_for(Millis(static_cast<int>(rng() % 100)));
    }
    for (int v : order) {
      const Recovery r = ExpectCleanRecovery(cluster(), v, context, &predicted[v]);
      if (!r.up) continue;
      if (torn_bytes.count(v) != 0) {
        ++injected;
        EXPECT_EQ(predicted[v].torn_bytes, torn_bytes[v]) << context << ": member " << v;
      } else if (r.torn) {
        ++natural_torn;
        std::cerr << "[ info     ] " << context << ": member " << v
                  << " found a torn tail of its own: " << r.torn_line << "\n";
      }
    }
    if (HasFailure()) break;
    std::string error;
    leader = cluster().WaitForLeader(10000, &error);
    ASSERT_NE(leader, 0u) << context << ": " << error;
    std::vector<std::string> problems = CheckAll(*verifier, recent, /*stale=*/false);
    EXPECT_TRUE(problems.empty()) << context << " (seed " << seed
                                  << "): writes acknowledged just before all members died:\n"
                                  << JoinLines(problems);
    std::cerr << "[ info     ] " << context << ": all members killed and restarted, leader "
              << leader << ", " << before_crash.size() << " writes acknowledged before the crash\n";
  }
  stream.Stop();
  std::cerr << "[ info     ] " << kRounds << " rounds in " << ElapsedMs(start) << " ms; "
            << injected << " injected torn tails cut, " << natural_torn << " natural ones\n"
            << stream.Summary();
  if (HasFailure()) return;
  const KvMap acked = stream.Acked();
  ASSERT_GT(acked.size(), 300u) << stream.Summary();
  ExpectAllDurableEverywhere(cluster(), acked, seed);
}

// ---------------------------------------------------------------------------

// A copy of every file in member i's log directory plus its hard state, to
// put back between damage trials.
struct DataSnapshot {
  std::map<std::string, std::string> files;  // path -> bytes
};

DataSnapshot TakeSnapshot(ProcessCluster& cluster, int i) {
  DataSnapshot snap;
  for (const std::string& path : cluster.SegmentFiles(i)) snap.files[path] = ReadFileOrEmpty(path);
  snap.files[cluster.HardStatePath(i)] = ReadFileOrEmpty(cluster.HardStatePath(i));
  return snap;
}

void RestoreSnapshot(ProcessCluster& cluster, int i, const DataSnapshot& snap) {
  for (const std::string& path : cluster.SegmentFiles(i)) {
    if (snap.files.count(path) == 0) std::remove(path.c_str());
  }
  for (const auto& [path, bytes] : snap.files) {
    ASSERT_NO_FATAL_FAILURE(testing_util::WriteFileBytes(path, bytes));
  }
}

// Key -> log index of each Put in the given segments.
std::map<std::string, uint64_t> KeyIndexes(const std::map<std::string, SegmentScan>& scans) {
  std::map<std::string, uint64_t> out;
  for (const auto& [path, scan] : scans) {
    for (const Record& r : scan.records) {
      Command c;
      if (!r.entry.data().empty() && c.ParseFromString(r.entry.data()) && c.op() == Command::PUT) {
        out[c.key()] = r.entry.index();
      }
    }
  }
  return out;
}

// One byte to damage.
struct Flip {
  std::string what;
  std::string path;
  size_t offset = 0;
  uint8_t mask = 0;
  size_t record_offset = 0;     // start of the record holding the byte
  bool last_of_log = false;     // that record is the final record of the log
  uint64_t record_index = 0;    // its entry's index
};

// The record of `scan` that holds byte `offset`.
const Record* RecordAt(const SegmentScan& scan, size_t offset) {
  for (const Record& r : scan.records) {
    if (offset >= r.offset && offset < r.offset + 8 + r.length) return &r;
  }
  return nullptr;
}

// On the default engine (RocksDB where it is built), whose store applied
// every entry before the stop: damage to the last record is refused too.
TEST_F(CrashDurability, BitFlipsAreRefused) { BitFlips("BitFlipsAreRefused", {}); }

// On the memory engine, which applied nothing at restart: damage to the last
// record may look like a torn write, cut off.
TEST_F(CrashDurability, BitFlipsAreRefusedOverTheMemoryEngine) {
  BitFlips("BitFlipsAreRefusedOverTheMemoryEngine", {"--storage_engine=memory"});
}

void CrashDurability::BitFlips(const char* test, const std::vector<std::string>& extra_flags) {
  const uint64_t seed = PrintSeed(test);
  std::mt19937_64 rng(seed);
  uint64_t leader = 0;
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--segment_bytes=4096");  // several segments
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));
  const int f = OtherThan(cluster(), static_cast<int>(leader));
  auto client = cluster().NewClient(10000, 1000);
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < 600; ++i) kvs.emplace_back("flip-" + std::to_string(i), "value-" + std::to_string(i * 7919));
  std::vector<std::string> errors;
  const KvMap acked = PutAll(*client, kvs, 4, &errors);
  ASSERT_EQ(acked.size(), kvs.size()) << JoinLines(errors);
  const uint64_t commit = MustStatus(cluster(), static_cast<int>(leader)).commit_index();
  ASSERT_TRUE(WaitForApplied(cluster(), f, commit, 5000));
  ASSERT_TRUE(cluster().Stop(f)) << "member " << f << " did not stop cleanly";

  const std::vector<std::string> segments = cluster().SegmentFiles(f);
  ASSERT_GE(segments.size(), 3u) << "expected several segments in " << cluster().DataDir(f);
  std::map<std::string, SegmentScan> scans;
  for (const std::string& path : segments) {
    scans[path] = ScanSegmentBytes(ReadFileOrEmpty(path), SegmentFirstIndex(path));
    ASSERT_TRUE(scans[path].problem.empty()) << path << ": " << scans[path].problem;
  }
  // The last segment may be empty (just rolled over): the log's final record
  // is then the last one of the segment before.
  std::string last_path;
  for (const std::string& path : segments) {
    if (!scans[path].records.empty()) last_path = path;
  }
  ASSERT_FALSE(last_path.empty());
  const bool last_segment_empty = last_path != segments.back();
  const std::map<std::string, uint64_t> key_index = KeyIndexes(scans);
  const DataSnapshot snapshot = TakeSnapshot(cluster(), f);

  auto make_flip = [&](const std::string& what, const std::string& path, size_t offset,
                       uint8_t mask) {
    Flip fl;
    fl.what = what;
    fl.path = path;
    fl.offset = offset;
    fl.mask = mask == 0 ? 0x01 : mask;
    const Record* r = RecordAt(scans[path], offset);
    EXPECT_NE(r, nullptr) << path << " offset " << offset;
    if (r != nullptr) {
      fl.record_offset = r->offset;
      fl.record_index = r->entry.index();
      fl.last_of_log = path == last_path && r == &scans[path].records.back();
    }
    return fl;
  };
  auto middle = [&](const std::string& path) -> const Record& {
    const auto& rs = scans[path].records;
    return rs[rs.size() / 2];
  };
  const std::string& first = segments.front();
  const std::string& mid = segments[segments.size() / 2 - (last_segment_empty ? 1 : 0)];
  std::vector<Flip> flips = {
      make_flip("first byte of the log", first, 0, 0x80),
      make_flip("checksum of a middle record, first segment", first, middle(first).offset + 2, 0x10),
      make_flip("length (low byte) of a middle record, middle segment", mid,
                middle(mid).offset + 4, 0x01),
      make_flip("length (high byte) of a middle record, middle segment", mid,
                middle(mid).offset + 7, 0x40),
      make_flip("payload of a middle record, last segment", last_path,
                middle(last_path).offset + 8 + middle(last_path).length / 2, 0xff),
      make_flip("payload of the last record of the first segment", first,
                scans[first].records.back().offset + 8 + scans[first].records.back().length - 1,
                0x04),
      make_flip("payload of the last record of the log", last_path,
                scans[last_path].records.back().offset + 9, 0x20),
      make_flip("length of the last record of the log", last_path,
                scans[last_path].records.back().offset + 4, 0x02),
  };
  for (int t = 0; t < 6; ++t) {
    const std::string& path = segments[rng() % segments.size()];
    const size_t size = scans[path].valid_bytes;
    if (size == 0) continue;
    const size_t offset = rng() % size;
    flips.push_back(make_flip("random byte", path, offset, static_cast<uint8_t>(1 + rng() % 255)));
  }

  int refused = 0, cut = 0;
  for (size_t t = 0; t < flips.size() && !HasFatalFailure(); ++t) {
    const Flip& fl = flips[t];
    const std::string context = "trial " + std::to_string(t + 1) + " (" + fl.what + ": " +
                                fl.path + " byte " + std::to_string(fl.offset) + " ^= " +
                                std::to_string(fl.mask) + ", record at " +
                                std::to_string(fl.record_offset) + " holding index " +
                                std::to_string(fl.record_index) + ")";
    std::cerr << "[ info     ] " << context << "\n";
    ASSERT_NO_FATAL_FAILURE(RestoreSnapshot(cluster(), f, snapshot));
    std::string damaged = snapshot.files.at(fl.path);
    damaged[fl.offset] = static_cast<char>(damaged[fl.offset] ^ fl.mask);
    ASSERT_NO_FATAL_FAILURE(testing_util::WriteFileBytes(fl.path, damaged));
    ASSERT_TRUE(cluster().Restart(f));
    StatusResponse st;
    WaitUntil([&] { return !cluster().IsRunning(f) || cluster().StatusOf(f, &st, 300).ok(); },
              10000, 20);
    if (!cluster().IsRunning(f)) {
      // Refused: a clear message naming the file and the damaged record.
      ++refused;
      int exit_code = 0;
      ASSERT_TRUE(cluster().WaitForExit(f, 1000, &exit_code));
      EXPECT_TRUE(exit_code > 0 && exit_code < 128)
          << context << ": exit status " << exit_code << " (a crash, not a refusal?)";
      const std::string out = cluster().LastRunOutput(f);
      const std::string expected =
          "Corruption: " + fl.path + ": offset " + std::to_string(fl.record_offset) + ": ";
      EXPECT_NE(out.find(expected), std::string::npos)
          << context << ": expected a message containing '" << expected << "'; output:\n"
          << out;
      EXPECT_TRUE(ReadFileOrEmpty(fl.path) == damaged) << context << ": the refused log was modified";
      continue;
    }
    // It started: only allowed when the final record of the log was hit,
    // which recovery cannot tell from a torn write and must cut off.
    ++cut;
    EXPECT_TRUE(fl.last_of_log) << context << ": started on a damaged log:\n"
                                << LineWith(cluster().LastRunLogText(f), "opened log in");
    const std::string log = cluster().LastRunLogText(f);
    const std::string expected = fl.path + ": offset " + std::to_string(fl.record_offset) + ": ";
    const std::string torn = LineWith(log, "torn tail");
    EXPECT_NE(torn.find(expected), std::string::npos)
        << context << ": expected the cut reported at '" << expected << "', log says: '" << torn
        << "'";
    EXPECT_NE(torn.find("truncated " + std::to_string(damaged.size() - fl.record_offset) +
                        " bytes"),
              std::string::npos)
        << context << ": " << torn;
    // Whatever it serves at once is a written value, or nothing yet (only
    // the cut entry and what was not re-applied yet may be missing)...
    auto local = cluster().NewClientFor(f, 3000, 1000);
    std::vector<std::string> wrong;
    int missing = 0;
    for (const auto& [key, value] : acked) {
      std::string got;
      bool found = false;
      grpc::Status s = local->Get(key, &got, &found, /*allow_stale=*/true);
      if (!s.ok()) {
        wrong.push_back(key + ": " + Code(s));
      } else if (!found) {
        ++missing;
      } else if (got != value) {
        wrong.push_back(key + " (index " + std::to_string(key_index.count(key) ? key_index.at(key) : 0) +
                        "): '" + got + "', expected '" + value + "'");
      }
    }
    EXPECT_TRUE(wrong.empty()) << context << ": served wrong values:\n" << JoinLines(wrong);
    // ... and once caught up, everything.
    EXPECT_TRUE(WaitForApplied(cluster(), f, commit, 10000, &st))
        << context << ": applied " << st.applied_index() << " of " << commit;
    std::vector<std::string> problems = CheckAll(*local, acked, /*stale=*/true);
    EXPECT_TRUE(problems.empty()) << context << ": after catching up:\n" << JoinLines(problems);
    std::cerr << "[ info     ] " << context << ": cut and caught up (" << missing
              << " keys not yet applied right after the start)\n";
    cluster().Kill(f);
  }

  // The hard state file (term and vote): any damage is refused.
  struct HardStateDamage {
    std::string what;
    size_t offset;  // byte to flip, or the length to truncate the file to
    bool truncate;
    std::string reason;
  };
  const std::string hs = cluster().HardStatePath(f);
  const std::vector<HardStateDamage> hs_trials = {
      {"magic", 1, false, "bad magic"},
      {"version", 4, false, "checksum mismatch"},
      {"term", 8, false, "checksum mismatch"},
      {"vote", 16 + static_cast<size_t>(rng() % 8), false, "checksum mismatch"},
      {"checksum", 24 + static_cast<size_t>(rng() % 4), false, "checksum mismatch"},
      {"truncated", 20, true, "hard state file is 20 bytes"},
  };
  ASSERT_EQ(snapshot.files.at(hs).size(), 28u) << hs;
  for (const HardStateDamage& d : hs_trials) {
    const std::string context = "hard state trial (" + d.what + ")";
    ASSERT_NO_FATAL_FAILURE(RestoreSnapshot(cluster(), f, snapshot));
    std::string damaged = snapshot.files.at(hs);
    if (d.truncate) {
      damaged.resize(d.offset);
    } else {
      damaged[d.offset] = static_cast<char>(damaged[d.offset] ^ (1 + rng() % 255));
    }
    ASSERT_NO_FATAL_FAILURE(testing_util::WriteFileBytes(hs, damaged));
    ASSERT_TRUE(cluster().Restart(f));
    int exit_code = 0;
    const bool exited = cluster().WaitForExit(f, 10000, &exit_code);
    EXPECT_TRUE(exited) << context << ": started with a damaged hard state";
    if (!exited) {
      cluster().Kill(f);
      continue;
    }
    ++refused;
    EXPECT_TRUE(exit_code > 0 && exit_code < 128) << context << ": exit status " << exit_code;
    const std::string out = cluster().LastRunOutput(f);
    const std::string expected = "Corruption: " + hs + ": " + d.reason;
    EXPECT_NE(out.find(expected), std::string::npos)
        << context << ": expected '" << expected << "' in:\n" << out;
    EXPECT_TRUE(ReadFileOrEmpty(hs) == damaged) << context << ": the refused file was modified";
  }

  // Repaired, the member rejoins and serves everything.
  ASSERT_NO_FATAL_FAILURE(RestoreSnapshot(cluster(), f, snapshot));
  ASSERT_TRUE(cluster().Restart(f));
  StatusResponse st;
  EXPECT_TRUE(WaitForApplied(cluster(), f, commit, 10000, &st))
      << "applied " << st.applied_index() << " of " << commit;
  auto local = cluster().NewClientFor(f);
  std::vector<std::string> problems = CheckAll(*local, acked, /*stale=*/true);
  EXPECT_TRUE(problems.empty()) << JoinLines(problems);
  std::cerr << "[ info     ] " << flips.size() << " log and " << hs_trials.size()
            << " hard state trials: " << refused << " refused, " << cut << " cut a damaged final "
            << "record (" << CountOf(cluster().ServerOutput(f), "Corruption: ")
            << " Corruption messages in member " << f << "'s output)\n";
}

}  // namespace
}  // namespace integration
}  // namespace raftkv
