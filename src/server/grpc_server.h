// The node's gRPC server: the client service (KV, client_handlers.h), the
// peer service (Peer, peer_service.h) and, when given, the Admin service on
// one port, with the standard health service and reflection.
//
// The asynchronous methods (async_call.h: KV, Peer.AppendEntries,
// Peer.RequestVote) are served by a pool of `cq_num` completion queues, each
// polled by `threads_per_cq` threads; handlers never block: writes and
// linearizable reads finish from the apply thread when they are applied.
// Peer.InstallSnapshot, Peer.TimeoutNow and the Admin service are
// synchronous methods run by gRPC's own sync thread pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/internal.h"
#include "server/rpc/async_call.h"
#include "server/api/forwarder.h"
#include "node/node.h"
#include "proto/etcd.h"
#include "server/etcd/etcd_cluster.h"
#include "server/etcd/etcd_kv.h"
#include "server/etcd/etcd_maintenance.h"
#include "node/auto_compactor.h"
#include "node/lease_keeper.h"
#include "server/rpc/reflection_service.h"
#include "server/rpc/server_options.h"
#include "server/api/watch_call.h"
#include "server/api/watch_hub.h"

namespace raftkv {

class ClientHandlers;
class EtcdLease;
class EtcdWatch;
class PeerService;
class LeaseService;

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
  // Ends every watch (UNAVAILABLE), stops the lease clock, stops accepting
  // calls; calls in flight get `grace_ms` to finish.
  void Shutdown(int grace_ms = 1000);
  // Drains and joins the completion queues; call after the node stopped.
  void Join();
  int bound_port() const { return bound_port_; }
  // The per-method counters (options.metrics, or the server's own).
  ServerMetrics& metrics() { return *options_.metrics; }
  const WatchHub& watch_hub() const { return hub_; }
  const LeaseKeeper& lease_keeper() const { return keeper_; }
  const AutoCompactor& auto_compactor() const { return compactor_; }

 private:
  class CompletionBatch;
  void Poll(grpc::ServerCompletionQueue* cq);
  // Runs `batch` on a completion-queue thread (a grpc::Alarm that is already
  // due), or here once the server drains.
  void FinishOnCq(Completions batch);
  // The same for any batch of at least `min_batch` closures (smaller ones
  // run here).
  void RunOnCq(Completions batch, size_t min_batch);

  std::unique_ptr<ServerMetrics> own_metrics_;  // when options.metrics is null
  const ServerOptions options_;
  RaftNode* node_;
  DrainGate gate_;
  AsyncMethods methods_;
  KV::AsyncService kv_service_;
  EtcdKvService etcd_kv_service_;
  EtcdClusterService etcd_cluster_service_;
  EtcdMaintenanceService etcd_maintenance_service_;  // after options_ and node_
  EtcdAuthService etcd_auth_service_;
  Testing::AsyncService testing_service_;
  Watch::AsyncService watch_service_;
  WatchHub hub_;
  WatchMethod watch_method_;
  LeaseKeeper keeper_;
  AutoCompactor compactor_;
  std::unique_ptr<Forwarder> forwarder_;  // null when forwarding is off
  std::unique_ptr<LeaseService> lease_service_;
  // The node tells hub_ when it applies; the metrics count hub_'s watchers.
  bool observer_set_ = false;
  std::unique_ptr<ClientHandlers> client_handlers_;
  std::unique_ptr<EtcdKv> etcd_kv_;
  std::unique_ptr<EtcdLease> etcd_lease_;
  std::unique_ptr<EtcdWatch> etcd_watch_;
  std::unique_ptr<EtcdMaintenance> etcd_maintenance_;
  std::unique_ptr<EtcdCluster> etcd_cluster_;
  std::unique_ptr<PeerService> peer_service_;
  std::unique_ptr<ReflectionService> reflection_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs_;
  std::vector<std::thread> threads_;
  int bound_port_ = 0;
  bool shut_down_ = false;
  std::atomic<uint64_t> next_cq_{0};
  bool dispatcher_set_ = false;  // the node hands answered calls to FinishOnCq
  // Batches handed to the queues and not yet run; Join() waits for them.
  std::mutex batches_mu_;
  std::condition_variable batches_cv_;
  int pending_batches_ = 0;  // guarded by batches_mu_
};

}  // namespace raftkv
