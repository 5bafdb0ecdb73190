// Watches on real server processes: a watcher whose member is killed with
// SIGKILL resumes on another member from the last revision it saw, with no
// event lost or repeated.
#include <atomic>
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

class WatchResumption : public Integration, public ::testing::WithParamInterface<bool> {};

// The watcher starts on the victim (the leader, or a follower), which is
// killed with SIGKILL after a third of the writes; all events arrive once, in
// order, at the revisions the writes' answers named.
TEST_P(WatchResumption, AfterItsMemberIsKilled) {
  const bool kill_leader = GetParam();
  uint64_t leader = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, FastTimeoutFlags(), &leader));
  const int victim = kill_leader ? static_cast<int>(leader) : OtherThan(cluster(), static_cast<int>(leader));
  std::vector<std::string> endpoints = {cluster().Endpoint(victim)};
  for (int i = 1; i <= cluster().size(); ++i) {
    if (i != victim) endpoints.push_back(cluster().Endpoint(i));
  }
  PrefixWatcher watcher(endpoints);
  ASSERT_TRUE(WaitUntil([&] { return watcher.created(); }, 5000)) << "watch not created";

  auto writer = cluster().NewClient(/*timeout_ms=*/20000);
  constexpr int kWrites = 300;
  std::vector<int64_t> revisions(kWrites);
  for (int i = 0; i < kWrites; ++i) {
    if (i == kWrites / 3) {
      // Only once the victim's stream delivered something: the watcher is
      // surely on it.
      ASSERT_TRUE(WaitUntil([&] { return !watcher.events().empty(); }, 5000));
      cluster().Kill(victim);
    }
    PutResponse resp;
    const grpc::Status s =
        writer->Put(WKey(i), "v" + std::to_string(i), ClientPutOptions(), &resp);
    ASSERT_TRUE(s.ok()) << WKey(i) << ": " << Code(s);
    revisions[static_cast<size_t>(i)] = resp.revision();
  }
  ASSERT_TRUE(WaitUntil([&] { return watcher.events().size() >= kWrites; }, 20000))
      << "only " << watcher.events().size() << " of " << kWrites << " events arrived";
  std::this_thread::sleep_for(Millis(300));  // a duplicate would arrive now
  watcher.Stop();
  EXPECT_EQ(watcher.status().error_code(), grpc::StatusCode::CANCELLED) << Code(watcher.status());

  const std::vector<SeenEvent> events = watcher.events();
  ASSERT_EQ(events.size(), static_cast<size_t>(kWrites));
  std::set<uint64_t> members;
  for (int i = 0; i < kWrites; ++i) {
    const SeenEvent& e = events[static_cast<size_t>(i)];
    EXPECT_EQ(e.key, WKey(i)) << "event " << i;
    EXPECT_EQ(e.value, "v" + std::to_string(i)) << "event " << i;
    EXPECT_EQ(e.revision, revisions[static_cast<size_t>(i)]) << "event " << i;
    members.insert(e.member);
  }
  EXPECT_EQ(events.front().member, static_cast<uint64_t>(victim));
  EXPECT_NE(events.back().member, static_cast<uint64_t>(victim));
  EXPECT_GE(members.size(), 2u) << "the watch never moved off the killed member";
}

INSTANTIATE_TEST_SUITE_P(Integration, WatchResumption, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Leader" : "Follower");
                         });

}  // namespace
}  // namespace integration
}  // namespace raftkv
