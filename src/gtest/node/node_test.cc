// Tests of RaftNode (node/node.h): the I/O loop and ticker around the
// consensus core, run in-process with a PeerSender that never touches the
// network.
#include "node/node.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proto/internal.h"
#include "storage/bootstrap_file.h"
#include "gtest/common/bootstrap_v1.h"
#include "gtest/common/fake_peers.h"
#include "gtest/common/full_disk.h"
#include "gtest/common/service_test_util.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
using testing_util::FakePeers;
using testing_util::PutCommand;
using testing_util::TempDir;
using testing_util::WaitFor;

ClusterConfig Cluster(int members) {
  ClusterConfig config;
  for (int i = 1; i <= members; ++i) {
    // Nothing listens there: the node under test never dials its peers.
    config.members.push_back(Member{static_cast<uint64_t>(i), "127.0.0.1:" + std::to_string(1 + i)});
  }
  return config;
}

NodeOptions Options(const std::string& dir, int members = 1, uint64_t id = 1) {
  NodeOptions options;
  options.id = id;
  options.cluster = Cluster(members);
  options.data_dir = dir;
  options.core.tick_ms = 5;
  options.core.election_ticks = 5;
  options.core.heartbeat_ticks = 1;
  return options;
}

std::string DeleteCommand(const std::string& key) {
  Command cmd;
  cmd.set_op(Command::DELETE);
  cmd.set_key(key);
  return cmd.SerializeAsString();
}

// Collects the one Outcome of a call. Also checks the callback runs once. The
// callback owns its state, so it may safely run after the waiter is gone.
class OutcomeWaiter {
 public:
  OutcomeCallback Callback() {
    return [state = state_](Outcome out) {
      const int calls = ++state->calls;
      EXPECT_EQ(calls, 1) << "outcome callback ran twice";
      if (calls == 1) state->promise.set_value(std::move(out));
    };
  }
  // True if the outcome is already known (e.g. the call was refused inline).
  bool ready() { return future_.wait_for(0s) == std::future_status::ready; }
  Outcome Get() {
    if (future_.wait_for(10s) != std::future_status::ready) {
      ADD_FAILURE() << "no outcome within 10 s";
      Outcome out;
      out.status = Status::DeadlineExceeded("test gave up waiting");
      return out;
    }
    return future_.get();
  }

 private:
  struct State {
    std::atomic<int> calls{0};
    std::promise<Outcome> promise;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::future<Outcome> future_ = state_->promise.get_future();
};

Outcome ProposeSync(RaftNode* node, std::string command, Clock::duration timeout = 5s) {
  OutcomeWaiter waiter;
  node->Propose(std::move(command), Clock::now() + timeout, waiter.Callback());
  return waiter.Get();
}

Outcome ReadSync(RaftNode* node, Clock::duration timeout = 5s) {
  OutcomeWaiter waiter;
  node->ReadIndex(Clock::now() + timeout, waiter.Callback());
  return waiter.Get();
}

bool IsLeader(const RaftNode& node) { return node.GetStatus().role == raft::Role::kLeader; }

std::string StatusText(const Status& s) { return s.ToString(); }

class NodeTest : public ::testing::Test {
 protected:
  // Opens and starts a node on dir_ and waits until it leads.
  void StartSingle() {
    Status s = RaftNode::Open(Options(dir_.path()), &node_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    node_->Start(&peers_);
    ASSERT_TRUE(WaitFor([&] { return IsLeader(*node_); })) << "single member never became leader";
  }

  void TearDown() override {
    if (node_) node_->Stop();
    node_.reset();
  }

  TempDir dir_;
  FakePeers peers_;
  std::unique_ptr<RaftNode> node_;
};

// ---------------------------------------------------------------------------
// Open
// ---------------------------------------------------------------------------

TEST_F(NodeTest, OpenRefusesMemberNotInCluster) {
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(Options(dir_.path(), 3, 4), &node);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(node, nullptr);
  EXPECT_CONTAINS(s.message(), "member id 4");
  EXPECT_CONTAINS(s.message(), "not listed");
}

TEST_F(NodeTest, OpenRefusesIdZero) {
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(Options(dir_.path(), 1, 0), &node);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(node, nullptr);
  EXPECT_CONTAINS(s.message(), "positive");
}

TEST_F(NodeTest, OpenRefusesLockedDataDir) {
  std::unique_ptr<RaftNode> first;
  Status s = RaftNode::Open(Options(dir_.path()), &first);
  ASSERT_TRUE(s.ok()) << s.ToString();

  std::unique_ptr<RaftNode> second;
  s = RaftNode::Open(Options(dir_.path()), &second);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(second, nullptr);
  EXPECT_CONTAINS(s.message(), "in use");
  EXPECT_CONTAINS(s.message(), dir_.path() + "/LOCK");
  EXPECT_CONTAINS(s.message(), "locked");

  // The lock goes with the first node.
  first.reset();
  s = RaftNode::Open(Options(dir_.path()), &second);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// The founders of a cluster compute the same id from the cluster file and
// the token; a member that joins learns it from the first leader that
// reaches it, keeps it across restarts, and refuses any other after that.
TEST_F(NodeTest, ClusterIdIsSharedByFoundersAndAdoptedByJoiners) {
  TempDir second, other, joiner;
  std::unique_ptr<RaftNode> a, b, c, d;
  ASSERT_TRUE(RaftNode::Open(Options(dir_.path(), 3, 1), &a).ok());
  ASSERT_TRUE(RaftNode::Open(Options(second.path(), 3, 2), &b).ok());
  NodeOptions other_token = Options(other.path(), 3, 3);
  other_token.initial_cluster_token = "another";
  ASSERT_TRUE(RaftNode::Open(other_token, &c).ok());
  EXPECT_NE(a->cluster_id(), 0u);
  EXPECT_EQ(a->cluster_id(), b->cluster_id());
  EXPECT_NE(c->cluster_id(), a->cluster_id());

  NodeOptions join = Options(joiner.path(), 3, 4);
  join.join = true;
  join.self_address = "127.0.0.1:9";
  ASSERT_TRUE(RaftNode::Open(join, &d).ok());
  EXPECT_EQ(d->cluster_id(), 0u);
  // Unknown on either side: accepted, nothing learnt from a candidate.
  EXPECT_TRUE(d->CheckClusterId(0, 1, true).ok());
  EXPECT_TRUE(d->CheckClusterId(a->cluster_id(), 1, false).ok());
  EXPECT_EQ(d->cluster_id(), 0u);
  Status s = d->CheckClusterId(a->cluster_id(), 1, true);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(d->cluster_id(), a->cluster_id());
  s = d->CheckClusterId(c->cluster_id(), 3, true);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find(ClusterIdHex(c->cluster_id())), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(ClusterIdHex(a->cluster_id())), std::string::npos) << s.ToString();
  EXPECT_FALSE(a->CheckClusterId(c->cluster_id(), 3, false).ok());

  // Durable: the founders and the joiner reopen with the same id, whatever
  // token or cluster file they are given then.
  const uint64_t id = a->cluster_id();
  a.reset();
  d.reset();
  NodeOptions reopen = Options(dir_.path(), 3, 1);
  reopen.initial_cluster_token = "ignored";
  ASSERT_TRUE(RaftNode::Open(reopen, &a).ok());
  EXPECT_EQ(a->cluster_id(), id);
  ASSERT_TRUE(RaftNode::Open(join, &d).ok());
  EXPECT_EQ(d->cluster_id(), id);
}

// A directory recorded before cluster ids existed keeps none: its members
// might compute different ones from cluster files edited since.
TEST_F(NodeTest, ADirectoryFromBeforeClusterIdsKeepsNone) {
  ASSERT_TRUE(RaftNode::Open(Options(dir_.path(), 3, 1), &node_).ok());
  ASSERT_NE(node_->cluster_id(), 0u);
  node_.reset();
  MembershipConfig config;
  uint64_t id = 0;
  bool found = false;
  ASSERT_TRUE(BootstrapFile(dir_.Join("bootstrap")).Load(&config, &id, &found).ok());
  testing_util::WriteVersionOneBootstrapFile(dir_.Join("bootstrap"), config);
  ASSERT_TRUE(RaftNode::Open(Options(dir_.path(), 3, 1), &node_).ok());
  EXPECT_EQ(node_->cluster_id(), 0u);
  EXPECT_TRUE(node_->CheckClusterId(12345, 2, false).ok());
}

TEST_F(NodeTest, OpenWithoutStartThenDestroy) {
  Status s = RaftNode::Open(Options(dir_.path()), &node_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const NodeStatus st = node_->GetStatus();
  EXPECT_EQ(st.id, 1u);
  EXPECT_EQ(st.address, "127.0.0.1:2");
  EXPECT_EQ(st.role, raft::Role::kFollower);
  EXPECT_EQ(st.term, 0u);
  EXPECT_EQ(st.commit_index, 0u);
  EXPECT_EQ(st.last_log_index, 0u);
  EXPECT_EQ(st.voters, std::vector<uint64_t>{1});
  node_.reset();  // never started: must not hang or crash
}

TEST_F(NodeTest, OpenCreatesMissingDataDir) {
  const std::string nested = dir_.Join("a/b/c");
  Status s = RaftNode::Open(Options(nested), &node_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(std::filesystem::exists(nested + "/LOCK"));
}

TEST_F(NodeTest, OpenRefusesADataDirThatIsAFile) {
  const std::string file = dir_.Join("plain-file");
  testing_util::WriteFileBytes(file, "x");
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(Options(file), &node);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(node, nullptr);
  EXPECT_CONTAINS(s.message(), file);
}

TEST_F(NodeTest, OpenRefusesADamagedHardStateAndReleasesTheLock) {
  testing_util::WriteFileBytes(dir_.Join("hardstate"), "definitely not a hard state file");
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(Options(dir_.path()), &node);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(node, nullptr);
  EXPECT_CONTAINS(s.message(), dir_.Join("hardstate"));
  // The failed Open must not keep the directory locked.
  ASSERT_TRUE(HardStateFile(dir_.Join("hardstate")).Save(HardState{2, 1}).ok());
  s = RaftNode::Open(Options(dir_.path()), &node);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(node->GetStatus().term, 2u);
}

TEST_F(NodeTest, OpenRefusesALogAheadOfTheHardState) {
  StartSingle();
  ASSERT_TRUE(ProposeSync(node_.get(), PutCommand("k", "v")).status.ok());
  const uint64_t term = node_->GetStatus().term;
  node_->Stop();
  node_.reset();
  // Roll the saved term back below the log's last term.
  ASSERT_TRUE(HardStateFile(dir_.Join("hardstate")).Save(HardState{term - 1, 0}).ok());
  std::unique_ptr<RaftNode> node;
  Status s = RaftNode::Open(Options(dir_.path()), &node);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "ahead of the saved term");
  // Put back, it opens (and the failed Open released the lock).
  ASSERT_TRUE(HardStateFile(dir_.Join("hardstate")).Save(HardState{term, 1}).ok());
  s = RaftNode::Open(Options(dir_.path()), &node);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// ---------------------------------------------------------------------------
// A single-member cluster
// ---------------------------------------------------------------------------

TEST_F(NodeTest, SingleMemberElectsItselfAndSendsNothing) {
  StartSingle();
  const NodeStatus st = node_->GetStatus();
  EXPECT_EQ(st.role, raft::Role::kLeader);
  EXPECT_EQ(st.leader_id, 1u);
  EXPECT_EQ(st.leader_address, "127.0.0.1:2");
  EXPECT_GE(st.term, 1u);
  // The leader's no-op commits and is applied without any peer.
  ASSERT_TRUE(WaitFor([&] { return node_->GetStatus().applied_index >= 1; }));
  const NodeStatus later = node_->GetStatus();
  EXPECT_GE(later.commit_index, 1u);
  EXPECT_GE(later.durable_index, 1u);
  EXPECT_EQ(node_->state_machine().AppliedIndex(), later.applied_index);
  std::this_thread::sleep_for(30ms);  // several heartbeat ticks
  EXPECT_EQ(peers_.sent_count(), 0u);
}

TEST_F(NodeTest, ProposePutThenReadIndexSeesIt) {
  StartSingle();
  const uint64_t term = node_->GetStatus().term;
  Outcome put = ProposeSync(node_.get(), PutCommand("alpha", "one"));
  ASSERT_TRUE(put.status.ok()) << StatusText(put.status);
  EXPECT_GE(put.index, 2u);  // after the leader's no-op
  EXPECT_EQ(put.term, term);
  EXPECT_TRUE(put.apply.ok);

  Outcome read = ReadSync(node_.get());
  ASSERT_TRUE(read.status.ok()) << StatusText(read.status);
  EXPECT_GE(read.index, put.index);
  EXPECT_GE(node_->state_machine().AppliedIndex(), read.index);
  auto value = node_->state_machine().Get("alpha");
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(*value, "one");

  // Overwrite, then indexes keep increasing.
  Outcome put2 = ProposeSync(node_.get(), PutCommand("alpha", "two"));
  ASSERT_TRUE(put2.status.ok()) << StatusText(put2.status);
  EXPECT_GT(put2.index, put.index);
  ASSERT_TRUE(ReadSync(node_.get()).status.ok());
  EXPECT_EQ(node_->state_machine().Get("alpha").value_or("<missing>"), "two");

  const NodeStatus st = node_->GetStatus();
  EXPECT_GE(st.commit_index, put2.index);
  EXPECT_GE(st.applied_index, put2.index);
  EXPECT_GE(st.last_log_index, put2.index);
}

TEST_F(NodeTest, DeleteReportsWhetherTheKeyExisted) {
  StartSingle();
  ASSERT_TRUE(ProposeSync(node_.get(), PutCommand("k", "v")).status.ok());
  Outcome del = ProposeSync(node_.get(), DeleteCommand("k"));
  ASSERT_TRUE(del.status.ok()) << StatusText(del.status);
  EXPECT_TRUE(del.apply.existed);
  Outcome again = ProposeSync(node_.get(), DeleteCommand("k"));
  ASSERT_TRUE(again.status.ok()) << StatusText(again.status);
  EXPECT_FALSE(again.apply.existed);
  EXPECT_GT(again.index, del.index);
  EXPECT_FALSE(node_->state_machine().Get("k").has_value());
}

TEST_F(NodeTest, UndecodableCommandIsCommittedButReportedInternal) {
  StartSingle();
  Outcome out = ProposeSync(node_.get(), std::string("\xff\xff\xff\xff", 4));
  EXPECT_EQ(out.status.code(), Status::Code::kInternal) << StatusText(out.status);
  EXPECT_FALSE(out.apply.ok);
  EXPECT_GE(out.index, 2u);
  // The node keeps working.
  Outcome put = ProposeSync(node_.get(), PutCommand("after", "bad"));
  ASSERT_TRUE(put.status.ok()) << StatusText(put.status);
  EXPECT_EQ(put.index, out.index + 1);
}

TEST_F(NodeTest, ConcurrentProposalsAllCommitWithDistinctIndexes) {
  StartSingle();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  std::mutex mu;
  std::vector<uint64_t> indexes;
  std::atomic<int> failures{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        node_->Propose(PutCommand("t" + std::to_string(t) + "-" + std::to_string(i), std::to_string(i)),
                       Clock::now() + 10s, [&](Outcome out) {
                         if (!out.status.ok()) {
                           ++failures;
                         } else {
                           std::lock_guard<std::mutex> lock(mu);
                           indexes.push_back(out.index);
                         }
                         ++done;
                       });
      }
    });
  }
  for (auto& th : threads) th.join();
  const bool all_done = WaitFor([&] { return done.load() == kThreads * kPerThread; }, 20s);
  if (!all_done) node_->Stop();  // completes the rest before the locals go away
  ASSERT_TRUE(all_done) << done.load() << " of " << kThreads * kPerThread << " outcomes";
  EXPECT_EQ(failures.load(), 0);
  {
    std::lock_guard<std::mutex> lock(mu);
    std::sort(indexes.begin(), indexes.end());
    ASSERT_EQ(indexes.size(), static_cast<size_t>(kThreads * kPerThread));
    EXPECT_EQ(std::adjacent_find(indexes.begin(), indexes.end()), indexes.end())
        << "two proposals got the same index";
    EXPECT_EQ(indexes.back() - indexes.front() + 1, indexes.size()) << "indexes not contiguous";
  }
  ASSERT_TRUE(ReadSync(node_.get()).status.ok());
  EXPECT_EQ(node_->state_machine().Size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(node_->state_machine().Get("t7-99").value_or(""), "99");
}

TEST_F(NodeTest, RestartRebuildsStateFromTheLog) {
  StartSingle();
  const uint64_t first_term = node_->GetStatus().term;
  uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    Outcome out = ProposeSync(node_.get(), PutCommand("key" + std::to_string(i), "v" + std::to_string(i)));
    ASSERT_TRUE(out.status.ok()) << StatusText(out.status);
    last = out.index;
  }
  ASSERT_TRUE(ProposeSync(node_.get(), PutCommand("key3", "changed")).status.ok());
  Outcome del = ProposeSync(node_.get(), DeleteCommand("key5"));
  ASSERT_TRUE(del.status.ok());
  last = del.index;
  node_->Stop();
  node_.reset();

  // Reopen: the log is there, the state machine is rebuilt only by applying
  // it once the node commits again.
  Status s = RaftNode::Open(Options(dir_.path()), &node_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  NodeStatus st = node_->GetStatus();
  EXPECT_EQ(st.last_log_index, last);
  EXPECT_EQ(st.term, first_term);
  EXPECT_EQ(node_->state_machine().Size(), 0u);

  FakePeers peers;
  node_->Start(&peers);
  ASSERT_TRUE(WaitFor([&] { return IsLeader(*node_); }));
  ASSERT_TRUE(WaitFor([&] { return node_->state_machine().AppliedIndex() > last; }))
      << "applied " << node_->state_machine().AppliedIndex() << ", expected > " << last;
  st = node_->GetStatus();
  EXPECT_GT(st.term, first_term);
  EXPECT_GT(st.commit_index, last);  // the new term's no-op
  const KvStateMachine& sm = node_->state_machine();
  EXPECT_EQ(sm.Size(), 19u);
  EXPECT_EQ(sm.Get("key0").value_or(""), "v0");
  EXPECT_EQ(sm.Get("key3").value_or(""), "changed");
  EXPECT_FALSE(sm.Get("key5").has_value());
  EXPECT_EQ(sm.Get("key19").value_or(""), "v19");

  // And it keeps going from there.
  Outcome out = ProposeSync(node_.get(), PutCommand("new", "x"));
  ASSERT_TRUE(out.status.ok()) << StatusText(out.status);
  EXPECT_GT(out.index, last + 1);
  node_->Stop();
  node_.reset();
  EXPECT_EQ(peers.sent_count(), 0u);
}

// A full disk stops the member from acknowledging, without a crash; once
// there is room again, the write it held goes through, and nothing is lost.
TEST_F(NodeTest, AFullDiskStallsWritesUntilThereIsRoomAgain) {
  testing_util::FullDisk disk;
  testing_util::ScopedInterposer installed(&disk);
  StartSingle();
  ASSERT_TRUE(ProposeSync(node_.get(), PutCommand("before", "1")).status.ok());

  disk.full = true;
  Outcome out = ProposeSync(node_.get(), PutCommand("during", "2"), 300ms);
  EXPECT_EQ(out.status.code(), Status::Code::kDeadlineExceeded) << out.status.ToString();
  EXPECT_GT(disk.refused.load(), 0);
  EXPECT_EQ(node_->metrics().storage_stalled.load(), 1u);
  EXPECT_GT(node_->metrics().storage_errors.load(), 0u);
  EXPECT_FALSE(node_->state_machine().Get("during").has_value());

  disk.full = false;
  ASSERT_TRUE(WaitFor([&] { return node_->metrics().storage_stalled.load() == 0; }, 5s));
  ASSERT_TRUE(ProposeSync(node_.get(), PutCommand("after", "3")).status.ok());
  EXPECT_TRUE(node_->state_machine().Get("during").has_value());

  // Durable: a restart finds all three.
  node_->Stop();
  node_.reset();
  file::SetInterposer(nullptr);
  ASSERT_TRUE(RaftNode::Open(Options(dir_.path()), &node_).ok());
  node_->Start(&peers_);
  ASSERT_TRUE(WaitFor([&] { return node_->state_machine().Get("after").has_value(); }, 5s));
  EXPECT_TRUE(node_->state_machine().Get("before").has_value());
  EXPECT_TRUE(node_->state_machine().Get("during").has_value());
}

// Stopping a member that waits for room stops it: the write it held is
// not acknowledged.
TEST_F(NodeTest, AMemberWaitingForRoomStops) {
  testing_util::FullDisk disk;
  testing_util::ScopedInterposer installed(&disk);
  StartSingle();
  disk.full = true;
  OutcomeWaiter waiter;
  node_->Propose(PutCommand("k", "v"), Clock::now() + 10s, waiter.Callback());
  ASSERT_TRUE(WaitFor([&] { return node_->metrics().storage_stalled.load() == 1; }, 5s));
  node_->Stop();
  EXPECT_EQ(waiter.Get().status.code(), Status::Code::kUnavailable);
}

TEST_F(NodeTest, CallsOnAStoppedNodeFailUnavailable) {
  StartSingle();
  node_->Stop();
  node_->Stop();  // idempotent

  OutcomeWaiter put;
  node_->Propose(PutCommand("k", "v"), Clock::now() + 1s, put.Callback());
  ASSERT_TRUE(put.ready()) << "a stopped node must answer at once";
  Outcome out = put.Get();
  EXPECT_EQ(out.status.code(), Status::Code::kUnavailable) << StatusText(out.status);

  OutcomeWaiter read;
  node_->ReadIndex(Clock::now() + 1s, read.Callback());
  ASSERT_TRUE(read.ready());
  out = read.Get();
  EXPECT_EQ(out.status.code(), Status::Code::kUnavailable) << StatusText(out.status);

  std::atomic<int> replies{0};
  raft::Message vote;
  vote.type = raft::MessageType::kVote;
  vote.from = 2;
  vote.to = 1;
  node_->StepRequest(vote, [&](const raft::Message* reply) {
    EXPECT_EQ(reply, nullptr);
    ++replies;
  });
  EXPECT_EQ(replies.load(), 1);
  // Responses and reports are ignored without harm.
  node_->StepResponse(raft::Message{});
  node_->ReportUnreachable(2);
}

// ---------------------------------------------------------------------------
// Three members, the other two simulated by FakePeers
// ---------------------------------------------------------------------------

class ThreeMemberTest : public NodeTest {
 protected:
  void OpenAndStart() {
    Status s = RaftNode::Open(Options(dir_.path(), 3), &node_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    peers_.set_node(node_.get());
    node_->Start(&peers_);
  }
  // Waits for leadership, which needs the fake peers to grant votes.
  void AwaitLeader() {
    ASSERT_TRUE(WaitFor([&] { return IsLeader(*node_); })) << "never became leader";
  }
};

TEST_F(ThreeMemberTest, WithoutPeersThereIsNoLeader) {
  OpenAndStart();  // the peers never answer
  ASSERT_TRUE(WaitFor([&] { return peers_.sent_count() >= 4; }))
      << "expected repeated (pre)vote requests to both peers";
  std::this_thread::sleep_for(50ms);
  const NodeStatus st = node_->GetStatus();
  EXPECT_NE(st.role, raft::Role::kLeader);
  EXPECT_EQ(st.leader_id, 0u);
  EXPECT_EQ(st.voters, (std::vector<uint64_t>{1, 2, 3}));
  bool to2 = false, to3 = false;
  for (const raft::Message& m : peers_.sent()) {
    EXPECT_EQ(m.type, raft::MessageType::kVote);
    EXPECT_EQ(m.vote.candidate_id(), 1u);
    EXPECT_EQ(m.vote.to(), m.to);
    to2 |= m.to == 2;
    to3 |= m.to == 3;
  }
  EXPECT_TRUE(to2);
  EXPECT_TRUE(to3);

  for (int i = 0; i < 2; ++i) {
    OutcomeWaiter waiter;
    if (i == 0) {
      node_->Propose(PutCommand("k", "v"), Clock::now() + 1s, waiter.Callback());
    } else {
      node_->ReadIndex(Clock::now() + 1s, waiter.Callback());
    }
    ASSERT_TRUE(waiter.ready()) << "refusals are immediate";
    Outcome out = waiter.Get();
    EXPECT_TRUE(out.status.code() == Status::Code::kUnavailable ||
                out.status.code() == Status::Code::kFailedPrecondition)
        << StatusText(out.status);
    EXPECT_CONTAINS(out.status.message(), "no leader yet");
    EXPECT_EQ(out.leader_id, 0u);
    EXPECT_EQ(out.leader_address, "");
  }
  const Outcome nl = node_->NotLeader();
  EXPECT_EQ(nl.status.code(), Status::Code::kUnavailable);
}

TEST_F(ThreeMemberTest, CommitsAndReadsWithAcknowledgingPeers) {
  peers_.set_grant_votes(true);
  peers_.set_ack_appends(true);
  OpenAndStart();
  AwaitLeader();
  Outcome put = ProposeSync(node_.get(), PutCommand("x", "1"));
  ASSERT_TRUE(put.status.ok()) << StatusText(put.status);
  Outcome read = ReadSync(node_.get());
  ASSERT_TRUE(read.status.ok()) << StatusText(read.status);
  EXPECT_GE(read.index, put.index);
  EXPECT_EQ(node_->state_machine().Get("x").value_or(""), "1");
  bool appended = false;
  for (const raft::Message& m : peers_.sent()) {
    if (m.type == raft::MessageType::kAppend && m.append.entries_size() > 0) appended = true;
  }
  EXPECT_TRUE(appended);
}

// A write the leader accepted but cannot commit (no follower acknowledges)
// fails with DEADLINE_EXCEEDED at its deadline. The fake peers keep granting
// votes, so if this node stepped down (check-quorum) before the proposal,
// it is re-elected and we try again.
TEST_F(ThreeMemberTest, UncommittableWriteExpiresAtDeadline) {
  peers_.set_grant_votes(true);
  OpenAndStart();
  Outcome out;
  for (int attempt = 0; attempt < 20; ++attempt) {
    AwaitLeader();
    const auto start = Clock::now();
    out = ProposeSync(node_.get(), PutCommand("lost", "write"), 30ms);
    if (out.status.code() == Status::Code::kDeadlineExceeded) {
      EXPECT_GE(Clock::now() - start, 30ms);
      break;
    }
    EXPECT_NE(out.status.code(), Status::Code::kOk) << "committed without a quorum";
  }
  EXPECT_EQ(out.status.code(), Status::Code::kDeadlineExceeded) << StatusText(out.status);
  EXPECT_CONTAINS(out.status.message(), "deadline");
  EXPECT_FALSE(node_->state_machine().Get("lost").has_value());
}

TEST_F(ThreeMemberTest, WriteWithDeadlineInThePastExpires) {
  peers_.set_grant_votes(true);
  OpenAndStart();
  Outcome out;
  for (int attempt = 0; attempt < 20; ++attempt) {
    AwaitLeader();
    out = ProposeSync(node_.get(), PutCommand("k", "v"), -1s);
    if (out.status.code() == Status::Code::kDeadlineExceeded) break;
  }
  EXPECT_EQ(out.status.code(), Status::Code::kDeadlineExceeded) << StatusText(out.status);
}

TEST_F(ThreeMemberTest, UnconfirmedReadExpiresAtDeadline) {
  peers_.set_grant_votes(true);
  OpenAndStart();
  Outcome out;
  for (int attempt = 0; attempt < 20; ++attempt) {
    AwaitLeader();
    out = ReadSync(node_.get(), 10ms);
    // UNAVAILABLE: leadership was lost (check-quorum) before the deadline.
    if (out.status.code() == Status::Code::kDeadlineExceeded) break;
    EXPECT_NE(out.status.code(), Status::Code::kOk) << "read confirmed without a quorum";
  }
  EXPECT_EQ(out.status.code(), Status::Code::kDeadlineExceeded) << StatusText(out.status);
  EXPECT_CONTAINS(out.status.message(), "quorum");
}

TEST_F(ThreeMemberTest, LeaderWithoutQuorumStepsDown) {
  peers_.set_grant_votes(true);
  OpenAndStart();
  AwaitLeader();
  peers_.set_grant_votes(false);  // and appends were never acknowledged
  ASSERT_TRUE(WaitFor([&] { return !IsLeader(*node_); }, 5s)) << "check-quorum never stepped down";
}

#ifdef RAFTKV_HAVE_ROCKSDB
// A leader whose key-value store refuses writes (a flush failed on a full
// disk) while its log still takes them commits but cannot apply: it hands
// leadership to a caught-up voter (TimeoutNow) instead of leading a cluster
// that acknowledges nothing. Once there is room, it applies what it held.
TEST_F(ThreeMemberTest, ALeaderWhoseStoreStallsHandsOverLeadership) {
  testing_util::FullDisk disk;
  disk.only_under = dir_.path() + "/kv-";  // the store's files, not the log's
  testing_util::ScopedInterposer installed(&disk);
  peers_.set_grant_votes(true);
  peers_.set_ack_appends(true);
  NodeOptions options = Options(dir_.path(), 3);
  options.storage_engine = NodeOptions::StorageEngine::kRocksDb;
  ASSERT_TRUE(RaftNode::Open(options, &node_).ok());
  peers_.set_node(node_.get());
  node_->Start(&peers_);
  AwaitLeader();
  ASSERT_TRUE(ProposeSync(node_.get(), PutCommand("before", "1")).status.ok());
  const auto timeouts_now = [&] {
    int n = 0;
    for (const raft::Message& m : peers_.sent()) n += m.type == raft::MessageType::kTimeoutNow;
    return n;
  };
  EXPECT_EQ(timeouts_now(), 0);

  disk.full = true;
  disk.refuse_creates = true;
  std::promise<Status> flushed;
  node_->TakeSnapshot([&](Status s, SnapshotInfo) { flushed.set_value(s); });
  EXPECT_FALSE(flushed.get_future().get().ok()) << "a snapshot flushed onto a full disk";
  OutcomeWaiter held;
  node_->Propose(PutCommand("during", "2"), Clock::now() + 10s, held.Callback());
  ASSERT_TRUE(WaitFor([&] { return node_->state_machine().StoreStalled(); }, 5s));
  ASSERT_TRUE(WaitFor([&] { return timeouts_now() > 0; }, 5s)) << "no leadership transfer";
  for (const raft::Message& m : peers_.sent()) {
    if (m.type == raft::MessageType::kTimeoutNow) {
      EXPECT_TRUE(m.to == 2 || m.to == 3) << m.to;
    }
  }
  EXPECT_FALSE(held.ready()) << "acknowledged a write its store did not take";

  // Deposed (its peers stop answering appends: check-quorum), it starts no
  // election while its store is stalled, though its peers would grant votes.
  peers_.set_ack_appends(false);
  ASSERT_TRUE(WaitFor([&] { return !IsLeader(*node_); }, 5s)) << "check-quorum never stepped down";
  const auto vote_requests = [&] {
    int n = 0;
    for (const raft::Message& m : peers_.sent()) n += m.type == raft::MessageType::kVote;
    return n;
  };
  const int votes_before = vote_requests();
  std::this_thread::sleep_for(20 * std::chrono::milliseconds(5 * 5));  // 10 of the longest timeouts
  EXPECT_FALSE(IsLeader(*node_)) << "a member whose store refuses writes was elected again";
  EXPECT_EQ(vote_requests(), votes_before) << "a member whose store refuses writes campaigned";

  peers_.set_ack_appends(true);
  disk.full = false;
  ASSERT_TRUE(WaitFor([&] { return node_->state_machine().Get("during").has_value(); }, 5s));
  EXPECT_FALSE(node_->state_machine().StoreStalled());
  ASSERT_TRUE(WaitFor([&] { return IsLeader(*node_); }, 5s)) << "released, it never campaigned again";
  // Stopped while `disk` lives: RocksDB's threads write through it.
  node_->Stop();
  node_.reset();
}
#endif

TEST_F(ThreeMemberTest, StopFailsWaitingCallsUnavailable) {
  peers_.set_grant_votes(true);
  OpenAndStart();
  for (int attempt = 0; attempt < 20; ++attempt) {
    AwaitLeader();
    OutcomeWaiter waiter;
    node_->Propose(PutCommand("k", "v"), Clock::now() + 60s, waiter.Callback());
    if (waiter.ready()) continue;  // refused: lost leadership meanwhile
    node_->Stop();
    ASSERT_TRUE(waiter.ready()) << "Stop() must complete waiting calls";
    Outcome out = waiter.Get();
    EXPECT_EQ(out.status.code(), Status::Code::kUnavailable) << StatusText(out.status);
    EXPECT_CONTAINS(out.status.message(), "shutting down");
    return;
  }
  FAIL() << "the proposal was never accepted";
}

TEST_F(ThreeMemberTest, StepRequestRepliesAfterPersisting) {
  OpenAndStart();
  // A vote request from member 2 in a far term: granted (the node has no
  // leader, so no lease) and the reply comes from the I/O loop.
  raft::Message req;
  req.type = raft::MessageType::kVote;
  req.from = 2;
  req.to = 1;
  req.vote.set_term(100);
  req.vote.set_candidate_id(2);
  req.vote.set_to(1);
  std::promise<raft::Message> reply;
  node_->StepRequest(req, [&](const raft::Message* m) {
    ASSERT_NE(m, nullptr);
    reply.set_value(*m);
  });
  auto future = reply.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  raft::Message resp = future.get();
  EXPECT_EQ(resp.type, raft::MessageType::kVoteResp);
  EXPECT_EQ(resp.to, 2u);
  EXPECT_TRUE(resp.vote_resp.granted());
  EXPECT_EQ(resp.vote_resp.term(), 100u);
  EXPECT_GE(node_->GetStatus().term, 100u);
  // The vote is durable: it survives a restart.
  node_->Stop();
  node_.reset();
  ASSERT_TRUE(RaftNode::Open(Options(dir_.path(), 3), &node_).ok());
  EXPECT_GE(node_->GetStatus().term, 100u);
}

}  // namespace
}  // namespace raftkv
