// Snapshots and log compaction with real processes, over each engine: under
// a long write stream every member's log stays bounded (snapshots every
// --snapshot_entries, the log kept back to the oldest kept snapshot only), at
// most --snapshots_kept snapshots (files, or checkpoint directories) remain,
// and a member killed with SIGKILL restarts quickly from its snapshot or
// store plus a short log, holding all the data.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "gtest/common/engines.h"
#include "gtest/integration/admin_test_util.h"

namespace raftkv {
namespace integration {
namespace {

class Compaction : public Integration, public ::testing::WithParamInterface<std::string> {
 protected:
  bool OnDisk() const { return GetParam() != "memory"; }
};

// Holds an exclusive lock on a file of the build directory while it lives:
// the long write test of each engine takes its turn (two of them at once,
// as ctest -j2 would run them, starve each other's snapshots under the
// sanitizers: the memory engine's took 61 s to write and the log outgrew
// its bound).
class TurnLock {
 public:
  TurnLock() : fd_(::open(RAFTKV_BIN_DIR "/compaction_test.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~TurnLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  TurnLock(const TurnLock&) = delete;
  TurnLock& operator=(const TurnLock&) = delete;

 private:
  const int fd_;
};

// Bytes of a snapshot: its file, or every file of its checkpoint directory.
uint64_t SnapshotBytes(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return std::filesystem::file_size(path, ec);
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(path, ec)) {
    std::error_code size_ec;
    if (e.is_regular_file(size_ec)) total += e.file_size(size_ec);
  }
  return total;
}

constexpr uint64_t kSnapshotEntries = 5000;
constexpr uint64_t kSegmentBytes = 1 << 20;
constexpr size_t kSnapshotsKept = 2;

// Entries to write: 200,000 unless RAFTKV_COMPACTION_ENTRIES says otherwise.
uint64_t EntriesToWrite() {
  if (const char* env = std::getenv("RAFTKV_COMPACTION_ENTRIES")) {
    const uint64_t n = std::strtoull(env, nullptr, 10);
    if (n >= 20000) return n;
  }
  return 200000;
}

// Bytes per log entry of member i: its log files hold the entries from the
// first segment's first index to its last index.
double BytesPerEntry(ProcessCluster& cluster, int i) {
  const std::vector<uint64_t> firsts = cluster.SegmentFirstIndexes(i);
  StatusResponse st;
  if (firsts.empty() || !cluster.StatusOf(i, &st).ok()) return 0;
  if (st.last_log_index() < firsts.front() + 1000) return 0;  // too few to measure
  const uint64_t entries = st.last_log_index() - firsts.front() + 1;
  return static_cast<double>(cluster.LogBytes(i)) / static_cast<double>(entries);
}

// Whether member i's first log segment holds an entry above its oldest
// kept snapshot (no segment lies wholly at or below it).
bool LogStartsAtOldestSnapshot(ProcessCluster& cluster, int i) {
  const std::vector<std::string> snaps = cluster.Snapshots(i);
  const std::vector<uint64_t> firsts = cluster.SegmentFirstIndexes(i);
  uint64_t oldest = 0;
  if (snaps.empty() ||
      !ParseAnySnapshotName(std::filesystem::path(snaps.front()).filename().string(), &oldest, nullptr)) {
    return false;
  }
  return firsts.size() < 2 || firsts[1] > oldest + 1;
}

struct DiskUse {
  uint64_t max_log_bytes = 0;
  uint64_t max_data_bytes = 0;
  size_t max_snapshots = 0;
};

TEST_P(Compaction, LogStaysBoundedAndKilledMemberRestartsQuickly) {
  const TurnLock turn;
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--storage_engine=" + GetParam());
  flags.push_back("--snapshot_entries=" + std::to_string(kSnapshotEntries));
  flags.push_back("--segment_bytes=" + std::to_string(kSegmentBytes));
  flags.push_back("--snapshots_kept=" + std::to_string(kSnapshotsKept));
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));
  const uint64_t total = EntriesToWrite();

  // Disk use of every member, sampled while the writes run.
  std::vector<DiskUse> use(4);
  std::atomic<bool> sampling{true};
  std::mutex use_mu;
  std::thread sampler([&] {
    while (sampling) {
      for (int i = 1; i <= 3; ++i) {
        const uint64_t log = cluster().LogBytes(i);
        const uint64_t data = cluster().DataDirBytes(i);
        const size_t snaps = cluster().Snapshots(i).size();
        std::lock_guard<std::mutex> lock(use_mu);
        use[i].max_log_bytes = std::max(use[i].max_log_bytes, log);
        use[i].max_data_bytes = std::max(use[i].max_data_bytes, data);
        use[i].max_snapshots = std::max(use[i].max_snapshots, snaps);
      }
      std::this_thread::sleep_for(Millis(250));
    }
  });
  const BulkResult w = BulkWrite(cluster(), "c", 0, total, /*threads=*/64, /*clients=*/4);
  sampling = false;
  sampler.join();
  std::cerr << "[ info     ] " << w.acked << " of " << total << " writes acknowledged in " << w.ms
            << " ms (" << (w.ms > 0 ? w.acked * 1000 / static_cast<uint64_t>(w.ms) : 0)
            << " writes/s)" << std::endl;
  EXPECT_EQ(w.failures, 0u) << "writes to a healthy cluster failed:\n" << JoinLines(w.errors);
  ASSERT_GE(w.acked, total * 99 / 100);

  std::string error;
  leader = cluster().WaitForLeader(10000, &error);
  ASSERT_NE(leader, 0u) << error;
  const StatusResponse leader_st = MustStatus(cluster(), static_cast<int>(leader));
  const uint64_t last_index = leader_st.last_log_index();
  ASSERT_GE(last_index, total);

  // Without compaction the log would hold every entry: estimate its size
  // from the bytes per entry of full segments.
  double per_entry = 0;
  for (int i = 1; i <= 3 && per_entry == 0; ++i) per_entry = BytesPerEntry(cluster(), i);
  ASSERT_GT(per_entry, 0) << "no member has enough log left to measure entry size with";
  const uint64_t uncompacted = static_cast<uint64_t>(per_entry * static_cast<double>(last_index));
  // Kept: the log back to the oldest kept snapshot (kSnapshotsKept intervals
  // of kSnapshotEntries) plus the entries since the newest, in whole segments
  // (one partly filled at each end), plus snapshotting lag under load: one
  // interval, kTimeScale in sanitizer builds (a snapshot file of 200,000
  // keys takes 8 s to write under ASan, about three intervals of writes).
  const uint64_t bound = static_cast<uint64_t>(per_entry * (kSnapshotsKept + 1 + kTimeScale) *
                                               static_cast<double>(kSnapshotEntries)) +
                         2 * kSegmentBytes;
  std::cerr << "[ info     ] " << per_entry << " bytes/entry; " << last_index
            << " entries would take " << uncompacted << " bytes of log; bound " << bound
            << std::endl;
  ASSERT_LT(bound * (kTimeScale > 1 ? 2 : 4), uncompacted)
      << "the bound would not show compaction: write more entries";

  for (int i = 1; i <= 3; ++i) {
    const uint64_t log_now = cluster().LogBytes(i);
    const std::vector<std::string> snaps = cluster().Snapshots(i);
    const std::vector<uint64_t> firsts = cluster().SegmentFirstIndexes(i);
    const uint64_t newest_snapshot = snaps.empty() ? 0 : SnapshotBytes(snaps.back());
    std::cerr << "[ info     ] member " << i << ": log " << log_now << " bytes now (max "
              << use[i].max_log_bytes << " during the writes), data dir max "
              << use[i].max_data_bytes << " bytes, " << snaps.size() << " snapshots (max "
              << use[i].max_snapshots << "), newest " << newest_snapshot << " bytes, first segment starts at "
              << (firsts.empty() ? 0 : firsts.front()) << std::endl;
    // In sanitizer builds the lag is the instrumented snapshot writer's
    // (the memory engine's took 20 to 60 s under TSan, 5 to 15 intervals):
    // there the log must only have let go of every segment wholly at or
    // below its oldest kept snapshot, as compaction promises.
    const uint64_t log_allowance = kTimeScale == 1 ? bound : std::max(bound, use[i].max_log_bytes);
    if (kTimeScale == 1) {
      EXPECT_LE(use[i].max_log_bytes, bound) << "member " << i << "'s log was not compacted";
      EXPECT_LE(log_now, bound) << "member " << i;
    } else {
      EXPECT_TRUE(WaitUntil([&] { return LogStartsAtOldestSnapshot(cluster(), i); }, 30000))
          << "member " << i << " keeps log segments its oldest snapshot covers";
    }
    // The data directory: the snapshots (one more while a new one is
    // written; they grow with the state, so the newest is the largest) and
    // the log. On disk, also the store, which the checkpoints share most
    // files with, and the files a compaction writes before it drops its
    // inputs (2.2x the newest checkpoint at most in the runs so far).
    const uint64_t copies = OnDisk() ? kSnapshotsKept + 2 : kSnapshotsKept + 1;
    EXPECT_LE(use[i].max_data_bytes, copies * newest_snapshot + log_allowance + 65536)
        << "member " << i << "'s data directory grew beyond its snapshots, store and log";
    EXPECT_GE(snaps.size(), 1u) << "member " << i << " has no snapshot";
    // A snapshot may be being replaced (one more file until the oldest is
    // deleted: seen under ThreadSanitizer, whose snapshot writer lags the
    // writes by tens of seconds), so the count is waited for.
    EXPECT_TRUE(WaitUntil([&] { return cluster().Snapshots(i).size() <= kSnapshotsKept; }, 30000))
        << "member " << i << " keeps too many snapshots: " << cluster().Snapshots(i).size();
    EXPECT_LE(use[i].max_snapshots, kSnapshotsKept + 1) << "member " << i;
    ASSERT_FALSE(firsts.empty()) << "member " << i << " has no log segment";
    EXPECT_GT(firsts.front(), 1u) << "member " << i << " still holds the log from index 1";
  }

  // SIGKILL a follower and write on: more than a snapshot interval, so the
  // leader compacts past the follower's log and must send it a snapshot
  // (first while it is down: that transfer fails and must be retried).
  // Restarted, it must come up from its own snapshot and short log quickly
  // and catch up.
  const int victim = OtherThan(cluster(), static_cast<int>(leader));
  cluster().Kill(victim);
  constexpr uint64_t kMore = kSnapshotEntries + 1000;
  const BulkResult more = BulkWrite(cluster(), "d", 0, kMore, 32, 2);
  EXPECT_EQ(more.failures, 0u) << JoinLines(more.errors);
  const uint64_t commit = MustStatus(cluster(), static_cast<int>(leader)).commit_index();

  const auto restart_at = Steady::now();
  ASSERT_TRUE(cluster().Restart(victim));
  ASSERT_TRUE(WaitAnswers(cluster(), victim, 15000 * kTimeScale)) << "restarted member does not answer";
  const int64_t answer_ms = ElapsedMs(restart_at);
  StatusResponse st;
  const bool caught_up = WaitForApplied(cluster(), victim, commit, 20000, &st);
  const int64_t applied_ms = ElapsedMs(restart_at);
  std::cerr << "[ info     ] member " << victim << " restarted after SIGKILL: answers Status after "
            << answer_ms << " ms, applied index " << st.applied_index() << " >= " << commit
            << " after " << applied_ms << " ms" << std::endl;
  EXPECT_TRUE(caught_up) << "restarted member applied " << st.applied_index() << " of " << commit;
  EXPECT_LT(answer_ms, 5000 * kTimeScale) << "restart from a snapshot should be quick";
  EXPECT_LT(applied_ms, 10000 * kTimeScale);

  // Its own state (stale reads on it) and the cluster's (through the leader).
  auto local = cluster().NewClientFor(victim, 5000);
  auto client = cluster().NewClient(10000);
  std::vector<std::string> problems = CheckBulkSample(*local, "c", 0, total, 1000, true);
  EXPECT_TRUE(problems.empty()) << "restarted member lost data:\n" << JoinLines(problems);
  problems = CheckBulkSample(*local, "d", 0, kMore, 300, true);
  EXPECT_TRUE(problems.empty()) << "restarted member did not catch up:\n" << JoinLines(problems);
  problems = CheckBulkSample(*client, "c", 0, total, 500, false);
  EXPECT_TRUE(problems.empty()) << "reads through the leader:\n" << JoinLines(problems);
}

// raftkvctl snapshot on a follower and on the leader; the file exists and the
// log behind it is compacted, and the member restarts from it.
TEST_P(Compaction, SnapshotOnDemand) {
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--storage_engine=" + GetParam());
  flags.push_back("--snapshot_entries=0");     // only on demand
  flags.push_back("--snapshot_log_bytes=0");
  flags.push_back("--segment_bytes=65536");
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));
  const BulkResult w = BulkWrite(cluster(), "s", 0, 5000, 16);
  ASSERT_EQ(w.failures, 0u) << JoinLines(w.errors);
  const int follower = OtherThan(cluster(), static_cast<int>(leader));
  EXPECT_TRUE(cluster().Snapshots(follower).empty()) << "automatic snapshots are off";
  ASSERT_TRUE(WaitForApplied(cluster(), follower,
                             MustStatus(cluster(), static_cast<int>(leader)).commit_index(), 10000));

  for (int member : {follower, static_cast<int>(leader)}) {
    const RunResult r = RunToCompletion(
        CtlBinary(), {"--endpoints=" + cluster().Endpoint(member), "snapshot"}, cluster().dir(),
        20000);
    EXPECT_TRUE(r.exited && r.exit_code == 0) << r.output;
    EXPECT_NE(r.output.find("OK: snapshot of " + cluster().Endpoint(member) + " at index"),
              std::string::npos)
        << r.output;
    const std::vector<std::string> snaps = cluster().Snapshots(member);
    ASSERT_EQ(snaps.size(), 1u) << "member " << member;
    EXPECT_NE(r.output.find(std::filesystem::path(snaps[0]).filename().string()),
              std::string::npos)
        << "raftkvctl should print the file: " << r.output;
    uint64_t index = 0;
    ASSERT_TRUE(ParseAnySnapshotName(std::filesystem::path(snaps[0]).filename().string(), &index,
                                     nullptr));
    EXPECT_GE(index, 5000u);
  }
  // A second snapshot on the leader: with two kept, the log before the older
  // one is gone (whole segments below it).
  const BulkResult w2 = BulkWrite(cluster(), "s2", 0, 3000, 16);
  ASSERT_EQ(w2.failures, 0u) << JoinLines(w2.errors);
  {
    const RunResult r2 = RunToCompletion(
        CtlBinary(), {"--endpoints=" + cluster().Endpoint(static_cast<int>(leader)), "snapshot"},
        cluster().dir(), 20000);
    EXPECT_TRUE(r2.exited && r2.exit_code == 0) << r2.output;
    EXPECT_EQ(cluster().Snapshots(static_cast<int>(leader)).size(), 2u);
    const std::vector<uint64_t> firsts = cluster().SegmentFirstIndexes(static_cast<int>(leader));
    ASSERT_FALSE(firsts.empty());
    EXPECT_GT(firsts.front(), 1u) << "the leader did not compact its log";
  }
  // --target picks the member; a bad one is a usage error.
  RunResult r = RunToCompletion(CtlBinary(),
                                {"--endpoints=" + cluster().Endpoint(1),
                                 "--target=" + cluster().Endpoint(follower), "snapshot"},
                                cluster().dir(), 20000);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.output;
  r = RunToCompletion(CtlBinary(), {"--target=nope", "snapshot"}, cluster().dir(), 5000);
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.output;

  // The follower restarts from the snapshot and has all the data.
  cluster().Kill(follower);
  ASSERT_TRUE(cluster().Restart(follower));
  ASSERT_TRUE(WaitAnswers(cluster(), follower, 10000));
  ASSERT_TRUE(WaitForApplied(cluster(), follower,
                             MustStatus(cluster(), static_cast<int>(leader)).commit_index(), 10000));
  auto local = cluster().NewClientFor(follower);
  std::vector<std::string> problems = CheckBulkSample(*local, "s", 0, 5000, 5000, true);
  EXPECT_TRUE(problems.empty()) << JoinLines(problems);
}

INSTANTIATE_TEST_SUITE_P(Engines, Compaction, ::testing::ValuesIn(testing_util::BackendEngines()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace integration
}  // namespace raftkv
