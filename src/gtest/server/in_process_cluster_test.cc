// Three complete members (RaftNode + GrpcServer + PeerClient) in one process,
// talking over 127.0.0.1: replication through PeerClient, leader redirects
// followed by KvClient, fail-over when the leader stops, a restarted follower
// catching up through InstallSnapshot after the leader compacted its log, and
// membership change plus leadership transfer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "client/kv_client.h"
#include "server/grpc_server.h"
#include "node/node.h"
#include "server/peer/peer_client.h"
#include "storage/bootstrap_file.h"
#include "storage/checkpoint_store.h"
#include "storage/snapshot_store.h"
#include "gtest/common/full_disk.h"
#include "gtest/common/service_test_util.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
using testing_util::TempDir;
using testing_util::WaitFor;

// A port on 127.0.0.1 that was free a moment ago (the kernel picks it).
int PickPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Member3 {
  TempDir dir;
  std::unique_ptr<RaftNode> node;
  std::unique_ptr<PeerClient> peers;
  std::unique_ptr<GrpcServer> server;
  bool running = false;

  // The order of raftkv-server's main; then everything is released (the
  // data directory's lock included), ready for a restart.
  void Stop() {
    if (!running) return;
    running = false;
    server->Shutdown(200);
    node->Stop();
    peers->Shutdown();
    server->Join();
    server.reset();
    peers.reset();
    node.reset();
  }
};

class InProcessClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 1; i <= 3; ++i) {
      addresses_.push_back("127.0.0.1:" + std::to_string(PickPort()));
      cluster_.members.push_back(Member{static_cast<uint64_t>(i), addresses_.back()});
    }
    for (int i = 0; i < 3; ++i) {
      members_.push_back(std::make_unique<Member3>());
      ASSERT_NO_FATAL_FAILURE(StartMember(i));
    }
  }

  // A fourth member, not in the cluster file: started with join. Returns its
  // index in members_.
  int AddJoiner() {
    addresses_.push_back("127.0.0.1:" + std::to_string(PickPort()));
    members_.push_back(std::make_unique<Member3>());
    const int i = static_cast<int>(members_.size()) - 1;
    StartMember(i);
    return i;
  }

  // Starts member i (index into members_) on its data directory. Members
  // beyond the cluster file join (NodeOptions::join) at `addresses_[i]`.
  void StartMember(int i) {
    Member3& m = *members_[i];
    NodeOptions no;
    const bool listed = i < static_cast<int>(cluster_.members.size());
    no.id = static_cast<uint64_t>(i + 1);
    no.cluster = cluster_;
    no.join = !listed;
    no.self_address = addresses_[i];
    no.data_dir = m.dir.path();
    no.core.tick_ms = 5;
    no.core.election_ticks = 10;
    no.core.heartbeat_ticks = 1;
    no.snapshot_entries = snapshot_entries_;
    no.log.max_segment_bytes = segment_bytes_;
    no.storage_engine = storage_engine_;
    Status s = RaftNode::Open(no, &m.node);
    ASSERT_TRUE(s.ok()) << s.ToString();
    RaftNode* raw = m.node.get();
    PeerClientOptions po;
    po.append_timeout_ms = 500;
    po.vote_timeout_ms = 200;
    po.snapshot_chunk_bytes = 16 * 1024;  // several chunks per snapshot
    po.cluster_id = [raw] { return raw->cluster_id(); };
    m.peers = std::make_unique<PeerClient>(
        cluster_, no.id, po, [raw](const raft::Message& msg) { raw->StepResponse(msg); },
        [raw](uint64_t peer) { raw->ReportUnreachable(peer); },
        [raw](uint64_t index, uint64_t term, std::unique_ptr<SnapshotSource>* out) {
          return raw->OpenSnapshotSource(index, term, out);
        });
    ServerOptions so;
    so.listen_address = addresses_[i];
    so.calls_per_cq = 8;
    m.server = std::make_unique<GrpcServer>(so, raw);
    s = m.server->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    m.node->Start(m.peers.get());
    m.running = true;
  }

  void TearDown() override {
    for (auto& m : members_) m->Stop();
    members_.clear();
  }

  // The index of the single running leader that all running members agree
  // on, or -1.
  int AgreedLeader() {
    int leader = -1;
    for (int i = 0; i < static_cast<int>(members_.size()); ++i) {
      if (!members_[i]->running) continue;
      const NodeStatus st = members_[i]->node->GetStatus();
      if (st.role == raft::Role::kLeader) {
        if (leader >= 0) return -1;
        leader = i;
      }
    }
    if (leader < 0) return -1;
    const uint64_t leader_id = static_cast<uint64_t>(leader + 1);
    for (auto& m : members_) {
      if (m->running && m->node->GetStatus().leader_id != leader_id) return -1;
    }
    return leader;
  }

  std::vector<std::string> Endpoints() const { return addresses_; }

  ClusterConfig cluster_;
  std::vector<std::string> addresses_;  // of member i + 1
  std::vector<std::unique_ptr<Member3>> members_;
  uint64_t snapshot_entries_ = 100000;
  uint64_t segment_bytes_ = 64ull << 20;
  NodeOptions::StorageEngine storage_engine_ = NodeOptions::StorageEngine::kMemory;
};

TEST_F(InProcessClusterTest, ReplicatesRedirectsAndFailsOver) {
  int leader = -1;
  ASSERT_TRUE(WaitFor([&] { return (leader = AgreedLeader()) >= 0; }, 15s)) << "no leader";

  // A client that only knows a follower is redirected to the leader.
  const int follower = (leader + 1) % 3;
  ClientOptions co;
  co.endpoints = {cluster_.members[follower].address};
  co.timeout_ms = 10000;
  KvClient via_follower(co);
  grpc::Status s = via_follower.Put("k1", "v1");
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(via_follower.last_leader(), cluster_.members[leader].address);

  // Replicated everywhere (followers apply once the commit index reaches them).
  for (auto& m : members_) {
    ASSERT_TRUE(WaitFor([&] { return m->node->state_machine().Get("k1") == std::optional<std::string>("v1"); }))
        << "member " << m->node->id() << " never applied k1";
  }
  // A stale read from the follower's own state.
  std::string value;
  bool found = false;
  ASSERT_TRUE(via_follower.Get("k1", &value, &found, /*allow_stale=*/true).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(value, "v1");

  // Many writes through a client that knows every member.
  co.endpoints = Endpoints();
  KvClient client(co);
  for (int i = 0; i < 50; ++i) {
    s = client.Put("key" + std::to_string(i), std::to_string(i));
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // Stop the leader: the other two elect a new one and keep every write.
  members_[leader]->Stop();
  int new_leader = -1;
  ASSERT_TRUE(WaitFor([&] { return (new_leader = AgreedLeader()) >= 0; }, 15s))
      << "no new leader after the old one stopped";
  EXPECT_NE(new_leader, leader);
  s = client.Put("after-failover", "yes");
  ASSERT_TRUE(s.ok()) << s.error_message();
  for (int i = 0; i < 50; i += 7) {
    ASSERT_TRUE(client.Get("key" + std::to_string(i), &value, &found).ok());
    EXPECT_TRUE(found);
    EXPECT_EQ(value, std::to_string(i));
  }
  ASSERT_TRUE(client.Get("after-failover", &value, &found).ok());
  EXPECT_EQ(value, "yes");
  ASSERT_TRUE(client.Get("k1", &value, &found).ok());
  EXPECT_EQ(value, "v1");
}


Outcome Await(const std::function<void(OutcomeCallback)>& call) {
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto future = promise->get_future();
  call([promise](Outcome out) { promise->set_value(std::move(out)); });
  if (future.wait_for(20s) != std::future_status::ready) {
    ADD_FAILURE() << "no outcome within 20 s";
    Outcome out;
    out.status = Status::DeadlineExceeded("gave up");
    return out;
  }
  return future.get();
}

Outcome ChangeSync(RaftNode* node, raft::ChangeType type, uint64_t id, const std::string& address = "") {
  raft::MembershipChange change;
  change.type = type;
  change.id = id;
  change.address = address;
  return Await([&](OutcomeCallback done) {
    node->ChangeMembership(change, Clock::now() + 10s, std::move(done));
  });
}

class SnapshotClusterTest : public InProcessClusterTest {
 protected:
  SnapshotClusterTest() {
    snapshot_entries_ = 50;
    segment_bytes_ = 8192;  // compaction removes whole segments: keep them small
  }

  // Stops a follower and writes (puts and deletes, into expected_) until the
  // leader compacted past everything it holds, so that only a snapshot can
  // bring it back. Sets leader_, follower_, follower_last_, leader_snapshot_.
  void OutrunAStoppedFollower() {
    ASSERT_TRUE(WaitFor([&] { return (leader_ = AgreedLeader()) >= 0; }, 15s)) << "no leader";
    follower_ = (leader_ + 1) % 3;
    follower_last_ = members_[follower_]->node->GetStatus().last_log_index;
    members_[follower_]->Stop();
    ClientOptions co;
    co.endpoints = Endpoints();
    co.timeout_ms = 10000;
    client_ = std::make_unique<KvClient>(co);
    for (int i = 0; i < 400; ++i) {
      const std::string key = "key" + std::to_string(i);
      const std::string value = std::to_string(i) + std::string(100, 'v');
      grpc::Status s = client_->Put(key, value);
      ASSERT_TRUE(s.ok()) << s.error_message();
      expected_[key] = value;
      if (i % 10 == 9) {
        const std::string gone = "key" + std::to_string(i - 5);
        bool existed = false;
        ASSERT_TRUE(client_->Delete(gone, &existed).ok());
        expected_.erase(gone);
      }
    }
    ASSERT_TRUE(WaitFor([&] { return (leader_ = AgreedLeader()) >= 0; }, 15s));
    RaftNode* lead = members_[leader_]->node.get();
    ASSERT_TRUE(WaitFor([&] { return lead->GetStatus().first_log_index > follower_last_ + 1; }, 15s))
        << "leader's log starts at " << lead->GetStatus().first_log_index << ", follower had "
        << follower_last_;
    leader_snapshot_ = lead->GetStatus().snapshot_index;
    ASSERT_GT(leader_snapshot_, follower_last_);
  }

  // OutrunAStoppedFollower, then restarts it with the files of its data
  // directory's `sub` folder refused (FullDisk; `refuse_creates`: new files
  // too) until it failed at least twice, and checks it catches up once
  // there is room.
  void CatchUpOnAFullDisk(const std::string& sub, bool refuse_creates) {
    ASSERT_NO_FATAL_FAILURE(OutrunAStoppedFollower());
    const std::string dir = members_[follower_]->dir.path() + "/" + sub;
    testing_util::FullDisk disk;
    disk.only_under = dir + "/";
    disk.refuse_creates = refuse_creates;
    disk.full = true;
    testing_util::ScopedInterposer installed(&disk);
    ASSERT_NO_FATAL_FAILURE(StartMember(follower_));
    RaftNode* back = members_[follower_]->node.get();
    ASSERT_TRUE(WaitFor([&] { return disk.refused.load() >= 2; }, 30s)) << "nothing reached the full disk";
    EXPECT_LT(back->GetStatus().snapshot_index, leader_snapshot_);
    // A refused transfer is the leader's to retry; a refused log restart stalls the follower.
    EXPECT_EQ(back->metrics().storage_stalled.load(), refuse_creates ? 1u : 0u);
    ASSERT_TRUE(client_->Put("during", "1").ok());  // the cluster goes on
    expected_["during"] = "1";

    disk.full = false;
    ASSERT_TRUE(WaitFor([&] { return back->GetStatus().snapshot_index >= leader_snapshot_; }, 30s))
        << "the follower never installed a snapshot once there was room";
    const uint64_t commit = members_[leader_]->node->GetStatus().commit_index;
    ASSERT_TRUE(WaitFor([&] { return back->state_machine().AppliedIndex() >= commit; }, 30s));
    EXPECT_EQ(back->metrics().storage_stalled.load(), 0u);
    EXPECT_EQ(back->state_machine().Size(), expected_.size());
    for (const auto& [key, value] : expected_) {
      ASSERT_EQ(back->state_machine().Get(key).value_or("<absent>"), value) << key;
    }
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      EXPECT_EQ(e.path().filename().string().find("tmp"), std::string::npos) << "left behind: " << e.path();
    }
    // Every member stops before the interposer its files were opened under goes.
    for (auto& m : members_) m->Stop();
  }

  // A stopped follower restarted once the leader compacted past it
  // installs the leader's snapshot and ends with the same state; then a
  // restart of it starts from its own files.
  void CatchUpThroughInstallSnapshot();

  int leader_ = -1;
  int follower_ = -1;
  uint64_t follower_last_ = 0;
  uint64_t leader_snapshot_ = 0;
  std::unique_ptr<KvClient> client_;
  std::map<std::string, std::string> expected_;
};

TEST_F(SnapshotClusterTest, RestartedFollowerCatchesUpThroughInstallSnapshot) {
  ASSERT_NO_FATAL_FAILURE(CatchUpThroughInstallSnapshot());
}

#ifdef RAFTKV_HAVE_ROCKSDB
// A follower restarted on the on-disk engine, in a cluster of the memory
// engine: it imports its own snapshot file once, then restores the leader's
// snapshot files into a new store, makes it current, and resumes from it.
TEST_F(SnapshotClusterTest, AFollowerRestartedOnRocksDbCatchesUpFromAMemoryLeader) {
  storage_engine_ = NodeOptions::StorageEngine::kRocksDb;  // for the restart only
  ASSERT_NO_FATAL_FAILURE(CatchUpThroughInstallSnapshot());
  const std::string dir = members_[follower_]->dir.path();
  std::string current = testing_util::ReadFileBytes(dir + "/KV_CURRENT");
  EXPECT_NE(current.find("kv-"), std::string::npos);
  EXPECT_EQ(current.find("kv-0-0"), std::string::npos) << "the follower's store was never replaced";
  size_t stores = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    stores += e.path().filename().string().rfind("kv-", 0) == 0;
  }
  EXPECT_EQ(stores, 1u) << "the replaced store was not removed";
}

class RocksDbSnapshotClusterTest : public SnapshotClusterTest {
 protected:
  RocksDbSnapshotClusterTest() { storage_engine_ = NodeOptions::StorageEngine::kRocksDb; }

  // The snapshots in `dir`: checkpoint directories and snapshot files.
  static void CountSnapshots(const std::string& dir, size_t* checkpoints, size_t* files) {
    *checkpoints = *files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      uint64_t index = 0, term = 0;
      const std::string name = e.path().filename().string();
      *checkpoints += CheckpointStore::ParseDirName(name, &index, &term);
      *files += SnapshotStore::ParseFileName(name, &index, &term);
    }
  }
};

// On the on-disk engine every snapshot is a checkpoint of the store, sent
// file by file; the follower makes a new store of the one it receives (its
// SST files linked), makes it current, and resumes from it.
TEST_F(RocksDbSnapshotClusterTest, AFollowerCatchesUpThroughACheckpoint) {
  ASSERT_NO_FATAL_FAILURE(CatchUpThroughInstallSnapshot());
  for (const int m : {leader_, follower_}) {
    size_t checkpoints = 0, files = 0;
    CountSnapshots(members_[m]->dir.path() + "/snap", &checkpoints, &files);
    EXPECT_GE(checkpoints, 1u) << "member " << m;
    EXPECT_EQ(files, 0u) << "member " << m << ": a checkpoint engine writes no snapshot file";
  }
  const std::string dir = members_[follower_]->dir.path();
  const std::string current = testing_util::ReadFileBytes(dir + "/KV_CURRENT");
  EXPECT_EQ(current.find("kv-0-0"), std::string::npos) << "the follower's store was never replaced";
  size_t stores = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    stores += e.path().filename().string().rfind("kv-", 0) == 0;
  }
  EXPECT_EQ(stores, 1u) << "the replaced store was not removed";
}

// A full disk refuses every file of the transfer: the partial directory
// goes, and the next transfer is installed once there is room.
TEST_F(RocksDbSnapshotClusterTest, AFollowerWithAFullDiskTakesTheCheckpointOnceThereIsRoom) {
  ASSERT_NO_FATAL_FAILURE(CatchUpOnAFullDisk("snap", false));
}
#endif

void SnapshotClusterTest::CatchUpThroughInstallSnapshot() {
  ASSERT_NO_FATAL_FAILURE(OutrunAStoppedFollower());
  const int follower = follower_;
  const uint64_t follower_last = follower_last_;
  const uint64_t leader_snapshot = leader_snapshot_;
  RaftNode* lead = members_[leader_]->node.get();
  KvClient& client = *client_;
  const std::map<std::string, std::string>& expected = expected_;
  ASSERT_NO_FATAL_FAILURE(StartMember(follower));
  RaftNode* back = members_[follower]->node.get();
  ASSERT_TRUE(WaitFor([&] { return back->GetStatus().snapshot_index >= leader_snapshot; }, 30s))
      << "the follower never installed a snapshot (its snapshot index is "
      << back->GetStatus().snapshot_index << ")";
  const uint64_t commit = lead->GetStatus().commit_index;
  ASSERT_TRUE(WaitFor([&] { return back->state_machine().AppliedIndex() >= commit; }, 30s));
  // Identical state.
  EXPECT_EQ(back->state_machine().Size(), lead->state_machine().Size());
  EXPECT_EQ(back->state_machine().Size(), expected.size());
  EXPECT_EQ(back->state_machine().SessionCount(), lead->state_machine().SessionCount());
  for (const auto& [key, value] : expected) {
    ASSERT_EQ(back->state_machine().Get(key).value_or("<absent>"), value) << key;
  }
  // Its own log restarted after the snapshot (the old one was discarded).
  EXPECT_GT(back->GetStatus().first_log_index, follower_last + 1);
  // And it keeps replicating afterwards.
  ASSERT_TRUE(client.Put("after-install", "yes").ok());
  EXPECT_TRUE(WaitFor([&] {
    return back->state_machine().Get("after-install") == std::optional<std::string>("yes");
  }));
  // A restart of the follower now starts from its own snapshot files.
  members_[follower]->Stop();
  ASSERT_NO_FATAL_FAILURE(StartMember(follower));
  back = members_[follower]->node.get();
  EXPECT_GE(back->GetStatus().snapshot_index, leader_snapshot);
  EXPECT_TRUE(WaitFor([&] {
    return back->state_machine().Get("after-install") == std::optional<std::string>("yes");
  }));
}

// A follower whose disk is full cannot take the leader's snapshot: each
// transfer fails (its partial file removed) without stopping the follower
// or the cluster, and once there is room the next one is installed.
TEST_F(SnapshotClusterTest, AFollowerWithAFullDiskTakesTheSnapshotOnceThereIsRoom) {
  ASSERT_NO_FATAL_FAILURE(CatchUpOnAFullDisk("snap", false));
}

// The snapshot arrives but its log cannot restart (no room for the reset's
// marker): the follower stalls, saying so, and finishes once there is room.
TEST_F(SnapshotClusterTest, AFollowerWhoseLogCannotRestartFinishesTheInstallOnceThereIsRoom) {
  ASSERT_NO_FATAL_FAILURE(CatchUpOnAFullDisk("log", true));
}

// Nothing on the Raft path waits for the state machine: with the leader's
// apply held for 2 s (40 election timeouts), its ticker, heartbeats and the
// lease clock's status reads go on, so no member starts an election.
TEST_F(InProcessClusterTest, ALongApplyOnTheLeaderDoesNotStopItsHeartbeats) {
  int leader = -1;
  ASSERT_TRUE(WaitFor([&] { return (leader = AgreedLeader()) >= 0; }, 15s)) << "no leader";
  const uint64_t term = members_[leader]->node->GetStatus().term;
  ClientOptions co;
  co.endpoints = {cluster_.members[leader].address};
  co.timeout_ms = 10000;
  KvClient client(co);
  ASSERT_TRUE(client.Put("warm", "1").ok());

  std::promise<void> inside;
  std::atomic<bool> held{false};
  // The hook runs on the leader's apply thread with the state machine's
  // lock held exclusively.
  auto& sm = const_cast<KvStateMachine&>(members_[leader]->node->state_machine());
  sm.SetApplyHookForTest([&](const Entry& e) {
    if (e.type() != ENTRY_COMMAND || held.exchange(true)) return;
    inside.set_value();
    std::this_thread::sleep_for(2s);
  });
  auto slow = std::async(std::launch::async, [&] { return client.Put("slow", "1"); });
  inside.get_future().wait();
  // Meanwhile the status (what the lease clock reads every 100 ms) answers
  // at once, and the term stays.
  const auto start = std::chrono::steady_clock::now();
  const NodeStatus during = members_[leader]->node->GetStatus();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms) << "GetStatus waited for the apply";
  EXPECT_EQ(during.role, raft::Role::kLeader);
  ASSERT_TRUE(slow.get().ok());
  sm.SetApplyHookForTest(nullptr);
  for (auto& m : members_) {
    const NodeStatus st = m->node->GetStatus();
    EXPECT_EQ(st.term, term) << "member " << st.id << " saw an election during the long apply";
    EXPECT_EQ(st.leader_id, static_cast<uint64_t>(leader + 1));
  }
}

TEST_F(InProcessClusterTest, AddPromoteTransferToAndRemoveAMember) {
  int leader = -1;
  ASSERT_TRUE(WaitFor([&] { return (leader = AgreedLeader()) >= 0; }, 15s)) << "no leader";
  ClientOptions co;
  co.endpoints = Endpoints();
  co.timeout_ms = 10000;
  KvClient client(co);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(client.Put("k" + std::to_string(i), "v").ok());

  // Member 4: not in the cluster file.
  const int joiner = AddJoiner();
  ASSERT_FALSE(HasFatalFailure());
  const uint64_t new_id = static_cast<uint64_t>(joiner + 1);
  RaftNode* lead = members_[leader]->node.get();
  Outcome out = ChangeSync(lead, raft::ChangeType::kAddLearner, new_id, addresses_[joiner]);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_GT(out.index, 20u);
  RaftNode* fourth = members_[joiner]->node.get();
  ASSERT_TRUE(WaitFor([&] { return fourth->state_machine().Get("k19").has_value(); }, 15s))
      << "the learner never caught up";
  // The learner may apply before its answer reaches the leader, which
  // promotes only a learner it knows has caught up.
  ASSERT_TRUE(WaitFor(
      [&] {
        const NodeStatus s = lead->GetStatus();
        return s.members.size() == 4 && s.members[3].match_index >= out.index;
      },
      15s))
      << "the leader never learnt that the learner caught up";
  // It learnt the cluster's id from the leader.
  EXPECT_NE(lead->cluster_id(), 0u);
  EXPECT_EQ(fourth->cluster_id(), lead->cluster_id());
  NodeStatus st = lead->GetStatus();
  ASSERT_EQ(st.members.size(), 4u);
  EXPECT_EQ(st.members[3].id, new_id);
  EXPECT_FALSE(st.members[3].voter);
  EXPECT_EQ(st.members[3].address, addresses_[joiner]);
  EXPECT_EQ(st.voters.size(), 3u);

  out = ChangeSync(lead, raft::ChangeType::kPromote, new_id);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  st = lead->GetStatus();
  EXPECT_EQ(st.voters.size(), 4u);
  EXPECT_TRUE(st.config_committed);
  EXPECT_EQ(st.config_index, out.index);
  EXPECT_EQ(lead->AddressOf(new_id), addresses_[joiner]);

  // Hand leadership to the new member. The leader gives a transfer up when
  // the target has not won within an election timeout (50 ms here: a loaded
  // machine or a sanitizer build can miss it); as a client would, try again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    out = Await([&](OutcomeCallback done) {
      lead->TransferLeadership(new_id, Clock::now() + 10s, std::move(done));
    });
    if (out.status.ok() || out.status.message().find("given up") == std::string::npos) break;
  }
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.leader_id, new_id);
  ASSERT_TRUE(WaitFor([&] { return AgreedLeader() == joiner; }, 15s));
  ASSERT_TRUE(client.Put("led-by", "4").ok());
  // A follower redirects to the new member's address, which is not in the
  // cluster file but in the configuration.
  Outcome redirect = members_[leader]->node->NotLeader();
  EXPECT_EQ(redirect.leader_address, addresses_[joiner]);

  // Remove the old leader.
  const uint64_t old_id = static_cast<uint64_t>(leader + 1);
  out = ChangeSync(fourth, raft::ChangeType::kRemove, old_id);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  members_[leader]->Stop();
  EXPECT_EQ(fourth->GetStatus().voters.size(), 3u);
  ASSERT_TRUE(WaitFor([&] { return AgreedLeader() >= 0; }, 15s));
  ASSERT_TRUE(client.Put("after-remove", "ok").ok());
  std::string value;
  bool found = false;
  ASSERT_TRUE(client.Get("k3", &value, &found).ok());
  EXPECT_TRUE(found);

  // Refusals: removing a non-member; transferring to a non-member.
  out = ChangeSync(fourth, raft::ChangeType::kRemove, old_id);
  EXPECT_EQ(out.status.code(), Status::Code::kFailedPrecondition)
      << out.status.message();
  out = Await([&](OutcomeCallback done) {
    fourth->TransferLeadership(old_id, Clock::now() + 10s, std::move(done));
  });
  EXPECT_EQ(out.status.code(), Status::Code::kFailedPrecondition)
      << out.status.message();
}

// A member of another cluster (another token, or an earlier cluster on the
// same addresses) is refused before its message reaches the core: its
// higher term does not disrupt this cluster.
TEST_F(InProcessClusterTest, AMemberOfAnotherClusterIsRefused) {
  int leader = -1;
  ASSERT_TRUE(WaitFor([&] { return (leader = AgreedLeader()) >= 0; }, 15s)) << "no leader";
  const int follower = (leader + 1) % 3;
  RaftNode* node = members_[follower]->node.get();
  const uint64_t mine = node->cluster_id();
  ASSERT_NE(mine, 0u);
  auto stub = internal::Peer::NewStub(
      grpc::CreateChannel(addresses_[follower], grpc::InsecureChannelCredentials()));
  AppendEntriesRequest req;
  req.set_term(node->GetStatus().term + 1000);
  req.set_leader_id(static_cast<uint64_t>(leader + 1));
  req.set_to(static_cast<uint64_t>(follower + 1));
  req.set_cluster_id(mine ^ 0x5a5a);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  AppendEntriesResponse resp;
  grpc::Status s = stub->AppendEntries(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("belongs to cluster " + ClusterIdHex(mine ^ 0x5a5a)), std::string::npos)
      << s.error_message();
  EXPECT_LT(node->GetStatus().term, req.term());
  EXPECT_EQ(node->cluster_id(), mine);
  RequestVoteRequest vote;
  vote.set_term(req.term());
  vote.set_candidate_id(req.leader_id());
  vote.set_to(req.to());
  vote.set_last_log_index(1u << 30);
  vote.set_last_log_term(req.term());
  vote.set_cluster_id(req.cluster_id());
  grpc::ClientContext vctx;
  vctx.set_deadline(std::chrono::system_clock::now() + 5s);
  RequestVoteResponse vresp;
  s = stub->RequestVote(&vctx, vote, &vresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_LT(node->GetStatus().term, req.term());
  // The cluster goes on.
  ClientOptions co;
  co.endpoints = Endpoints();
  co.timeout_ms = 10000;
  KvClient client(co);
  EXPECT_TRUE(client.Put("still", "here").ok());
}

// Leases across a leader change: the new leader gives every lease its full
// TTL from its election, so a lease granted by the old leader does not
// expire early; it does expire afterwards, at one revision on every replica.
TEST_F(InProcessClusterTest, ALeaseOutlivesALeaderChangeByItsFullTtlThenExpiresEverywhere) {
  int leader = -1;
  ASSERT_TRUE(WaitFor([&] { return (leader = AgreedLeader()) >= 0; }, 15s)) << "no leader";
  ClientOptions co;
  co.endpoints = Endpoints();
  co.timeout_ms = 10000;
  KvClient client(co);
  LeaseGrantResponse lease;
  grpc::Status s = client.LeaseGrant(3, 0, &lease);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ClientPutOptions po;
  po.lease = lease.id();
  s = client.Put("owned", "v", po, nullptr);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // Most of the TTL passes on the old leader, then it stops.
  std::this_thread::sleep_for(2s);
  members_[leader]->Stop();
  int next = -1;
  ASSERT_TRUE(WaitFor([&] { return (next = AgreedLeader()) >= 0; }, 15s)) << "no new leader";
  const auto promoted = std::chrono::steady_clock::now();
  // Past the old deadline (grant + 3 s), within the new one (election + 3 s).
  std::this_thread::sleep_until(promoted + 1800ms);
  std::string value;
  bool found = false;
  ASSERT_TRUE(client.Get("owned", &value, &found).ok());
  EXPECT_TRUE(found) << "the lease expired early across the leader change";
  // Then it expires: gone on every running replica, at the same revision.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto& m : members_) {
          if (m->running && m->node->state_machine().Get("owned").has_value()) return false;
        }
        return true;
      },
      10s))
      << "the lease never expired";
  ASSERT_TRUE(WaitFor([&] {
    int64_t revision = -1;
    for (auto& m : members_) {
      if (!m->running) continue;
      const int64_t r = m->node->state_machine().Revision();
      if (revision >= 0 && r != revision) return false;
      revision = r;
    }
    return true;
  }));
  int64_t ttl = 0;
  EXPECT_FALSE(members_[next]->node->state_machine().GetLease(lease.id(), &ttl, nullptr));
}

// A watch whose member stops resumes on another from the last revision it
// delivered: every event once, in order.
TEST_F(InProcessClusterTest, AWatchResumesOnAnotherMemberWithoutAGapOrADuplicate) {
  ASSERT_TRUE(WaitFor([&] { return AgreedLeader() >= 0; }, 15s)) << "no leader";
  ClientOptions co;
  co.endpoints = Endpoints();
  co.timeout_ms = 10000;
  KvClient writer(co);
  PutResponse first;
  grpc::Status s = writer.Put("w/start", "0", ClientPutOptions(), &first);
  ASSERT_TRUE(s.ok()) << s.error_message();
  constexpr int kWrites = 200;
  std::vector<Event> events;
  std::mutex mu;
  std::thread watcher([&] {
    KvClient client(co);  // the first endpoint first: member 1
    WatchRequest req;
    req.set_key("w/");
    req.set_range_end("w0");
    req.set_start_revision(first.revision() + 1);
    grpc::Status ws = client.Watch(req, [&](const WatchResponse& resp) {
      std::lock_guard<std::mutex> lock(mu);
      for (const Event& e : resp.events()) events.push_back(e);
      return events.size() < static_cast<size_t>(kWrites);
    });
    (void)ws;  // OK once every event came; an error when the test gave up
  });
  // On a failure, stop every member: the watch then ends (its retries run
  // out) and the thread can be joined.
  auto give_up = [&](const std::string& why) {
    ADD_FAILURE() << why;
    for (auto& m : members_) m->Stop();
  };
  for (int i = 0; i < kWrites; ++i) {
    if (i == kWrites / 2) {
      // Stop the member serving the watch (and maybe leading the writes).
      if (!WaitFor([&] {
            std::lock_guard<std::mutex> lock(mu);
            return !events.empty();
          })) {
        give_up("the watch delivered nothing");
        break;
      }
      members_[0]->Stop();
    }
    s = writer.Put("w/" + std::to_string(i % 7), std::to_string(i));
    if (!s.ok()) {
      give_up("write " + std::to_string(i) + ": " + s.error_message());
      break;
    }
  }
  watcher.join();
  ASSERT_EQ(events.size(), static_cast<size_t>(kWrites));
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(events[i].kv().value(), std::to_string(i)) << "event " << i;
    if (i > 0) {
      EXPECT_EQ(events[i].kv().mod_revision(), events[i - 1].kv().mod_revision() + 1);
    }
  }
}

}  // namespace
}  // namespace raftkv
