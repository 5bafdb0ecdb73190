// The peer service (raftkv.internal.Peer) of a member: what it does with the other members'
// requests. AppendEntries and RequestVote -- the busy methods -- are served
// on the completion queues (async_call.h); InstallSnapshot (a long client
// stream of a whole snapshot file) and TimeoutNow are rare and may block, so
// they are synchronous methods run by gRPC's own sync thread pool: the
// service is a hybrid, which gRPC supports per method. With test fault
// injection it also serves Testing.SetFaults.
#pragma once

#include <cstdint>
#include <mutex>

#include "proto/internal.h"
#include "server/rpc/async_call.h"
#include "node/node.h"
#include "server/rpc/server_options.h"

namespace raftkv {

// Peer service: AppendEntries, RequestVote and RenewLease (registered by the
// server for the Lease service) asynchronous, the Append stream on the
// callback API, InstallSnapshot and TimeoutNow synchronous.
using PeerHybridService = Peer::WithAsyncMethod_AppendEntries<Peer::WithAsyncMethod_RequestVote<
    Peer::WithAsyncMethod_RenewLease<Peer::WithCallbackMethod_Append<Peer::Service>>>>;

class PeerService final : public PeerHybridService {
 public:
  PeerService(const ServerOptions& options, RaftNode* node);
  // Registers the asynchronous methods in `methods` (`calls_per_cq` waiting
  // AppendEntries calls per queue), and Testing.SetFaults on `testing` when
  // fault injection is on.
  void Register(Testing::AsyncService* testing, int calls_per_cq, AsyncMethods* methods);

  // The follower side of a snapshot transfer: receive the chunks into the
  // snapshot store (verified end to end before it is renamed into place),
  // then hand the metadata to the core and answer with its response, which
  // comes once the snapshot is installed and durable.
  grpc::Status InstallSnapshot(grpc::ServerContext* context, grpc::ServerReader<InstallSnapshotRequest>* reader,
                               InstallSnapshotResponse* response) override;
  // A leader's stream of appends (append_stream.h).
  grpc::ServerBidiReactor<AppendEntriesRequest, AppendEntriesResponse>* Append(
      grpc::CallbackServerContext* context) override;
  // One-way: the core answers nothing, so the call is answered at once.
  grpc::Status TimeoutNow(grpc::ServerContext* context, const TimeoutNowRequest* request,
                          TimeoutNowResponse* response) override;

 private:
  using AppendCall = UnaryCall<AppendEntriesRequest, AppendEntriesResponse>;
  using VoteCall = UnaryCall<RequestVoteRequest, RequestVoteResponse>;

  // Peer requests must name this member and come from another member.
  grpc::Status CheckPeer(uint64_t from, uint64_t to) const;
  // What an append must pass before it is stepped, unary or streamed.
  grpc::Status CheckAppend(const AppendEntriesRequest& req) const;
  void HandleAppend(AppendCall* call);
  void HandleVote(VoteCall* call);
  // The two synchronous methods, counted by the overrides above.
  grpc::Status ServeInstallSnapshot(grpc::ServerContext* context,
                                    grpc::ServerReader<InstallSnapshotRequest>* reader,
                                    InstallSnapshotResponse* response);
  grpc::Status ServeTimeoutNow(grpc::ServerContext* context, const TimeoutNowRequest* request,
                               TimeoutNowResponse* response);
  // Reads the whole stream into a SnapshotSink and installs the snapshot.
  grpc::Status Receive(grpc::ServerContext* context, grpc::ServerReader<InstallSnapshotRequest>* reader,
                       InstallSnapshotRequest* first);

  const ServerOptions options_;
  RaftNode* const node_;
  RpcMethodMetrics* const install_snapshot_metrics_;
  RpcMethodMetrics* const timeout_now_metrics_;
  RpcMethodMetrics* const append_stream_metrics_;
  std::mutex mu_;
  bool receiving_ = false;  // guarded by mu_: one transfer at a time
};

}  // namespace raftkv
