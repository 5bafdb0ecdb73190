// RaftNode with snapshots: restart from the newest snapshot plus the log
// after it, automatic snapshots and log compaction, falling back to the
// previous snapshot when the newest is damaged, and refusing a data directory
// whose log starts past every usable snapshot.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gtest/common/fake_peers.h"
#include "gtest/common/full_disk.h"
#include "raft/core/membership.h"
#include "proto/internal.h"
#include "node/node.h"
#include "gtest/common/service_test_util.h"
#include "storage/hard_state_file.h"
#include "kv/kv_state_machine.h"
#include "storage/log_store.h"
#include "storage/snapshot_format.h"
#include "storage/checkpoint_store.h"
#include "storage/snapshot_store.h"

namespace raftkv {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing_util::FakePeers;
using testing_util::ReadFileBytes;
using testing_util::TempDir;
using testing_util::WaitFor;
using testing_util::WriteFileBytes;

// Collects glog messages (WARNING and above reach sinks in these tests).
class CapturedLogs : public google::LogSink {
 public:
  CapturedLogs() { google::AddLogSink(this); }
  ~CapturedLogs() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char* full_filename, const char* base_filename,
            int line, const google::LogMessageTime& time, const char* message,
            size_t message_len) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(message, message_len);
  }
  bool Contains(const std::string& needle) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& line : lines_) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

NodeOptions SingleOptions(const std::string& dir) {
  NodeOptions options;
  options.id = 1;
  options.cluster.members.push_back(Member{1, "127.0.0.1:2"});
  options.data_dir = dir;
  options.core.tick_ms = 5;
  options.core.election_ticks = 5;
  options.core.heartbeat_ticks = 1;
  options.snapshot_entries = 0;  // only on demand unless a test says otherwise
  options.snapshot_log_bytes = 0;
  options.log.max_segment_bytes = 2048;  // many segments: compaction removes some
  return options;
}

std::string PutCommand(const std::string& key, const std::string& value, uint64_t client = 0,
                       uint64_t seq = 0) {
  Command cmd;
  cmd.set_op(Command::PUT);
  cmd.set_key(key);
  cmd.set_value(value);
  cmd.set_client_id(client);
  cmd.set_sequence(seq);
  cmd.set_first_outstanding(seq);
  return cmd.SerializeAsString();
}

std::string DeleteCommand(const std::string& key) {
  Command cmd;
  cmd.set_op(Command::DELETE);
  cmd.set_key(key);
  return cmd.SerializeAsString();
}

Outcome ProposeSync(RaftNode* node, std::string command) {
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto future = promise->get_future();
  node->Propose(std::move(command), Clock::now() + 5s,
                [promise](Outcome out) { promise->set_value(std::move(out)); });
  if (future.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "no outcome within 10 s";
    Outcome out;
    out.status = Status::DeadlineExceeded("gave up");
    return out;
  }
  return future.get();
}

std::pair<Status, SnapshotInfo> TakeSnapshotSync(RaftNode* node) {
  auto promise = std::make_shared<std::promise<std::pair<Status, SnapshotInfo>>>();
  auto future = promise->get_future();
  node->TakeSnapshot([promise](Status s, SnapshotInfo info) { promise->set_value({s, info}); });
  if (future.wait_for(20s) != std::future_status::ready) {
    ADD_FAILURE() << "TakeSnapshot did not answer within 20 s";
    return {Status::IOError("gave up"), SnapshotInfo()};
  }
  return future.get();
}

// Index of the first entry of the oldest segment file in <dir>/log.
uint64_t FirstSegmentIndex(const std::string& data_dir) {
  uint64_t first = UINT64_MAX;
  for (const auto& e : fs::directory_iterator(data_dir + "/log")) {
    const std::string name = e.path().filename().string();
    if (name.size() == 24 && name.substr(20) == ".seg") {
      first = std::min<uint64_t>(first, std::stoull(name.substr(0, 20)));
    }
  }
  return first;
}

std::vector<std::string> SnapshotFiles(const std::string& data_dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(data_dir + "/snap")) {
    const std::string name = e.path().filename().string();
    uint64_t index, term;
    if (SnapshotStore::ParseFileName(name, &index, &term)) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Flips one byte in the middle of `path` (a frame checksum then fails).
void Damage(const std::string& path) {
  std::string bytes = ReadFileBytes(path);
  ASSERT_GT(bytes.size(), 100u) << path;
  bytes[bytes.size() / 2] ^= 0x5a;
  WriteFileBytes(path, bytes);
}

std::string Value(int i) { return "value-" + std::to_string(i) + std::string(40, 'x'); }

class NodeSnapshotTest : public ::testing::Test {
 protected:
  void OpenNode(const NodeOptions& options) {
    Status s = RaftNode::Open(options, &node_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void StartLeader() {
    node_->Start(&peers_);
    ASSERT_TRUE(WaitFor([&] { return node_->GetStatus().role == raft::Role::kLeader; }))
        << "single member never became leader";
  }
  void OpenAndLead(const NodeOptions& options) {
    ASSERT_NO_FATAL_FAILURE(OpenNode(options));
    ASSERT_NO_FATAL_FAILURE(StartLeader());
  }
  void Close() {
    if (node_) node_->Stop();
    node_.reset();
  }
  void TearDown() override { Close(); }

  // Puts key<i> for i in [from, to), remembering what the state must hold.
  void PutRange(int from, int to) {
    for (int i = from; i < to; ++i) {
      const std::string key = "key" + std::to_string(i);
      Outcome out = ProposeSync(node_.get(), PutCommand(key, Value(i)));
      ASSERT_TRUE(out.status.ok()) << out.status.message();
      expected_[key] = Value(i);
      last_index_ = out.index;
    }
  }
  void Delete(const std::string& key) {
    Outcome out = ProposeSync(node_.get(), DeleteCommand(key));
    ASSERT_TRUE(out.status.ok()) << out.status.message();
    expected_.erase(key);
    last_index_ = out.index;
  }
  // Opens a session and puts session-key once in it (client_, first_).
  void PutOnceInASession() {
    Command open;
    open.set_op(Command::OPEN_SESSION);
    open.set_session_timeout_ms(600000);
    Outcome opened = ProposeSync(node_.get(), open.SerializeAsString());
    ASSERT_TRUE(opened.status.ok());
    client_ = opened.apply.client_id;
    first_ = ProposeSync(node_.get(), PutCommand("session-key", "once", client_, 1));
    ASSERT_TRUE(first_.status.ok());
    expected_["session-key"] = "once";
  }
  // The session's retry of that put gets its first answer.
  void ExpectTheRetryIsADuplicate() {
    Outcome retry = ProposeSync(node_.get(), PutCommand("session-key", "twice", client_, 1));
    ASSERT_TRUE(retry.status.ok()) << retry.status.message();
    EXPECT_TRUE(retry.apply.duplicate);
    EXPECT_EQ(retry.index, first_.index);
    EXPECT_EQ(node_->state_machine().Get("session-key").value_or(""), "once");
  }
  // A log suffix: new keys, an overwrite and a delete.
  void WriteSuffix() {
    ASSERT_NO_FATAL_FAILURE(PutRange(30, 40));
    ASSERT_TRUE(ProposeSync(node_.get(), PutCommand("key3", "changed")).status.ok());
    expected_["key3"] = "changed";
    ASSERT_NO_FATAL_FAILURE(Delete("key5"));
  }
  // After a restart: the node applies its log again once it leads.
  void ExpectFullState() {
    ASSERT_TRUE(WaitFor([&] { return node_->state_machine().AppliedIndex() >= last_index_; }))
        << "applied " << node_->state_machine().AppliedIndex() << ", expected >= " << last_index_;
    const KvStateMachine& sm = node_->state_machine();
    EXPECT_EQ(sm.Size(), expected_.size());
    for (const auto& [key, value] : expected_) {
      EXPECT_EQ(sm.Get(key).value_or("<absent>"), value) << key;
    }
  }

  TempDir dir_{"snapnode"};
  FakePeers peers_;
  std::unique_ptr<RaftNode> node_;
  std::map<std::string, std::string> expected_;
  uint64_t last_index_ = 0;
  uint64_t client_ = 0;
  Outcome first_;
};

TEST_F(NodeSnapshotTest, RestartFromSnapshotAndLogSuffixGivesTheSameState) {
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(SingleOptions(dir_.path())));
  // A session with a saved result: part of the snapshot too.
  ASSERT_NO_FATAL_FAILURE(PutOnceInASession());
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 30));

  auto [s, info] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(info.last_index, node_->GetStatus().applied_index);
  EXPECT_GT(info.bytes, 0u);
  EXPECT_TRUE(fs::exists(info.path)) << info.path;
  EXPECT_EQ(info.path, dir_.path() + "/snap/" + SnapshotStore::FileName(info.last_index, info.last_term));
  EXPECT_EQ(node_->GetStatus().snapshot_index, info.last_index);
  EXPECT_EQ(node_->GetStatus().first_log_index, info.last_index + 1);  // the core compacted
  const size_t keys_at_snapshot = node_->state_machine().Size();
  ASSERT_NO_FATAL_FAILURE(WriteSuffix());
  Close();

  ASSERT_NO_FATAL_FAILURE(OpenNode(SingleOptions(dir_.path())));
  // Before it runs, the node holds exactly the snapshot's state.
  NodeStatus st = node_->GetStatus();
  EXPECT_EQ(st.snapshot_index, info.last_index);
  EXPECT_EQ(st.snapshot_term, info.last_term);
  EXPECT_EQ(st.applied_index, info.last_index);
  EXPECT_EQ(st.commit_index, info.last_index);
  EXPECT_EQ(st.first_log_index, info.last_index + 1);
  EXPECT_EQ(st.last_log_index, last_index_);
  EXPECT_EQ(node_->state_machine().AppliedIndex(), info.last_index);
  EXPECT_EQ(node_->state_machine().Size(), keys_at_snapshot);
  EXPECT_EQ(node_->state_machine().Get("key3").value_or(""), Value(3));
  EXPECT_EQ(node_->state_machine().SessionCount(), 1u);

  ASSERT_NO_FATAL_FAILURE(StartLeader());
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
  // The session survived the snapshot: a retry gets the first result.
  ASSERT_NO_FATAL_FAILURE(ExpectTheRetryIsADuplicate());
}

// A snapshot the disk refuses fails whole: no file is left, the log is
// kept, writes go on and are counted; once there is room the next one is
// taken, and a restart recovers every write from it and the log.
TEST_F(NodeSnapshotTest, ASnapshotOnAFullDiskFailsAndTheNextOneIsTaken) {
  testing_util::FullDisk disk;
  disk.only_under = "/snap/";
  testing_util::ScopedInterposer installed(&disk);
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(SingleOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 30));
  const uint64_t first_index = node_->GetStatus().first_log_index;

  disk.full = true;
  auto [refused, unused] = TakeSnapshotSync(node_.get());
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("No space left on device"), std::string::npos) << refused.ToString();
  EXPECT_GT(disk.refused.load(), 0);
  EXPECT_EQ(node_->metrics().snapshot_failures.load(), 1u);
  EXPECT_TRUE(fs::is_empty(dir_.path() + "/snap")) << "a refused snapshot left a file";
  EXPECT_EQ(node_->GetStatus().snapshot_index, 0u);
  EXPECT_EQ(node_->GetStatus().first_log_index, first_index);  // the log is kept
  ASSERT_NO_FATAL_FAILURE(PutRange(30, 35));                    // and takes writes

  disk.full = false;
  auto [s, info] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(node_->GetStatus().snapshot_index, info.last_index);
  ASSERT_NO_FATAL_FAILURE(PutRange(35, 40));
  Close();
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(SingleOptions(dir_.path())));
  ExpectFullState();
  Close();  // while `disk`, which its files were opened through, lives
}

// A member keeping its state in memory cannot install a checkpoint of a
// leader's on-disk store; a format it does not know is refused too.
TEST_F(NodeSnapshotTest, AMemoryMemberRefusesACheckpointAndUnknownFormats) {
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(SingleOptions(dir_.path())));
  std::unique_ptr<SnapshotSink> sink;
  Status s = node_->BeginReceiveSnapshot(100, 2, SnapshotFormat::kCheckpoint, &sink);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_CONTAINS(s.message(), "--storage_engine");
  s = node_->BeginReceiveSnapshot(100, 2, static_cast<SnapshotFormat>(7), &sink);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(sink, nullptr);
  s = node_->BeginReceiveSnapshot(100, 2, SnapshotFormat::kFile, &sink);
  EXPECT_TRUE(s.ok()) << s.ToString();
  Close();
}

TEST_F(NodeSnapshotTest, AutomaticSnapshotsCompactTheLog) {
  NodeOptions options = SingleOptions(dir_.path());
  options.snapshot_entries = 20;
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(options));
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 200));
  ASSERT_TRUE(WaitFor([&] { return node_->GetStatus().snapshot_index + 20 > last_index_; }))
      << "snapshot index " << node_->GetStatus().snapshot_index << ", last " << last_index_;
  // At most snapshots_kept files, and the log kept back to the oldest only.
  std::vector<std::string> files;
  uint64_t oldest = 0;
  ASSERT_TRUE(WaitFor([&] {
    files = SnapshotFiles(dir_.path());
    if (files.size() != 2) return false;
    uint64_t term = 0;
    SnapshotStore::ParseFileName(fs::path(files.front()).filename().string(), &oldest, &term);
    return FirstSegmentIndex(dir_.path()) > 1;
  })) << files.size() << " snapshot files; log starts at " << FirstSegmentIndex(dir_.path());
  EXPECT_LE(FirstSegmentIndex(dir_.path()), oldest + 1) << "the fallback snapshot lost its log";
  Close();

  ASSERT_NO_FATAL_FAILURE(OpenNode(options));
  EXPECT_GE(node_->GetStatus().snapshot_index + 20, last_index_);
  ASSERT_NO_FATAL_FAILURE(StartLeader());
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
}

TEST_F(NodeSnapshotTest, DamagedNewestSnapshotFallsBackToThePreviousOne) {
  const NodeOptions options = SingleOptions(dir_.path());
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(options));
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 60));
  auto [s1, older] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  ASSERT_NO_FATAL_FAILURE(PutRange(60, 120));
  ASSERT_NO_FATAL_FAILURE(Delete("key7"));
  auto [s2, newer] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  ASSERT_GT(newer.last_index, older.last_index);
  ASSERT_NO_FATAL_FAILURE(PutRange(120, 130));
  // The log was compacted up to the older snapshot (not further). (Its
  // files are removed in the background; closing the log finishes that.)
  Close();
  const uint64_t log_first = FirstSegmentIndex(dir_.path());
  EXPECT_GT(log_first, 1u);
  EXPECT_LE(log_first, older.last_index + 1);

  ASSERT_NO_FATAL_FAILURE(Damage(newer.path));
  CapturedLogs logs;
  ASSERT_NO_FATAL_FAILURE(OpenNode(options));
  EXPECT_TRUE(logs.Contains(newer.path)) << "no log message names the damaged " << newer.path;
  NodeStatus st = node_->GetStatus();
  EXPECT_EQ(st.snapshot_index, older.last_index);
  EXPECT_EQ(node_->state_machine().AppliedIndex(), older.last_index);
  // The damaged file is moved out of the rotation (kept for inspection).
  EXPECT_FALSE(fs::exists(newer.path));
  EXPECT_TRUE(fs::exists(newer.path + ".damaged"));
  EXPECT_EQ(SnapshotFiles(dir_.path()), std::vector<std::string>{older.path});
  // The log after the older snapshot replays to the same final state.
  ASSERT_NO_FATAL_FAILURE(StartLeader());
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
  EXPECT_FALSE(node_->state_machine().Get("key7").has_value());
  // The next snapshot keeps the older one as its fallback.
  auto [s3, next] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s3.ok()) << s3.ToString();
  EXPECT_EQ(SnapshotFiles(dir_.path()), (std::vector<std::string>{older.path, next.path}));
}

TEST_F(NodeSnapshotTest, LogStartingPastEveryUsableSnapshotIsRefused) {
  const NodeOptions options = SingleOptions(dir_.path());
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(options));
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 60));
  auto [s1, older] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s1.ok());
  ASSERT_NO_FATAL_FAILURE(PutRange(60, 120));
  auto [s2, newer] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s2.ok());
  Close();  // finishes the removals of compacted segment files
  const uint64_t log_first = FirstSegmentIndex(dir_.path());
  ASSERT_GT(log_first, 1u);

  // Both snapshots damaged: starting from the log alone would serve a state
  // that lacks entries 1..log_first-1.
  ASSERT_NO_FATAL_FAILURE(Damage(newer.path));
  ASSERT_NO_FATAL_FAILURE(Damage(older.path));
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(options, &node);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(node, nullptr);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_CONTAINS(s.message(), dir_.path());
  EXPECT_CONTAINS(s.message(), "starts at index " + std::to_string(log_first));
  EXPECT_CONTAINS(s.message(), "Snapshot used: none");
  EXPECT_CONTAINS(s.message(), newer.path);
  EXPECT_CONTAINS(s.message(), older.path);
  // The failed Open released the data directory.
  s = RaftNode::Open(options, &node);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "starts at index");
}

// Builds the data directory of a member that installed its leader's snapshot
// at index 20 (log reset to start at 21, entries 21..25 after it) and kept an
// older snapshot at 10, without running a node.
class FollowerDataDirTest : public ::testing::Test {
 protected:
  static Entry PutEntry(uint64_t index, uint64_t term) {
    Entry e;
    e.set_index(index);
    e.set_term(term);
    e.set_type(ENTRY_COMMAND);
    e.set_data(PutCommand("k" + std::to_string(index), "v" + std::to_string(index)));
    return e;
  }

  // Snapshots of the state after entries 1..index (term `term` each).
  void WriteSnapshot(uint64_t index, uint64_t term, std::string* path) {
    KvStateMachine sm;
    for (uint64_t i = 1; i <= index; ++i) sm.Apply(PutEntry(i, term));
    SnapshotWriter writer;
    sm.Snapshot(&writer);
    writer.meta().config = raft::VotersConfig({1}).SerializeAsString();
    std::unique_ptr<SnapshotStore> store;
    ASSERT_TRUE(SnapshotStore::Open(dir_.Join("snap"), &store).ok());
    SnapshotFileInfo info;
    Status s = store->Write(writer, &info);
    ASSERT_TRUE(s.ok()) << s.ToString();
    *path = info.path;
  }

  // The log: Reset(next) then entries [next, last] of `term`.
  void WriteLog(uint64_t next, uint64_t last, uint64_t term) {
    std::unique_ptr<SegmentedLog> log;
    LogRecovery recovery;
    ASSERT_TRUE(SegmentedLog::Open(dir_.Join("log"), SegmentedLogOptions(), &log, &recovery).ok());
    if (next > 1) {
      ASSERT_TRUE(log->Reset(next).ok());
    }
    std::vector<Entry> entries;
    for (uint64_t i = next; i <= last; ++i) entries.push_back(PutEntry(i, term));
    if (!entries.empty()) {
      ASSERT_TRUE(log->Append(entries).ok());
    }
    ASSERT_TRUE(log->Sync().ok());
    ASSERT_TRUE(HardStateFile(dir_.Join("hardstate")).Save(HardState{term, 0}).ok());
  }

  TempDir dir_{"followerdir"};
};

TEST_F(FollowerDataDirTest, LogStartingRightAfterTheSnapshotOpens) {
  std::string older, newer;
  ASSERT_NO_FATAL_FAILURE(WriteSnapshot(10, 2, &older));
  ASSERT_NO_FATAL_FAILURE(WriteSnapshot(20, 2, &newer));
  ASSERT_NO_FATAL_FAILURE(WriteLog(21, 25, 2));
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(SingleOptions(dir_.path()), &node);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const NodeStatus st = node->GetStatus();
  EXPECT_EQ(st.snapshot_index, 20u);
  EXPECT_EQ(st.applied_index, 20u);
  EXPECT_EQ(st.first_log_index, 21u);
  EXPECT_EQ(st.last_log_index, 25u);
  EXPECT_EQ(node->state_machine().Get("k20").value_or(""), "v20");
}

TEST_F(FollowerDataDirTest, DamagedInstalledSnapshotIsRefusedNotReplacedByAnOlderOne) {
  std::string older, newer;
  ASSERT_NO_FATAL_FAILURE(WriteSnapshot(10, 2, &older));
  ASSERT_NO_FATAL_FAILURE(WriteSnapshot(20, 2, &newer));
  ASSERT_NO_FATAL_FAILURE(WriteLog(21, 25, 2));
  ASSERT_NO_FATAL_FAILURE(Damage(newer));
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(SingleOptions(dir_.path()), &node);
  ASSERT_FALSE(s.ok()) << "started from snapshot 10 with entries 11..20 missing";
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "data directory " + dir_.path());
  EXPECT_CONTAINS(s.message(), "the log starts at index 21");
  EXPECT_CONTAINS(s.message(), "entries 11..20 are missing");
  EXPECT_CONTAINS(s.message(), "Snapshot used: " + older);
  EXPECT_CONTAINS(s.message(), "Rejected snapshot files: Corruption: " + newer);
}

TEST_F(FollowerDataDirTest, LogThatDoesNotContinueTheSnapshotIsDiscarded) {
  // Entries 1..15 of term 1, but the snapshot at 10 has term 2 (the leader's
  // snapshot was renamed into place, then the member crashed before it reset
  // its log): the log is another history and goes.
  std::string path;
  ASSERT_NO_FATAL_FAILURE(WriteSnapshot(10, 2, &path));
  ASSERT_NO_FATAL_FAILURE(WriteLog(1, 15, 1));
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(SingleOptions(dir_.path()), &node);
  ASSERT_TRUE(s.ok()) << s.ToString();
  NodeStatus st = node->GetStatus();
  EXPECT_EQ(st.snapshot_index, 10u);
  EXPECT_EQ(st.last_log_index, 10u);
  EXPECT_EQ(st.first_log_index, 11u);
  EXPECT_GE(st.term, 2u);  // raised to the snapshot's term
  node.reset();
  EXPECT_EQ(FirstSegmentIndex(dir_.path()), 11u) << "the log was not reset on disk";
  // The saved term was raised too.
  HardState hs;
  ASSERT_TRUE(HardStateFile(dir_.Join("hardstate")).Load(&hs).ok());
  EXPECT_EQ(hs.term, 2u);
}

TEST_F(FollowerDataDirTest, LogHoldingTheSnapshotsEntryKeepsItsSuffix) {
  std::string path;
  ASSERT_NO_FATAL_FAILURE(WriteSnapshot(10, 2, &path));
  ASSERT_NO_FATAL_FAILURE(WriteLog(1, 15, 2));
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(SingleOptions(dir_.path()), &node);
  ASSERT_TRUE(s.ok()) << s.ToString();
  NodeStatus st = node->GetStatus();
  EXPECT_EQ(st.snapshot_index, 10u);
  EXPECT_EQ(st.first_log_index, 11u);
  EXPECT_EQ(st.last_log_index, 15u);
}

#ifdef RAFTKV_HAVE_ROCKSDB
// The on-disk engine: a restart opens the store where it was and applies only
// the log after it; a directory another engine wrote is imported once.
NodeOptions RocksDbOptions(const std::string& dir) {
  NodeOptions options = SingleOptions(dir);
  options.storage_engine = NodeOptions::StorageEngine::kRocksDb;
  return options;
}

std::string KvCurrent(const std::string& dir) {
  std::string line = ReadFileBytes(dir + "/KV_CURRENT");
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

using PersistentStoreTest = NodeSnapshotTest;

TEST_F(PersistentStoreTest, ARestartOpensTheStoreWhereItWas) {
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(RocksDbOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(PutOnceInASession());
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 30));
  auto [s, info] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(WriteSuffix());
  Close();
  EXPECT_EQ(KvCurrent(dir_.path()), "kv-0-0");

  // Before it runs, the node holds the state of its last entry (closing
  // flushed the store): nothing is applied again.
  ASSERT_NO_FATAL_FAILURE(OpenNode(RocksDbOptions(dir_.path())));
  NodeStatus st = node_->GetStatus();
  EXPECT_EQ(st.snapshot_index, info.last_index);
  EXPECT_EQ(st.applied_index, last_index_);
  EXPECT_EQ(st.commit_index, last_index_);
  EXPECT_EQ(st.last_log_index, last_index_);
  EXPECT_EQ(node_->state_machine().AppliedIndex(), last_index_);
  EXPECT_EQ(node_->state_machine().Size(), expected_.size());
  EXPECT_EQ(node_->state_machine().Get("key3").value_or(""), "changed");
  EXPECT_FALSE(node_->state_machine().Get("key5").has_value());
  ASSERT_NO_FATAL_FAILURE(StartLeader());
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
  ASSERT_NO_FATAL_FAILURE(ExpectTheRetryIsADuplicate());
  ASSERT_NO_FATAL_FAILURE(PutRange(40, 45));
  Close();
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(RocksDbOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
}

// Switching engines keeps the data: the snapshot and the log rebuild it.
TEST_F(PersistentStoreTest, ADirectoryTheMemoryEngineWroteIsImportedOnce) {
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(SingleOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 30));
  auto [s, info] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(PutRange(30, 40));
  Close();

  // The snapshot is restored into a new store, which becomes the current one.
  ASSERT_NO_FATAL_FAILURE(OpenNode(RocksDbOptions(dir_.path())));
  EXPECT_EQ(node_->state_machine().AppliedIndex(), info.last_index);
  EXPECT_EQ(KvCurrent(dir_.path()), "kv-" + std::to_string(info.last_index) + "-" + std::to_string(info.last_term));
  EXPECT_FALSE(fs::exists(dir_.path() + "/kv-0-0"));  // the empty store it replaced
  ASSERT_NO_FATAL_FAILURE(StartLeader());
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
  Close();
  // Once imported, the store is where a restart resumes.
  ASSERT_NO_FATAL_FAILURE(OpenNode(RocksDbOptions(dir_.path())));
  EXPECT_GE(node_->state_machine().AppliedIndex(), last_index_);
  Close();
  // And back: the memory engine starts from the snapshot and the log.
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(SingleOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
}

// A store that applied entries the log does not hold (the log was lost or
// replaced) cannot be resumed: refused, naming the directory.
TEST_F(PersistentStoreTest, AStoreAheadOfTheLogIsRefused) {
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(RocksDbOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 10));
  Close();
  fs::remove_all(dir_.path() + "/log");
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(RocksDbOptions(dir_.path()), &node);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_CONTAINS(s.message(), dir_.path());
  EXPECT_CONTAINS(s.message(), "applied entries up to index " + std::to_string(last_index_));
  EXPECT_CONTAINS(s.message(), "the log ends at index 0");
}
// A checkpoint newer than the store (received from a leader just before a
// crash cut its install short) is installed when the member starts, and
// the log that does not continue it is discarded.
TEST_F(PersistentStoreTest, ACheckpointNewerThanTheStoreIsInstalledAtStart) {
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(RocksDbOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 10));
  Close();
  TempDir behind("behind");
  fs::copy(dir_.path(), behind.path(), fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(RocksDbOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(PutRange(10, 30));
  auto [s, info] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(info.last_index, last_index_);
  Close();
  const std::string name = CheckpointStore::DirName(info.last_index, info.last_term);
  EXPECT_FALSE(fs::exists(dir_.path() + "/snap/" + SnapshotStore::FileName(info.last_index, info.last_term)))
      << "the on-disk engine's snapshots are checkpoints";
  fs::copy(dir_.path() + "/snap/" + name, behind.path() + "/snap/" + name, fs::copy_options::recursive);

  ASSERT_NO_FATAL_FAILURE(OpenNode(RocksDbOptions(behind.path())));
  EXPECT_EQ(node_->state_machine().AppliedIndex(), info.last_index);
  EXPECT_EQ(KvCurrent(behind.path()), "kv-" + std::to_string(info.last_index) + "-" + std::to_string(info.last_term));
  NodeStatus st = node_->GetStatus();
  EXPECT_EQ(st.snapshot_index, info.last_index);
  EXPECT_EQ(st.first_log_index, info.last_index + 1);
  ASSERT_NO_FATAL_FAILURE(StartLeader());
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
  Close();
}

// A newest checkpoint whose manifest does not read is moved aside at start;
// the previous one is the member's snapshot (the store holds the state).
TEST_F(PersistentStoreTest, ADamagedNewestCheckpointIsMovedAside) {
  ASSERT_NO_FATAL_FAILURE(OpenAndLead(RocksDbOptions(dir_.path())));
  ASSERT_NO_FATAL_FAILURE(PutRange(0, 10));
  auto [s1, older] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  ASSERT_NO_FATAL_FAILURE(PutRange(10, 20));
  auto [s2, newer] = TakeSnapshotSync(node_.get());
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  ASSERT_GT(newer.last_index, older.last_index);
  ASSERT_NO_FATAL_FAILURE(PutRange(20, 25));
  Close();
  const std::string damaged = newer.path + "/" + checkpoint::kManifestName;
  std::string bytes = ReadFileBytes(damaged);
  ASSERT_FALSE(bytes.empty());
  bytes[bytes.size() / 2] ^= 0x40;
  WriteFileBytes(damaged, bytes);

  ASSERT_NO_FATAL_FAILURE(OpenNode(RocksDbOptions(dir_.path())));
  EXPECT_EQ(node_->GetStatus().snapshot_index, older.last_index);
  EXPECT_TRUE(fs::is_directory(newer.path + ".damaged"));
  EXPECT_FALSE(fs::exists(newer.path));
  ASSERT_NO_FATAL_FAILURE(StartLeader());
  ASSERT_NO_FATAL_FAILURE(ExpectFullState());
  Close();
}
#endif  // RAFTKV_HAVE_ROCKSDB

}  // namespace
}  // namespace raftkv
