// PeerClient's snapshot transfers: one per peer at a time, and every request
// the core makes is answered, including one made from inside the answer to
// the previous transfer (the leader asks for its next snapshot as soon as the
// follower has installed one that is already behind its compaction).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "server/peer/peer_client.h"

namespace raftkv {
namespace {

using std::chrono::milliseconds;

raft::Message SnapshotRequestTo(uint64_t peer, uint64_t index) {
  raft::Message m;
  m.type = raft::MessageType::kSnapshot;
  m.from = 1;
  m.to = peer;
  m.snapshot.set_term(1);
  m.snapshot.set_leader_id(1);
  m.snapshot.set_last_index(index);
  m.snapshot.set_last_term(1);
  m.snapshot.set_to(peer);
  return m;
}

// A PeerClient whose snapshots cannot be opened: every transfer fails and
// reports the peer unreachable after snapshot_retry_ms. Counts the opens and
// the reports; `on_report` runs inside each report, on the transfer thread.
class PeerSnapshotTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cluster;
    cluster.members = {{1, "127.0.0.1:1"}, {2, "127.0.0.1:1"}};
    PeerClientOptions options;
    options.snapshot_retry_ms = 20;
    client_ = std::make_unique<PeerClient>(
        cluster, 1, options, [](const raft::Message&) {},
        [this](uint64_t peer) {
          EXPECT_EQ(peer, 2u);
          const int n = ++reports_;
          if (on_report_) on_report_(n);
          std::lock_guard<std::mutex> lock(mu_);
          cv_.notify_all();
        },
        [this](uint64_t index, uint64_t, std::unique_ptr<SnapshotSource>*) {
          std::lock_guard<std::mutex> lock(mu_);
          opened_.push_back(index);
          return Status::IOError("no snapshot files in this test");
        });
  }
  void TearDown() override { client_->Shutdown(); }

  // Waits until `n` reports came, or 5 s.
  bool WaitForReports(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(5), [&] { return reports_.load() >= n; });
  }
  std::vector<uint64_t> Opened() {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_;
  }

  std::unique_ptr<PeerClient> client_;
  std::function<void(int)> on_report_;
  std::atomic<int> reports_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> opened_;  // guarded by mu_
};

TEST_F(PeerSnapshotTransferTest, ARequestMadeInsideTheAnswerIsServed) {
  // The core, answered, asks for the next snapshot at once, on the transfer
  // thread: that request must be served, or the core waits forever.
  on_report_ = [this](int n) {
    if (n == 1) client_->Send(SnapshotRequestTo(2, 200));
  };
  client_->Send(SnapshotRequestTo(2, 100));
  ASSERT_TRUE(WaitForReports(2)) << "the second request was never answered";
  std::this_thread::sleep_for(milliseconds(100));  // and nothing else came
  EXPECT_EQ(reports_.load(), 2);
  EXPECT_EQ(Opened(), (std::vector<uint64_t>{100, 200}));
}

TEST_F(PeerSnapshotTransferTest, OnlyTheNewestOfSeveralRequestsMadeInsideTheAnswerIsServed) {
  on_report_ = [this](int n) {
    if (n != 1) return;
    client_->Send(SnapshotRequestTo(2, 200));
    client_->Send(SnapshotRequestTo(2, 300));
  };
  client_->Send(SnapshotRequestTo(2, 100));
  ASSERT_TRUE(WaitForReports(2));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(reports_.load(), 2);
  EXPECT_EQ(Opened(), (std::vector<uint64_t>{100, 300}));
}

TEST_F(PeerSnapshotTransferTest, RequestsWhileOneRunsAreLeftToItsAnswer) {
  // Requests before the running transfer answers are dropped: its answer
  // comes later, and the core asks again if it needs to.
  client_->Send(SnapshotRequestTo(2, 100));
  client_->Send(SnapshotRequestTo(2, 100));
  client_->Send(SnapshotRequestTo(2, 100));
  ASSERT_TRUE(WaitForReports(1));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(reports_.load(), 1);
  // After the answer, a new request starts a new transfer.
  client_->Send(SnapshotRequestTo(2, 150));
  ASSERT_TRUE(WaitForReports(2));
  EXPECT_EQ(Opened(), (std::vector<uint64_t>{100, 150}));
}

TEST_F(PeerSnapshotTransferTest, ShutdownDuringTheAnswerRunsNoQueuedTransfer) {
  on_report_ = [this](int n) {
    if (n == 1) client_->Send(SnapshotRequestTo(2, 200));
  };
  client_->Send(SnapshotRequestTo(2, 100));
  ASSERT_TRUE(WaitForReports(1));
  client_->Shutdown();  // joins the transfer thread, whatever it was doing
  const int after = reports_.load();
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(reports_.load(), after);
}

}  // namespace
}  // namespace raftkv
