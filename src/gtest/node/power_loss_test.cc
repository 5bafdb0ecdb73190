// Power loss of whole members (FaultFs, src/gtest/common/fault_fs.h): real
// RaftNodes -- their log, hard state, snapshots and compaction on disk --
// in one process, talking through an in-memory network, while clients
// write. A power cut takes a member off the network, keeps only what its
// disk made durable at that instant, stops it and restarts it on that; one
// member, a minority or every member at once, at random points. Afterwards
// every acknowledged write is present and every replica holds the same
// state. (SIGKILL tests cannot see a missing sync: the page cache survives
// them.)
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/common/fault_fs.h"
#include "raft/core/message.h"
#include "proto/internal.h"
#include "node/node.h"
#include "gtest/common/service_test_util.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
using testing_util::FaultFs;
using testing_util::PutCommand;
using testing_util::TempDir;
using testing_util::WaitFor;

// An in-memory network between RaftNodes: one delivery thread, so a node's
// I/O loop never steps another node. A member that is down (powered off)
// neither sends nor receives: messages it posts are dropped, and so are
// those queued for it, replies included. InstallSnapshot streams the
// leader's file into the follower's snapshot store, as the gRPC service does.
class LocalNet {
 public:
  LocalNet() : thread_([this] { Run(); }) {}
  ~LocalNet() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void SetUp(uint64_t id, RaftNode* node) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[id] = node;
  }
  // From now on `id` sends and receives nothing, until SetUp again.
  void SetDown(uint64_t id) {
    std::unique_lock<std::mutex> lock(mu_);
    nodes_[id] = nullptr;
    // A delivery to it in progress finishes first (it holds no lock then).
    cv_.wait(lock, [&] { return delivering_to_ != id; });
  }
  bool IsUp(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(id);
    return it != nodes_.end() && it->second != nullptr;
  }
  void Post(uint64_t from, raft::Message m) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(from);
    if (it == nodes_.end() || it->second == nullptr) return;
    queue_.push_back(std::move(m));
    cv_.notify_all();
  }

 private:
  // A sender's view of the network.
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      raft::Message m = std::move(queue_.front());
      queue_.pop_front();
      RaftNode* dest = Node(m.to);
      RaftNode* src = Node(m.from);
      if (m.IsResponse()) {
        if (dest != nullptr && src != nullptr) {
          delivering_to_ = m.to;
          lock.unlock();
          dest->StepResponse(m);
          lock.lock();
          delivering_to_ = 0;
          cv_.notify_all();
        }
        continue;
      }
      if (src == nullptr) continue;
      if (dest == nullptr) {
        delivering_to_ = m.from;
        lock.unlock();
        src->ReportUnreachable(m.to);
        lock.lock();
        delivering_to_ = 0;
        cv_.notify_all();
        continue;
      }
      delivering_to_ = m.to;
      lock.unlock();
      Deliver(src, dest, std::move(m));
      lock.lock();
      delivering_to_ = 0;
      cv_.notify_all();
    }
  }

  RaftNode* Node(uint64_t id) {
    auto it = nodes_.find(id);
    return it == nodes_.end() ? nullptr : it->second;
  }

  void Deliver(RaftNode* src, RaftNode* dest, raft::Message m) {
    if (m.type == raft::MessageType::kTimeoutNow) {
      dest->StepOneWay(m);
      return;
    }
    if (m.type == raft::MessageType::kSnapshot && !CopySnapshot(src, dest, m)) {
      src->ReportUnreachable(m.to);
      return;
    }
    const uint64_t requester = m.from;
    dest->StepRequest(std::move(m), [this, requester](const raft::Message* reply) {
      if (reply == nullptr) return;
      raft::Message r = *reply;
      r.to = requester;
      Post(r.from, std::move(r));
    });
  }

  static bool CopySnapshot(RaftNode* src, RaftNode* dest, const raft::Message& m) {
    std::unique_ptr<SnapshotSource> source;
    if (!src->OpenSnapshotSource(m.snapshot.last_index(), m.snapshot.last_term(), &source).ok()) {
      return false;
    }
    std::unique_ptr<SnapshotSink> receiver;
    if (!dest->BeginReceiveSnapshot(m.snapshot.last_index(), m.snapshot.last_term(), source->format(),
                                    &receiver).ok()) {
      return false;
    }
    uint64_t offset = 0;
    for (bool last = false; !last;) {
      std::string chunk;
      if (!source->ReadChunk(offset, 8192, &chunk, &last).ok()) return false;
      if (!receiver->Append(offset, chunk).ok()) return false;
      offset += chunk.size();
    }
    SnapshotFileInfo info;
    return receiver->Finish(&info).ok();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<raft::Message> queue_;
  std::map<uint64_t, RaftNode*> nodes_;
  uint64_t delivering_to_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

class NetSender : public PeerSender {
 public:
  NetSender(LocalNet* net, uint64_t self) : net_(net), self_(self) {}
  void Send(raft::Message m) override {
    if (net_ != nullptr) net_->Post(self_, std::move(m));
  }

 private:
  LocalNet* net_;
  uint64_t self_;
};

// A cluster of RaftNodes whose data directories live under one FaultFs root.
class PowerCluster {
 public:
  PowerCluster(int members, uint64_t seed) : fs_(root_.path()), rng_(seed) {
    for (int i = 1; i <= members; ++i) {
      cluster_.members.push_back(Member{static_cast<uint64_t>(i), "local-" + std::to_string(i)});
    }
    for (int i = 1; i <= members; ++i) Start(static_cast<uint64_t>(i));
  }
  ~PowerCluster() {
    for (uint64_t id : ids()) {
      std::shared_ptr<RaftNode> n = node(id);
      if (n) {
        net_.SetDown(id);
        n->Stop();
      }
    }
  }

  FaultFs& fs() { return fs_; }
  std::mt19937_64& rng() { return rng_; }
  std::vector<uint64_t> ids() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint64_t> out;
    for (const auto& [id, m] : members_) out.push_back(id);
    return out;
  }
  std::string DataDir(uint64_t id) const { return root_.path() + "/member" + std::to_string(id); }
  std::shared_ptr<RaftNode> node(uint64_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = members_.find(id);
    return it == members_.end() ? nullptr : it->second.node;
  }

  void Start(uint64_t id) {
    NodeOptions o;
    o.id = id;
    o.cluster = cluster_;
    o.data_dir = DataDir(id);
    o.core.tick_ms = 5;
    o.core.election_ticks = 10;
    o.core.heartbeat_ticks = 1;
    o.snapshot_entries = 40;      // snapshots and log compaction during the run
    o.log.max_segment_bytes = 4096;  // segment rotation too
    std::unique_ptr<RaftNode> opened;
    Status s = RaftNode::Open(o, &opened);
    ASSERT_TRUE(s.ok()) << "member " << id << " does not restart after the power cut: "
                        << s.ToString();
    std::shared_ptr<RaftNode> n(std::move(opened));
    auto sender = std::make_shared<NetSender>(&net_, id);
    n->Start(sender.get());
    {
      std::lock_guard<std::mutex> lock(mu_);
      members_[id] = Slot{n, sender};
    }
    net_.SetUp(id, n.get());
  }

  // Powers off every member of `ids` at the same instant, keeps what their
  // disks made durable, and leaves them off.
  void PowerOff(const std::vector<uint64_t>& ids) {
    for (uint64_t id : ids) net_.SetDown(id);
    std::vector<FaultFs::Image> images;
    for (uint64_t id : ids) images.push_back(fs_.Capture(DataDir(id)));
    for (uint64_t id : ids) {
      std::shared_ptr<RaftNode> n;
      {
        std::lock_guard<std::mutex> lock(mu_);
        n = std::move(members_[id].node);
      }
      n->Stop();  // no more file calls; a client may still hold it
    }
    for (const FaultFs::Image& image : images) fs_.Restore(image);
  }

  bool IsUp(uint64_t id) { return net_.IsUp(id); }

  // The member that leads (by its own status), 0 when none.
  uint64_t Leader() const {
    for (uint64_t id : ids()) {
      std::shared_ptr<RaftNode> n = node(id);
      if (n && n->GetStatus().role == raft::Role::kLeader) return id;
    }
    return 0;
  }

  // Writes key -> value through the leader; true once acknowledged by a
  // member that was up when it answered.
  bool Write(const std::string& key, const std::string& value) {
    const uint64_t leader = Leader();
    if (leader == 0) return false;
    std::shared_ptr<RaftNode> n = node(leader);
    if (n == nullptr) return false;
    auto done = std::make_shared<std::promise<bool>>();
    std::future<bool> result = done->get_future();
    n->Propose(PutCommand(key, value), std::chrono::steady_clock::now() + 2s,
               [this, leader, done](Outcome out) {
                 // An answer from a powered-off member never reaches the client.
                 done->set_value(out.status.ok() && net_.IsUp(leader));
               });
    if (result.wait_for(5s) != std::future_status::ready) return false;
    return result.get();
  }

  // Every member up applied the leader's whole log.
  bool Converged() {
    const uint64_t leader = Leader();
    if (leader == 0) return false;
    std::shared_ptr<RaftNode> l = node(leader);
    if (!l) return false;
    const NodeStatus ls = l->GetStatus();
    if (ls.commit_index < ls.last_log_index) return false;
    for (uint64_t id : ids()) {
      std::shared_ptr<RaftNode> n = node(id);
      if (!n) return false;
      const NodeStatus st = n->GetStatus();
      if (st.applied_index != ls.last_log_index || st.term != ls.term) return false;
    }
    return true;
  }

 private:
  struct Slot {
    std::shared_ptr<RaftNode> node;
    std::shared_ptr<NetSender> sender;  // outlives the node's Stop()
  };
  TempDir root_{"powerloss_cluster"};
  FaultFs fs_;
  std::mt19937_64 rng_;
  ClusterConfig cluster_;
  mutable std::mutex mu_;  // members_ (the client threads read it)
  std::map<uint64_t, Slot> members_;
  LocalNet net_;  // destroyed first: its thread uses the nodes
};

// Which members a scenario powers off together.
enum class Cut { kOne, kMinority, kAll };

void RunScenario(int members, Cut cut, uint64_t seed, int rounds) {
  PowerCluster c(members, seed);
  ASSERT_TRUE(WaitFor([&] { return c.Leader() != 0; }, 10s)) << "no leader";
  std::map<std::string, std::string> acked;
  std::set<std::string> written;
  std::mutex acked_mu;
  std::map<std::string, std::string> acked_late;
  int next_key = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " round " + std::to_string(round));
    // A write stream, with the power cut at a random point of it: after a
    // random number of acknowledged writes, or inside a member's file call.
    std::vector<uint64_t> victims = c.ids();
    std::shuffle(victims.begin(), victims.end(), c.rng());
    const size_t count = cut == Cut::kAll ? victims.size()
                         : cut == Cut::kOne ? 1
                                            : static_cast<size_t>((members - 1) / 2);
    victims.resize(count);
    const int writes = 20 + static_cast<int>(c.rng()() % 60);
    for (int i = 0; i < writes; ++i) {
      const std::string key = "k" + std::to_string(next_key++);
      const std::string value = "v" + std::to_string(seed) + "-" + std::to_string(round) + "-" +
                                std::to_string(i);
      written.insert(key);
      if (c.Write(key, value)) acked[key] = value;
    }
    // Writes in flight while the power goes: their outcome is unknown.
    std::atomic<bool> stop{false};
    std::thread inflight([&] {
      for (int i = 0; i < 200 && !stop; ++i) {
        const std::string key = "x" + std::to_string(round) + "-" + std::to_string(i);
        std::string value = "in-flight";
        {
          std::lock_guard<std::mutex> lock(acked_mu);
          written.insert(key);
        }
        if (c.Write(key, value)) {
          std::lock_guard<std::mutex> lock(acked_mu);
          acked_late[key] = value;
        }
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(c.rng()() % 40));
    c.PowerOff(victims);
    stop = true;
    inflight.join();
    for (auto& [k, v] : acked_late) acked[k] = v;
    acked_late.clear();
    // The survivors (if any) go on; the victims come back on what survived.
    std::this_thread::sleep_for(std::chrono::milliseconds(c.rng()() % 100));
    for (uint64_t id : victims) {
      c.Start(id);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_TRUE(WaitFor([&] { return c.Converged(); }, 20s)) << "the cluster did not converge";
    for (uint64_t id : c.ids()) {
      for (const auto& [key, value] : acked) {
        const std::optional<std::string> got = c.node(id)->state_machine().Get(key);
        ASSERT_TRUE(got.has_value()) << "member " << id << " lost acknowledged write " << key;
        ASSERT_EQ(*got, value) << "member " << id << " key " << key;
      }
    }
  }
  // Every replica agrees on every key ever written, acknowledged or not.
  ASSERT_TRUE(WaitFor([&] { return c.Converged(); }, 20s));
  const uint64_t leader = c.Leader();
  const NodeStatus ls = c.node(leader)->GetStatus();
  const FaultFs::Counts counts = c.fs().counts();
  std::cout << "seed " << seed << ": " << acked.size() << " of " << written.size()
            << " writes acknowledged, log index " << ls.last_log_index << ", snapshot index "
            << ls.snapshot_index << "; file calls: " << counts.writes << " writes, "
            << counts.file_syncs << " file syncs, " << counts.dir_syncs << " directory syncs, "
            << counts.creates << " creates, " << counts.renames << " renames, " << counts.removes
            << " removes" << std::endl;
  for (uint64_t id : c.ids()) {
    EXPECT_EQ(c.node(id)->state_machine().AppliedIndex(), c.node(leader)->state_machine().AppliedIndex());
    EXPECT_EQ(c.node(id)->state_machine().Size(), c.node(leader)->state_machine().Size());
    for (const std::string& key : written) {
      EXPECT_EQ(c.node(id)->state_machine().Get(key), c.node(leader)->state_machine().Get(key))
          << "members " << id << " and " << leader << " disagree on " << key;
    }
  }
}

// One member from its first start: the data directory is created, the
// member elects itself, writes, snapshots twice (compacting its log) and
// writes again, with the power cut before every file call in turn. After
// the restart every write it acknowledged is there.
TEST(PowerLossNode, StartWritesSnapshotsAtEveryStep) {
  for (uint64_t k = 0;; ++k) {
    SCOPED_TRACE("power cut before file call " + std::to_string(k));
    TempDir root("powerloss_node");
    FaultFs fs(root.path());
    NodeOptions o;
    o.id = 1;
    o.cluster.members.push_back(Member{1, "local-1"});
    o.data_dir = root.path() + "/member1";
    o.core.tick_ms = 2;
    o.core.election_ticks = 3;
    o.core.heartbeat_ticks = 1;
    o.snapshot_entries = 0;  // only when asked
    o.log.max_segment_bytes = 512;
    std::map<std::string, uint64_t> acked_at;  // key -> file calls made when acknowledged
    fs.CaptureBeforeOp(root.path(), k);
    {
      std::unique_ptr<RaftNode> node;
      Status s = RaftNode::Open(o, &node);
      ASSERT_TRUE(s.ok()) << s.ToString();
      NetSender none(nullptr, 1);
      node->Start(&none);
      ASSERT_TRUE(WaitFor([&] { return node->GetStatus().role == raft::Role::kLeader; }, 10s));
      auto write = [&](const std::string& key) {
        std::promise<bool> done;
        node->Propose(PutCommand(key, "value-" + key), std::chrono::steady_clock::now() + 5s,
                      [&](Outcome out) { done.set_value(out.status.ok()); });
        ASSERT_TRUE(done.get_future().get()) << key;
        acked_at[key] = fs.op_count();
      };
      auto snapshot = [&] {
        std::promise<Status> done;
        node->TakeSnapshot([&](Status st, SnapshotInfo) { done.set_value(st); });
        Status st = done.get_future().get();
        ASSERT_TRUE(st.ok()) << st.ToString();
      };
      for (int i = 0; i < 5; ++i) write("a" + std::to_string(i));
      snapshot();
      for (int i = 0; i < 5; ++i) write("b" + std::to_string(i));
      snapshot();
      for (int i = 0; i < 3; ++i) write("c" + std::to_string(i));
      node->Stop();
    }
    std::optional<FaultFs::Image> image = fs.TakeCaptured();
    const bool cut_inside = image.has_value();
    if (!cut_inside) image = fs.Capture(root.path());
    fs.Restore(*image);

    std::unique_ptr<RaftNode> node;
    Status s = RaftNode::Open(o, &node);
    ASSERT_TRUE(s.ok()) << "the member does not restart after the power cut: " << s.ToString();
    NetSender none(nullptr, 1);
    node->Start(&none);
    ASSERT_TRUE(WaitFor(
        [&] {
          const NodeStatus st = node->GetStatus();
          return st.role == raft::Role::kLeader && st.applied_index == st.last_log_index;
        },
        10s));
    for (const auto& [key, at] : acked_at) {
      if (cut_inside && at > k) continue;  // acknowledged after the cut: never seen by a client
      const std::optional<std::string> got = node->state_machine().Get(key);
      ASSERT_TRUE(got.has_value()) << "acknowledged write " << key << " lost";
      EXPECT_EQ(*got, "value-" + key);
    }
    node->Stop();
    if (!cut_inside) {
      std::cout << "power cut at each of " << k << " file calls" << std::endl;
      break;
    }
  }
}

TEST(PowerLossCluster, OneMemberAtRandomPoints) {
  for (uint64_t seed = 1; seed <= 2; ++seed) RunScenario(3, Cut::kOne, seed, 4);
}

TEST(PowerLossCluster, MinorityAtRandomPoints) { RunScenario(5, Cut::kMinority, 7, 3); }

TEST(PowerLossCluster, AllMembersAtRandomPoints) {
  for (uint64_t seed = 11; seed <= 12; ++seed) RunScenario(3, Cut::kAll, seed, 4);
}

}  // namespace
}  // namespace raftkv
