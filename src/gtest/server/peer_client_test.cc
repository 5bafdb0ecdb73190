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
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

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


// ---------------------------------------------------------------------------
// Appends on the Peer.Append stream (append_stream_client.h)
// ---------------------------------------------------------------------------

raft::Message AppendTo(uint64_t peer, uint64_t seq) {
  raft::Message m;
  m.type = raft::MessageType::kAppend;
  m.from = 1;
  m.to = peer;
  m.append.set_term(1);
  m.append.set_leader_id(1);
  m.append.set_to(peer);
  m.append.set_seq(seq);
  return m;
}

// A follower played by the test: the unary method answers success; the
// stream answers every append, none, reads nothing until cancelled, ends
// after its first answer, or is not served at all.
class FakeFollower final : public Peer::Service {
 public:
  enum class Stream { kAnswer, kSilent, kStalled, kEndAfterOne, kUnimplemented };
  explicit FakeFollower(Stream mode) : mode_(mode) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeFollower() override { server_->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  grpc::Status AppendEntries(grpc::ServerContext*, const AppendEntriesRequest* req,
                             AppendEntriesResponse* resp) override {
    ++unary_;
    Answer(*req, resp);
    return grpc::Status::OK;
  }
  grpc::Status Append(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<AppendEntriesResponse, AppendEntriesRequest>* stream) override {
    if (mode_ == Stream::kUnimplemented) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not here");
    ++streams_;
    if (mode_ == Stream::kStalled) {
      while (!context->IsCancelled()) std::this_thread::sleep_for(milliseconds(5));
      return grpc::Status(grpc::StatusCode::CANCELLED, "stalled");
    }
    AppendEntriesRequest req;
    while (stream->Read(&req)) {
      ++streamed_;
      if (mode_ == Stream::kSilent) continue;
      AppendEntriesResponse resp;
      Answer(req, &resp);
      if (!stream->Write(resp) || mode_ == Stream::kEndAfterOne) break;
    }
    ++ended_;
    return grpc::Status::OK;
  }

  std::atomic<int> unary_{0}, streams_{0}, streamed_{0}, ended_{0};

 private:
  static void Answer(const AppendEntriesRequest& req, AppendEntriesResponse* resp) {
    resp->set_term(req.term());
    resp->set_from(req.to());
    resp->set_success(true);
    resp->set_seq(req.seq());
  }
  const Stream mode_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

class PeerAppendStreamTest : public ::testing::Test {
 protected:
  void Start(const std::string& address, int append_timeout_ms = 2000) {
    ClusterConfig cluster;
    cluster.members = {{1, "127.0.0.1:1"}, {2, address}};
    PeerClientOptions options;
    options.append_timeout_ms = append_timeout_ms;
    client_ = std::make_unique<PeerClient>(
        cluster, 1, options,
        [this](const raft::Message& m) {
          std::lock_guard<std::mutex> lock(mu_);
          if (m.type == raft::MessageType::kAppendResp) answered_.push_back(m.append_resp.seq());
          cv_.notify_all();
        },
        [this](uint64_t peer) {
          EXPECT_EQ(peer, 2u);
          std::lock_guard<std::mutex> lock(mu_);
          ++unreachable_;
          cv_.notify_all();
        });
  }
  void TearDown() override {
    if (client_) client_->Shutdown();
  }
  template <class Done>
  bool WaitFor(Done done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(5), done);
  }

  std::unique_ptr<PeerClient> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> answered_;  // guarded by mu_: seqs answered, in order
  int unreachable_ = 0;              // guarded by mu_
};

TEST_F(PeerAppendStreamTest, AppendsTravelOnOneStreamAndAreAnsweredInOrder) {
  FakeFollower follower(FakeFollower::Stream::kAnswer);
  Start(follower.address());
  for (uint64_t seq = 1; seq <= 50; ++seq) client_->Send(AppendTo(2, seq));
  ASSERT_TRUE(WaitFor([&] { return answered_.size() == 50; })) << answered_.size() << " answered";
  for (uint64_t seq = 1; seq <= 50; ++seq) EXPECT_EQ(answered_[seq - 1], seq);
  EXPECT_EQ(follower.streams_.load(), 1);
  EXPECT_EQ(follower.unary_.load(), 0);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(unreachable_, 0);
}

TEST_F(PeerAppendStreamTest, AFollowerWithoutTheStreamGetsCalls) {
  FakeFollower follower(FakeFollower::Stream::kUnimplemented);
  Start(follower.address());
  // The first append goes to a stream the follower refuses (reported, lost);
  // later ones are calls. (Sent until two calls came: a subchannel left by
  // an earlier test on a reused port may end the first stream otherwise.)
  for (uint64_t seq = 1; seq <= 100 && follower.unary_.load() < 2; ++seq) {
    client_->Send(AppendTo(2, seq));
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_GE(follower.unary_.load(), 2);
  ASSERT_TRUE(WaitFor([&] { return answered_.size() >= 2; })) << answered_.size() << " answered";
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_GE(unreachable_, 1);
}

TEST_F(PeerAppendStreamTest, ANothingAnsweringStreamIsDroppedAfterTheTimeoutAndOpenedAgain) {
  FakeFollower follower(FakeFollower::Stream::kSilent);
  Start(follower.address(), /*append_timeout_ms=*/200);
  client_->Send(AppendTo(2, 1));
  std::this_thread::sleep_for(milliseconds(300));
  client_->Send(AppendTo(2, 2));  // finds the first one unanswered for too long
  ASSERT_TRUE(WaitFor([&] { return unreachable_ == 1; }));
  client_->Send(AppendTo(2, 3));  // on a new stream (the fake follower's count: polled)
  for (int i = 0; i < 500 && follower.streams_.load() < 2; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(follower.streams_.load(), 2);
}

// A follower that reads nothing: HTTP/2 flow control stops the writes, and
// the stream's queue holds at most its bound; past it appends are refused
// (dropped, as a network would), never queued without limit.
TEST(AppendStreamClientTest, TheQueueOfAStalledStreamIsBounded) {
  FakeFollower follower(FakeFollower::Stream::kStalled);
  auto stub = Peer::NewStub(grpc::CreateChannel(follower.address(), grpc::InsecureChannelCredentials()));
  std::mutex mu;
  std::condition_variable cv;
  bool ended = false;
  constexpr size_t kBound = 8;
  auto* stream = new AppendStreamClient(
      stub.get(), std::chrono::hours(1), kBound, [](AppendEntriesResponse*) {}, [](AppendStreamClient*) {},
      [&](const grpc::Status&) {
        std::lock_guard<std::mutex> lock(mu);
        ended = true;
        cv.notify_all();
      });
  const std::string data(64 << 10, 'x');
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    AppendEntriesRequest req = AppendTo(2, i + 1).append;
    req.add_entries()->set_data(data);
    if (stream->Push(std::move(req))) {
      ++accepted;
    } else {
      break;
    }
    if (i % 16 == 0) std::this_thread::sleep_for(milliseconds(1));  // let gRPC take what the window allows
  }
  // 4,000 x 64 KiB is 250 MiB: far beyond any flow-control window.
  EXPECT_LT(accepted, 4000);
  AppendEntriesRequest more = AppendTo(2, 9999).append;
  EXPECT_FALSE(stream->Push(std::move(more))) << "accepted " << accepted;
  stream->Cancel();
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return ended; }));
}

// Streams that end while appends are being pushed on them (a follower that
// ends each after one answer): each is forgotten before it is deleted, so a
// push never runs on a stream being deleted (the sanitizers' check), and
// the next append opens a new one.
TEST_F(PeerAppendStreamTest, StreamsEndingWhileAppendsArePushedAreReplaced) {
  FakeFollower follower(FakeFollower::Stream::kEndAfterOne);
  Start(follower.address());
  std::vector<std::thread> senders;
  std::atomic<uint64_t> seq{0};
  for (int t = 0; t < 3; ++t) {
    senders.emplace_back([&] {
      for (int i = 0; i < 3000 && follower.streams_.load() < 5; ++i) {
        client_->Send(AppendTo(2, ++seq));
        if (i % 8 == 0) std::this_thread::sleep_for(milliseconds(1));
      }
    });
  }
  for (std::thread& t : senders) t.join();
  EXPECT_GE(follower.streams_.load(), 5);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_GE(answered_.size(), 3u);
}

// A member dialed at a new address: the next append cancels the stream to
// the old one and opens one to the new; that cancelled stream's end is no
// news of the member (the core would probe a follower that is fine).
TEST_F(PeerAppendStreamTest, AStreamReplacedByANewAddressIsNotReportedUnreachable) {
  FakeFollower before(FakeFollower::Stream::kAnswer);
  FakeFollower after(FakeFollower::Stream::kAnswer);
  Start(before.address());
  client_->Send(AppendTo(2, 1));
  ASSERT_TRUE(WaitFor([&] { return answered_.size() == 1; }));
  MembershipConfig moved;
  MemberConfig* member = moved.add_members();
  member->set_id(2);
  member->set_address(after.address());
  client_->UpdateMembers(moved);
  client_->Send(AppendTo(2, 2));
  ASSERT_TRUE(WaitFor([&] { return answered_.size() == 2; }));
  EXPECT_EQ(after.streams_.load(), 1);
  for (int i = 0; i < 500 && before.ended_.load() < 1; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(before.ended_.load(), 1);
  std::this_thread::sleep_for(milliseconds(200));  // the leader's side hears of the end too
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(unreachable_, 0);
}

TEST_F(PeerAppendStreamTest, AnUnreachableFollowerIsReported) {
  Start("127.0.0.1:1");  // nothing listens there
  client_->Send(AppendTo(2, 1));
  ASSERT_TRUE(WaitFor([&] { return unreachable_ >= 1; }));
}

}  // namespace
}  // namespace raftkv
