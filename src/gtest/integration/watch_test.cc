// Watches on real server processes: a watcher whose member is killed with
// SIGKILL, or cut off from its peers, resumes on another member from the
// last revision it saw, with no event lost or repeated.
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/integration/integration_test_util.h"

namespace raftkv {
namespace integration {
namespace {

struct SeenEvent {
  std::string key;
  std::string value;
  int64_t revision = 0;
  uint64_t member = 0;  // the member whose stream delivered it
};

// Watches prefix "w/" through `endpoints` (the first is tried first) on a
// thread of its own until Stop().
class PrefixWatcher {
 public:
  explicit PrefixWatcher(std::vector<std::string> endpoints) {
    ClientOptions options;
    options.endpoints = std::move(endpoints);
    options.timeout_ms = 15000;
    client_ = std::make_unique<KvClient>(options);
    thread_ = std::thread([this] {
      WatchRequest req;
      req.set_key("w/");
      req.set_range_end("w0");
      status_ = client_->Watch(
          req,
          [this](const WatchResponse& resp) {
            std::lock_guard<std::mutex> lock(mu_);
            if (resp.created()) created_ = true;
            for (const Event& e : resp.events()) {
              events_.push_back({e.kv().key(), e.kv().value(), e.kv().mod_revision(),
                                 resp.header().member_id()});
            }
            return true;
          },
          &cancel_);
    });
  }
  ~PrefixWatcher() { Stop(); }

  void Stop() {
    cancel_.Cancel();
    if (thread_.joinable()) thread_.join();
  }
  bool created() {
    std::lock_guard<std::mutex> lock(mu_);
    return created_;
  }
  std::vector<SeenEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // After Stop: CANCELLED unless the watch ended by itself.
  const grpc::Status& status() const { return status_; }

 private:
  std::unique_ptr<KvClient> client_;
  WatchCancel cancel_;
  std::thread thread_;
  grpc::Status status_;
  std::mutex mu_;
  bool created_ = false;
  std::vector<SeenEvent> events_;
};

std::string WKey(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "w/%04d", i);
  return buf;
}

class WatchResumption : public Integration, public ::testing::WithParamInterface<bool> {
 protected:
  static constexpr int kWrites = 300;

  // Starts the cluster and a watcher whose first endpoint is the victim (the
  // leader, or a follower).
  void SetUpWatcher(std::vector<std::string> flags) {
    const bool leader_victim = GetParam();
    uint64_t leader = 0;
    ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));
    victim_ = leader_victim ? static_cast<int>(leader)
                            : OtherThan(cluster(), static_cast<int>(leader));
    std::vector<std::string> endpoints = {cluster().Endpoint(victim_)};
    for (int i = 1; i <= cluster().size(); ++i) {
      if (i != victim_) endpoints.push_back(cluster().Endpoint(i));
    }
    watcher_ = std::make_unique<PrefixWatcher>(endpoints);
    ASSERT_TRUE(WaitUntil([&] { return watcher_->created(); }, 5000)) << "watch not created";
  }

  // Writes kWrites keys; `fault` runs after a third of them, once the
  // victim's stream delivered something (the watcher is surely on it).
  void WriteAll(const std::function<void()>& fault) {
    auto writer = cluster().NewClient(/*timeout_ms=*/20000);
    revisions_.assign(kWrites, 0);
    for (int i = 0; i < kWrites; ++i) {
      if (i == kWrites / 3) {
        ASSERT_TRUE(WaitUntil([&] { return !watcher_->events().empty(); }, 5000));
        fault();
        if (HasFatalFailure()) return;
      }
      PutResponse resp;
      const grpc::Status s =
          writer->Put(WKey(i), "v" + std::to_string(i), ClientPutOptions(), &resp);
      ASSERT_TRUE(s.ok()) << WKey(i) << ": " << Code(s);
      revisions_[static_cast<size_t>(i)] = resp.revision();
    }
  }

  // Every write arrived once, in order, at the revision its answer named;
  // the first from the victim, the last from another member.
  void CheckEvents() {
    ASSERT_TRUE(WaitUntil([&] { return watcher_->events().size() >= kWrites; }, 20000))
        << "only " << watcher_->events().size() << " of " << kWrites << " events arrived";
    std::this_thread::sleep_for(Millis(300));  // a duplicate would arrive now
    watcher_->Stop();
    EXPECT_EQ(watcher_->status().error_code(), grpc::StatusCode::CANCELLED)
        << Code(watcher_->status());
    const std::vector<SeenEvent> events = watcher_->events();
    ASSERT_EQ(events.size(), static_cast<size_t>(kWrites));
    std::set<uint64_t> members;
    for (int i = 0; i < kWrites; ++i) {
      const SeenEvent& e = events[static_cast<size_t>(i)];
      EXPECT_EQ(e.key, WKey(i)) << "event " << i;
      EXPECT_EQ(e.value, "v" + std::to_string(i)) << "event " << i;
      EXPECT_EQ(e.revision, revisions_[static_cast<size_t>(i)]) << "event " << i;
      members.insert(e.member);
    }
    EXPECT_EQ(events.front().member, static_cast<uint64_t>(victim_));
    EXPECT_NE(events.back().member, static_cast<uint64_t>(victim_));
    EXPECT_GE(members.size(), 2u) << "the watch never moved off the victim";
  }

  int victim_ = 0;
  std::unique_ptr<PrefixWatcher> watcher_;
  std::vector<int64_t> revisions_;
};

// The victim is killed with SIGKILL after a third of the writes.
TEST_P(WatchResumption, AfterItsMemberIsKilled) {
  ASSERT_NO_FATAL_FAILURE(SetUpWatcher(FastTimeoutFlags()));
  ASSERT_NO_FATAL_FAILURE(WriteAll([&] { cluster().Kill(victim_); }));
  CheckEvents();
}

// The victim is cut off from its peers (both ways) after a third of the
// writes and stays cut off: its store stops moving while the connection to
// the watcher stays up. Having heard from no leader for three election
// timeouts, it ends its streams, and the watcher moves to the majority.
TEST_P(WatchResumption, WhenItsMemberIsCutOff) {
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--enable_test_faults");
  ASSERT_NO_FATAL_FAILURE(SetUpWatcher(flags));
  ASSERT_NO_FATAL_FAILURE(WriteAll([&] {
    std::vector<uint64_t> others;
    for (int i = 1; i <= cluster().size(); ++i) {
      if (i != victim_) others.push_back(static_cast<uint64_t>(i));
    }
    ASSERT_TRUE(SetFaults(cluster(), victim_, others).ok());
    for (uint64_t o : others) {
      ASSERT_TRUE(SetFaults(cluster(), static_cast<int>(o), {static_cast<uint64_t>(victim_)}).ok());
    }
  }));
  CheckEvents();
}

// A member with no room for another watcher (RESOURCE_EXHAUSTED) is not the
// end of a watch: KvClient::Watch moves on to the next endpoint, and gives up
// with RESOURCE_EXHAUSTED only when every endpoint refused.
TEST_F(Integration, AWatchMovesOnFromAMemberWithoutRoom) {
  uint64_t leader = 0;
  std::vector<std::string> flags = FastTimeoutFlags();
  flags.push_back("--max_watchers=1");
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, flags, &leader));
  // Member 1's only slot taken.
  auto stub = Watch::NewStub(NewChannel(cluster().Endpoint(1)));
  grpc::ClientContext holder_ctx;
  WatchRequest req;
  req.set_key("w/");
  req.set_range_end("w0");
  auto holder = stub->Watch(&holder_ctx, req);
  WatchResponse created;
  ASSERT_TRUE(holder->Read(&created) && created.created());
  {
    PrefixWatcher watcher({cluster().Endpoint(1), cluster().Endpoint(2)});
    ASSERT_TRUE(WaitUntil([&] { return watcher.created(); }, 10000)) << "the watch never started";
    auto client = cluster().NewClient();
    ASSERT_TRUE(client->Put("w/a", "1").ok());
    ASSERT_TRUE(WaitUntil([&] { return !watcher.events().empty(); }, 10000));
    EXPECT_EQ(watcher.events().front().member, 2u) << "served by the member with room";
  }
  // Every endpoint full: RESOURCE_EXHAUSTED, at once rather than after the
  // whole reconnection window.
  ClientOptions options;
  options.endpoints = {cluster().Endpoint(1)};
  options.timeout_ms = 15000;
  KvClient client(options);
  const auto start = Steady::now();
  const grpc::Status s = client.Watch(req, [](const WatchResponse&) { return true; });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Code(s);
  EXPECT_LT(ElapsedMs(start), 5000);
  holder_ctx.TryCancel();
  holder->Finish();
}

INSTANTIATE_TEST_SUITE_P(Integration, WatchResumption, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Leader" : "Follower");
                         });

}  // namespace
}  // namespace integration
}  // namespace raftkv
