// The node's gRPC server: the client service (KV), the peer service (Raft)
// and, when given, the Admin service on one port.
//
// KV, Raft.AppendEntries and Raft.RequestVote -- the busy methods -- are served
// with the asynchronous completion-queue API by a pool of `cq_num` completion
// queues, each polled by `threads_per_cq` threads. Every call is an object
// that moves through "waiting for a request" -> "handled" -> "finished";
// handlers never block: writes and linearizable reads finish from the node's
// I/O loop when they commit.
//
// Raft.InstallSnapshot (a long client stream of a whole snapshot file),
// Raft.TimeoutNow and the Admin service are rare and may block, so they are
// synchronous methods run by gRPC's own sync thread pool: the Raft service
// is a hybrid (WithAsyncMethod_AppendEntries<WithAsyncMethod_RequestVote<
// Raft::Service>>), which gRPC supports per method.
#pragma once

#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "raftkv.grpc.pb.h"
#include "service/call_auth.h"
#include "service/fault_injector.h"
#include "service/node.h"

namespace raftkv {

struct ServerOptions {
  std::string listen_address;  // host:port to bind
  int cq_num = 2;
  int threads_per_cq = 1;
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  size_t max_batch_ops = 10000;         // KV.Batch: operations per call
  size_t max_batch_bytes = 4 << 20;     // KV.Batch: key + value bytes per call
  // What peers send: the soft byte limit of one AppendEntries
  // (--max_append_bytes) and the InstallSnapshot chunk size. With the limits
  // above they bound the largest legitimate message (MaxReceiveMessageBytes).
  size_t max_append_bytes = 1 << 20;
  size_t snapshot_chunk_bytes = 1 << 20;
  // Deadline applied to client calls that carry none (or a later one).
  int max_request_timeout_ms = 10000;
  // Calls pre-posted per completion queue for each busy method.
  int calls_per_cq = 64;
  // OPEN_SESSION: idle time (cluster time) after which a session expires.
  uint64_t session_timeout_ms = 600000;
  // Tests only (--enable_test_faults): peer requests from blocked members are
  // refused and the Testing service is served. Not owned; null = disabled.
  FaultInjector* faults = nullptr;
  // The Admin service (AdminServiceImpl, a synchronous service), served when
  // set. Not owned; must outlive the server.
  grpc::Service* admin_service = nullptr;
  // TLS credentials of the port and who may call what (service/call_auth.h).
  // Not owned; null = plaintext, every call allowed.
  const CallAuthorizer* auth = nullptr;
};

// Raft service: AppendEntries and RequestVote asynchronous, InstallSnapshot
// and TimeoutNow synchronous (see above).
using RaftHybridService =
    Raft::WithAsyncMethod_AppendEntries<Raft::WithAsyncMethod_RequestVote<Raft::Service>>;

// The gRPC receive limit of the server port: twice the largest message a
// client or a peer may legitimately send -- a Put or CAS of the largest key
// and values, a full KV.Batch with its per-op framing, a full AppendEntries
// (one entry may exceed --max_append_bytes: it then travels alone), a
// snapshot chunk -- plus 1 MiB of framing. Twice, so members whose limits
// differ somewhat still replicate to each other; anything larger is refused
// by gRPC (RESOURCE_EXHAUSTED) before it is read into memory.
size_t MaxReceiveMessageBytes(const ServerOptions& options);

class GrpcServer {
 public:
  GrpcServer(const ServerOptions& options, RaftNode* node);
  ~GrpcServer();
  // Binds and starts the completion-queue threads.
  Status Start();
  // Stops accepting calls; calls in flight get `grace_ms` to finish.
  void Shutdown(int grace_ms = 1000);
  // Drains and joins the completion queues; call after the node stopped.
  void Join();
  int bound_port() const { return bound_port_; }

 private:
  class Handlers;
  class RaftService;  // the hybrid Raft service: the sync methods' handlers
  void Poll(grpc::ServerCompletionQueue* cq);

  const ServerOptions options_;
  RaftNode* node_;
  KV::AsyncService kv_service_;
  std::unique_ptr<RaftService> raft_service_;
  Testing::AsyncService testing_service_;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs_;
  std::vector<std::thread> threads_;
  int bound_port_ = 0;
  bool shut_down_ = false;
  // Calls re-post themselves and finish from completion-queue threads while
  // Join() shuts the queues down: they hold `drain_mu_` shared and check
  // `draining_`; Join() sets it under the exclusive lock before shutting the
  // queues down, so no operation is ever started on a shut-down queue.
  std::shared_mutex drain_mu_;
  bool draining_ = false;  // guarded by drain_mu_
};

}  // namespace raftkv
