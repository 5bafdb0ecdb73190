// PeerClient: the node's outgoing Raft RPCs, over the asynchronous gRPC client
// API on its own completion queues and threads (separate from the queues that
// serve incoming calls). Each message is one async unary call; many calls per
// follower may be in flight at once (pipelining; the core's Progress bounds
// how many). Completions are handed to the node as response messages, and
// failures as "peer unreachable".
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "raftkv.grpc.pb.h"
#include "service/cluster_config.h"
#include "service/fault_injector.h"
#include "service/node.h"

namespace raftkv {

struct PeerClientOptions {
  int cq_num = 1;
  int threads_per_cq = 1;
  int append_timeout_ms = 2000;  // deadline of one AppendEntries call
  int vote_timeout_ms = 1000;    // deadline of one RequestVote call
  // Tests only: messages to peers it blocks are dropped. Not owned; may be null.
  const FaultInjector* faults = nullptr;
};

class PeerClient : public PeerSender {
 public:
  using ResponseHandler = std::function<void(const raft::Message&)>;
  using UnreachableHandler = std::function<void(uint64_t peer)>;

  PeerClient(const ClusterConfig& cluster, uint64_t self_id, const PeerClientOptions& options,
             ResponseHandler on_response, UnreachableHandler on_unreachable);
  ~PeerClient() override;

  void Send(raft::Message m) override;
  // Cancels calls in flight and joins the completion threads. Call after the
  // node stopped sending.
  void Shutdown();

 private:
  struct Call;
  void Poll(grpc::CompletionQueue* cq);

  const uint64_t self_id_;
  const PeerClientOptions options_;
  ResponseHandler on_response_;
  UnreachableHandler on_unreachable_;
  std::map<uint64_t, std::unique_ptr<Raft::Stub>> stubs_;  // immutable after construction
  std::vector<std::unique_ptr<grpc::CompletionQueue>> cqs_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> next_cq_{0};

  std::mutex mu_;
  std::set<Call*> inflight_;  // guarded by mu_: for cancellation at shutdown
  bool shut_down_ = false;    // guarded by mu_
  // Failed-call log throttling, per peer. Guarded by mu_.
  std::map<uint64_t, Clock::time_point> last_failure_log_;
};


}  // namespace raftkv
