// PeerClient: the node's outgoing Raft RPCs, over the asynchronous gRPC client
// API on its own completion queues and threads (separate from the queues that
// serve incoming calls). Each AppendEntries / RequestVote / TimeoutNow is one
// async unary call; many calls per follower may be in flight at once
// (pipelining; the core's Progress bounds how many). Completions are handed
// to the node as response messages, and failures as "peer unreachable".
//
// Snapshots (kSnapshot) are different: a whole file streamed to the follower
// with the client-streaming InstallSnapshot RPC. Each transfer runs on a
// thread of its own with the synchronous API (Write() blocks on gRPC flow
// control, so a slow follower slows only its own transfer; appends to the
// other followers go on through the completion queues). At most one transfer
// per peer runs at a time.
//
// Members are dialed by id; UpdateMembers() adds members of a new
// configuration. Channels of members that left are kept (messages still in
// flight or a final one to a removed member may need them; they cost one idle
// connection at most).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/security.h"
#include "common/mutex.h"
#include "proto/internal.h"
#include "node/cluster_config.h"
#include "server/peer/append_stream_client.h"
#include "server/peer/fault_injector.h"
#include "node/node.h"

namespace raftkv {

struct PeerClientOptions {
  int cq_num = 1;
  int threads_per_cq = 1;
  int append_timeout_ms = 2000;  // deadline of one AppendEntries call
  int vote_timeout_ms = 1000;    // deadline of one RequestVote call
  int timeout_now_timeout_ms = 1000;  // deadline of one TimeoutNow call
  // Deadline of a whole InstallSnapshot stream. Generous: a large snapshot
  // over a slow link. An unreachable peer fails at once (no wait-for-ready).
  int snapshot_timeout_ms = 10 * 60 * 1000;
  // Bytes of the snapshot file per InstallSnapshot message.
  size_t snapshot_chunk_bytes = 1 << 20;
  // After a failed transfer the peer is reported unreachable only this much
  // later: until then the core keeps the follower in its snapshot state and
  // sends it nothing, so a dead follower is not sent a snapshot per batch.
  int snapshot_retry_ms = 1000;
  // Appends (and heartbeats) travel on one Peer.Append stream per follower
  // (append_stream_client.h) instead of one AppendEntries call each; a
  // follower that does not serve the stream (UNIMPLEMENTED) gets unary calls.
  bool append_stream = true;
  // Requests queued on one stream and not yet handed to gRPC, at most; past
  // it an append is dropped (the core retries).
  size_t append_stream_queue = 1024;
  // Tests only: messages to peers it blocks are dropped. Not owned; may be null.
  const FaultInjector* faults = nullptr;
  // TLS of the channels to peers (the member's own certificate is presented
  // as the client certificate); null = the process-wide setting.
  std::shared_ptr<const ChannelSecurity> security;
  // The cluster id stamped on every request (RaftNode::cluster_id); null
  // sends 0 (not known).
  std::function<uint64_t()> cluster_id;
};

class PeerClient : public PeerSender {
 public:
  using ResponseHandler = std::function<void(const raft::Message&)>;
  using UnreachableHandler = std::function<void(uint64_t peer)>;
  // Opens the snapshot (last_index, last_term) for sending
  // (RaftNode::OpenSnapshotSource).
  using SnapshotOpener = std::function<Status(uint64_t last_index, uint64_t last_term,
                                              std::unique_ptr<SnapshotSource>* out)>;

  // `cluster`: the members dialed from the start (the cluster file).
  // `open_snapshot` may be null: snapshot transfers then fail (the core
  // keeps probing).
  PeerClient(const ClusterConfig& cluster, uint64_t self_id, const PeerClientOptions& options,
             ResponseHandler on_response, UnreachableHandler on_unreachable,
             SnapshotOpener open_snapshot = nullptr);
  ~PeerClient() override;

  void Send(raft::Message m) override;
  void UpdateMembers(const MembershipConfig& config) override;
  // Cancels calls and snapshot transfers in flight and joins every thread.
  // Call after the node stopped sending.
  void Shutdown();

 private:
  struct Call;
  struct Transfer;
  void Poll(grpc::CompletionQueue* cq);
  // Creates (or re-creates, for a new address) the stub of `id`.
  void DialLocked(uint64_t id, const std::string& address) REQUIRES(mu_);
  void StartSnapshotTransfer(raft::Message m, std::shared_ptr<internal::Peer::Stub> stub);
  // Queues an append on the stream to m.to, opened if there is none; false
  // when that peer takes unary calls only.
  bool SendOnStream(raft::Message* m, const std::shared_ptr<internal::Peer::Stub>& stub) EXCLUDES(mu_);
  // A stream ended (AppendStreamClient's on_end).
  // `replaced`: the owner had dialed the member anew and cancelled this
  // stream itself, which is no news of the member's reachability.
  void StreamEnded(uint64_t peer, const grpc::Status& status, bool replaced) EXCLUDES(mu_);
  // Hands a member's answer to the core; false (logged) if it is malformed,
  // which the caller handles like a failed call.
  bool Deliver(uint64_t peer, const raft::Message& answer);
  // The body of a transfer thread: streams the file, then reports.
  void RunSnapshotTransfer(Transfer* transfer, const raft::Message& m,
                           std::shared_ptr<internal::Peer::Stub> stub);
  // True at most every 5 s per peer: failure logs are throttled.
  bool ShouldLogFailureLocked(uint64_t peer) REQUIRES(mu_);

  const uint64_t self_id_;
  const PeerClientOptions options_;
  ResponseHandler on_response_;
  UnreachableHandler on_unreachable_;
  SnapshotOpener open_snapshot_;
  std::vector<std::unique_ptr<grpc::CompletionQueue>> cqs_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> next_cq_{0};

  Mutex mu_;
  struct Peer {
    std::string address;
    std::shared_ptr<internal::Peer::Stub> stub;  // calls in flight hold a reference
  };
  std::map<uint64_t, Peer> peers_ GUARDED_BY(mu_);
  std::set<Call*> inflight_ GUARDED_BY(mu_);  // for cancellation at shutdown
  struct Stream {
    AppendStreamClient* stream = nullptr;  // erased by its on_forget, then it deletes itself
    std::shared_ptr<internal::Peer::Stub> stub;
  };
  std::map<uint64_t, Stream> streams_ GUARDED_BY(mu_);  // open append streams by peer
  std::set<uint64_t> unary_only_ GUARDED_BY(mu_);       // peers without Peer.Append
  size_t open_streams_ GUARDED_BY(mu_) = 0;              // not yet ended (Shutdown waits)
  CondVar streams_cv_;
  // Snapshot transfers by peer (finished ones are joined when the next one
  // to that peer starts, or at shutdown).
  std::map<uint64_t, std::shared_ptr<Transfer>> transfers_ GUARDED_BY(mu_);
  bool shut_down_ GUARDED_BY(mu_) = false;
  CondVar shutdown_cv_;  // wakes transfer threads waiting to report
  // Failed-call log throttling, per peer.
  std::map<uint64_t, Clock::time_point> last_failure_log_ GUARDED_BY(mu_);
};


}  // namespace raftkv
