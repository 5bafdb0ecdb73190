// The ServerTest fixture: one real node behind a real GrpcServer on
// 127.0.0.1:0, with generated stubs, shared by the server tests.
#pragma once

#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "gtest/common/fake_peers.h"
#include "proto/internal.h"
#include "server/grpc_server.h"
#include "server/peer/peer_client.h"
#include "gtest/common/service_test_util.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
using testing_util::FakePeers;
using testing_util::TempDir;
using testing_util::WaitFor;

constexpr char kSelfAddress[] = "127.0.0.1:7001";  // what Status reports; the server binds :0
constexpr size_t kMaxKey = 64;
constexpr size_t kMaxValue = 1024;
constexpr size_t kMaxBatchOps = 8;
constexpr size_t kMaxBatchBytes = 3000;
constexpr size_t kMaxTxnOps = 8;
constexpr size_t kMaxResponseBytes = 64 << 10;

[[maybe_unused]] std::string StatusText(const grpc::Status& s) {
  return std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message();
}

[[maybe_unused]] std::chrono::system_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

// The server-side trailing metadata value for `key`, or "" if absent.
[[maybe_unused]] std::string Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  const auto& md = ctx.GetServerTrailingMetadata();
  auto it = md.find(key);
  if (it == md.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// One node + its server, torn down in the order raftkv-server uses:
// server.Shutdown(); node->Stop(); peers.Shutdown(); server.Join().
class ServerTest : public ::testing::Test {
 protected:
  struct Setup {
    int members = 1;
    int election_ticks = 5;
    int max_request_timeout_ms = 10000;
    bool real_peers = false;   // PeerClient to dead addresses, else FakePeers
    bool grant_votes = false;  // FakePeers: grant votes (no appends acknowledged)
    int cq_num = 2;
    int threads_per_cq = 2;
    int calls_per_cq = 16;
    uint64_t session_timeout_ms = 600000;
    bool finish_on_cq = false;  // ServerOptions::finish_on_cq
    size_t history_revisions = 100000;  // NodeOptions::history_revisions
    // ServerOptions::forward_to_leader: off, as the fake leaders here are
    // dead addresses; the refusal with the leader hint is tested instead.
    bool forward_to_leader = false;
    int watch_progress_notify_interval_ms = 600000;  // WatchOptions
    bool count_unary_calls = true;  // ServerOptions::count_unary_calls
    int64_t quota_backend_bytes = int64_t{2} << 30;  // NodeOptions::quota_backend_bytes
    NodeOptions::StorageEngine storage_engine = NodeOptions::StorageEngine::kMemory;
  };

  // 2000 asynchronous Puts at once, then reads them all back.
  void RunManyConcurrentAsyncPuts(const Setup& setup);

  void StartNode(const Setup& setup) {
    NodeOptions no;
    no.id = 1;
    no.cluster.members.push_back(Member{1, kSelfAddress});
    // Dead addresses: nothing listens on these ports.
    for (int i = 2; i <= setup.members; ++i) {
      no.cluster.members.push_back(Member{static_cast<uint64_t>(i), "127.0.0.1:" + std::to_string(i - 1)});
    }
    no.data_dir = dir_.path();
    no.core.tick_ms = 5;
    no.core.election_ticks = setup.election_ticks;
    no.core.heartbeat_ticks = 1;
    no.history_revisions = setup.history_revisions;
    no.quota_backend_bytes = setup.quota_backend_bytes;
    no.storage_engine = setup.storage_engine;
    Status s = RaftNode::Open(no, &node_);
    ASSERT_TRUE(s.ok()) << s.ToString();

    RaftNode* raw = node_.get();
    PeerSender* sender = &fake_peers_;
    if (setup.real_peers) {
      PeerClientOptions po;
      po.append_timeout_ms = 200;
      po.vote_timeout_ms = 200;
      peer_client_ = std::make_unique<PeerClient>(
          no.cluster, 1, po, [raw](const raft::Message& m) { raw->StepResponse(m); },
          [raw](uint64_t peer) { raw->ReportUnreachable(peer); });
      sender = peer_client_.get();
    } else {
      fake_peers_.set_node(raw);
      fake_peers_.set_grant_votes(setup.grant_votes);
    }

    ServerOptions so;
    so.listen_address = "127.0.0.1:0";
    so.cq_num = setup.cq_num;
    so.threads_per_cq = setup.threads_per_cq;
    so.max_key_bytes = kMaxKey;
    so.max_value_bytes = kMaxValue;
    so.max_batch_ops = kMaxBatchOps;
    so.max_batch_bytes = kMaxBatchBytes;
    so.max_txn_ops = kMaxTxnOps;
    so.max_response_bytes = kMaxResponseBytes;
    so.max_txn_result_bytes = kMaxResponseBytes;
    so.max_request_timeout_ms = setup.max_request_timeout_ms;
    so.calls_per_cq = setup.calls_per_cq;
    so.session_timeout_ms = setup.session_timeout_ms;
    so.finish_on_cq = setup.finish_on_cq;
    so.forward_to_leader = setup.forward_to_leader;
    so.watch.progress_notify_interval_ms = setup.watch_progress_notify_interval_ms;
    so.count_unary_calls = setup.count_unary_calls;
    server_ = std::make_unique<GrpcServer>(so, raw);
    s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_GT(server_->bound_port(), 0);
    address_ = "127.0.0.1:" + std::to_string(server_->bound_port());
    node_->Start(sender);

    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    kv_ = KV::NewStub(channel);
    raft_ = Peer::NewStub(channel);
  }

  void StartSingleLeader() { StartSingleLeader(Setup()); }
  void StartSingleLeader(const Setup& setup) {
    StartNode(setup);
    ASSERT_TRUE(WaitFor([&] { return node_->GetStatus().role == raft::Role::kLeader &&
                                     node_->GetStatus().applied_index >= 1; }))
        << "single member never became leader";
  }

  void Shutdown(int grace_ms = 1000) {
    if (!server_) return;
    server_->Shutdown(grace_ms);
    node_->Stop();
    if (peer_client_) peer_client_->Shutdown();
    server_->Join();
    server_.reset();
    peer_client_.reset();
    node_.reset();
  }

  void TearDown() override { Shutdown(); }

  grpc::Status Put(const std::string& key, const std::string& value, PutResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    PutRequest req;
    req.set_key(key);
    req.set_value(value);
    PutResponse local;
    return kv_->Put(&ctx, req, resp ? resp : &local);
  }
  grpc::Status Get(const std::string& key, GetResponse* resp, bool stale = false) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    GetRequest req;
    req.set_key(key);
    req.set_allow_stale(stale);
    return kv_->Get(&ctx, req, resp);
  }
  grpc::Status Delete(const std::string& key, DeleteResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    DeleteRequest req;
    req.set_key(key);
    return kv_->Delete(&ctx, req, resp);
  }
  // expected == nullptr: create-only.
  grpc::Status Cas(const std::string& key, const std::string* expected, const std::string& value,
                   CompareAndSwapResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    CompareAndSwapRequest req;
    req.set_key(key);
    req.set_has_expected(expected != nullptr);
    if (expected != nullptr) req.set_expected(*expected);
    req.set_value(value);
    return kv_->CompareAndSwap(&ctx, req, resp);
  }
  grpc::Status Batch(const BatchRequest& req, BatchResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    return kv_->Batch(&ctx, req, resp);
  }
  grpc::Status GetStatus(StatusResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10s));
    return kv_->Status(&ctx, StatusRequest(), resp);
  }

  TempDir dir_;
  FakePeers fake_peers_;
  std::unique_ptr<RaftNode> node_;
  std::unique_ptr<PeerClient> peer_client_;
  std::unique_ptr<GrpcServer> server_;
  std::string address_;
  std::unique_ptr<KV::Stub> kv_;
  std::unique_ptr<Peer::Stub> raft_;
};

}  // namespace
}  // namespace raftkv
