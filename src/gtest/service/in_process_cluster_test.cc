// Three complete members (RaftNode + GrpcServer + PeerClient) in one process,
// talking over 127.0.0.1: replication through PeerClient, leader redirects
// followed by KvClient, and fail-over when the leader stops.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/kv_client.h"
#include "service/grpc_server.h"
#include "service/node.h"
#include "service/peer_client.h"
#include "service_test_util.h"

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

  // The order of raftkv-server's main.
  void Stop() {
    if (!running) return;
    running = false;
    server->Shutdown(200);
    node->Stop();
    peers->Shutdown();
    server->Join();
  }
};

class InProcessClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 1; i <= 3; ++i) {
      cluster_.members.push_back(
          Member{static_cast<uint64_t>(i), "127.0.0.1:" + std::to_string(PickPort())});
    }
    for (int i = 0; i < 3; ++i) {
      members_.push_back(std::make_unique<Member3>());
      ASSERT_NO_FATAL_FAILURE(StartMember(i));
    }
  }

  void StartMember(int i) {
    Member3& m = *members_[i];
    NodeOptions no;
    no.id = cluster_.members[i].id;
    no.cluster = cluster_;
    no.data_dir = m.dir.path();
    no.tick_ms = 5;
    no.election_ticks = 10;
    no.heartbeat_ticks = 1;
    Status s = RaftNode::Open(no, &m.node);
    ASSERT_TRUE(s.ok()) << s.ToString();
    RaftNode* raw = m.node.get();
    PeerClientOptions po;
    po.append_timeout_ms = 500;
    po.vote_timeout_ms = 200;
    m.peers = std::make_unique<PeerClient>(
        cluster_, no.id, po, [raw](const raft::Message& msg) { raw->StepResponse(msg); },
        [raw](uint64_t peer) { raw->ReportUnreachable(peer); });
    ServerOptions so;
    so.listen_address = cluster_.members[i].address;
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
    const uint64_t leader_id = cluster_.members[leader].id;
    for (auto& m : members_) {
      if (m->running && m->node->GetStatus().leader_id != leader_id) return -1;
    }
    return leader;
  }

  std::vector<std::string> Endpoints() const {
    std::vector<std::string> out;
    for (const Member& m : cluster_.members) out.push_back(m.address);
    return out;
  }

  ClusterConfig cluster_;
  std::vector<std::unique_ptr<Member3>> members_;
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

}  // namespace
}  // namespace raftkv
