// The follower side of Peer.Append: one long-lived stream per leader
// carrying its AppendEntries requests (heartbeats too) and, on the way back,
// the answers, each written once the state it reflects is durable (the
// node's reply callback), in the order they come.
//
// Requests are read ahead of their answers (pipelining, as the unary calls
// were in flight together), up to kMaxPending steps not yet answered; past
// that the next read waits for answers to drain and HTTP/2 flow control
// holds the leader. A request that fails the checks ends the stream with
// its status (the leader opens a new one). The reactor deletes itself once
// gRPC is done with the stream and no step it started is still to answer.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "node/node.h"
#include "proto/internal.h"
#include "server/rpc/call_auth.h"
#include "server/rpc/server_metrics.h"

namespace raftkv {

class AppendStreamReactor final : public grpc::ServerBidiReactor<AppendEntriesRequest, AppendEntriesResponse> {
 public:
  static constexpr size_t kMaxPending = 1024;
  // What a request must pass before it is stepped (PeerService's checks of
  // the unary AppendEntries).
  using Check = std::function<grpc::Status(const AppendEntriesRequest&)>;

  AppendStreamReactor(grpc::CallbackServerContext* context, const CallAuthorizer* auth, RaftNode* node,
                      Check check, RpcMethodMetrics* metrics);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void OnReply(const raft::Message* reply);
  // Starts the next write, or the next read, or ends the stream, as the
  // state allows.
  void ProceedLocked();
  void FinishLocked(const grpc::Status& status);

  RaftNode* const node_;
  const Check check_;
  RpcMethodMetrics* const metrics_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  AppendEntriesRequest request_;   // written by gRPC between StartRead and OnReadDone
  AppendEntriesResponse writing_;  // read by gRPC between StartWrite and OnWriteDone
  // Guarded by mu_:
  std::deque<AppendEntriesResponse> answers_;  // durable, not yet written
  size_t pending_ = 0;                         // steps not yet answered
  bool reading_ = false;                       // a read is outstanding
  bool stepping_ = false;                      // a request read is being handed to the node
  bool write_active_ = false;                  // a write is outstanding
  bool read_ended_ = false;                    // the leader closed its side
  bool finished_ = false;                      // Finish was called
  bool done_ = false;                          // OnDone came
};

}  // namespace raftkv
