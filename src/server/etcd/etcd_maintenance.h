// The etcd services its tools call to look at and run a cluster, on the
// completion queues beside etcd's KV (Cluster: etcd_cluster.h):
//  - Maintenance.Status (this member's Raft state, the state's size, its
//    quota, the alarms raised), Alarm (lists, raises and clears the
//    replicated alarms: NOSPACE, raised past --quota_backend_bytes; for
//    administrators; forwarded to the leader), Defragment (nothing to do:
//    the state is in memory), HashKV (a CRC-32C of every key's state at a
//    revision, equal on members that agree; not comparable with etcd's),
//    Hash (the same, at the store's revision),
//    MoveLeader (leadership transfer, on the leader, for administrators);
//  - Auth.AuthStatus and Authenticate: raftkv's bearer token stands for
//    etcd's users. With --token_file, Authenticate with the token (or the
//    admin token) as the password answers it back as the token etcd's
//    clients then send; without, it answers etcd's "authentication is not
//    enabled".
//  - Maintenance.Snapshot: EtcdMaintenanceService below.
// What is not listed (Downgrade, the users and roles of Auth) answers
// UNIMPLEMENTED.
#pragma once

#include <atomic>

#include "node/node.h"
#include "proto/etcd.h"
#include "server/api/forwarder.h"
#include "server/rpc/async_call.h"
#include "server/rpc/server_options.h"

namespace raftkv {

// Only the methods served are asynchronous: the others keep gRPC's
// generated answer, UNIMPLEMENTED (an asynchronous method never requested
// would leave its calls waiting).
namespace etcd_maintenance_detail {
namespace pb = etcdserverpb;
using Maintenance = pb::Maintenance::WithAsyncMethod_Alarm<pb::Maintenance::WithAsyncMethod_Status<
    pb::Maintenance::WithAsyncMethod_Defragment<pb::Maintenance::WithAsyncMethod_HashKV<
        pb::Maintenance::WithAsyncMethod_Hash<pb::Maintenance::WithAsyncMethod_MoveLeader<pb::Maintenance::Service>>>>>>;
using Auth = pb::Auth::WithAsyncMethod_AuthStatus<pb::Auth::WithAsyncMethod_Authenticate<pb::Auth::Service>>;
}  // namespace etcd_maintenance_detail
using EtcdAuthService = etcd_maintenance_detail::Auth;

// Maintenance, with Snapshot a synchronous stream (run by gRPC's sync
// threads, as the Admin service's SnapshotSave): the member's snapshot file
// (ServerOptions::snapshot_streamer) in the frame `etcdctl snapshot save`
// checks (whole 512-byte pages and a SHA-256), for administrators.
// `raftkvctl snapshot restore` takes the saved file; etcd's tools cannot
// open it (it is not a bbolt database).
class EtcdMaintenanceService final : public etcd_maintenance_detail::Maintenance {
 public:
  EtcdMaintenanceService(const ServerOptions& options, const RaftNode* node);
  grpc::Status Snapshot(grpc::ServerContext* context, const etcdserverpb::SnapshotRequest* request,
                        grpc::ServerWriter<etcdserverpb::SnapshotResponse>* writer) override;

 private:
  SnapshotStreamer* const streamer_;
  const CallAuthorizer* const auth_;
  const RaftNode* const node_;
  RpcMethodMetrics* const metrics_;
};

class EtcdMaintenance {
 public:
  // The version Status reports: the etcd API raftkv speaks.
  static constexpr char kEtcdVersion[] = "3.5.0";

  EtcdMaintenance(const ServerOptions& options, RaftNode* node, Forwarder* forwarder)
      : options_(options), node_(node), forwarder_(forwarder) {}
  void Register(EtcdMaintenanceService* maintenance, EtcdAuthService* auth, AsyncMethods* methods);

 private:
  using StatusCall = UnaryCall<etcdserverpb::StatusRequest, etcdserverpb::StatusResponse>;
  using AlarmCall = UnaryCall<etcdserverpb::AlarmRequest, etcdserverpb::AlarmResponse>;
  using DefragmentCall = UnaryCall<etcdserverpb::DefragmentRequest, etcdserverpb::DefragmentResponse>;
  using HashKvCall = UnaryCall<etcdserverpb::HashKVRequest, etcdserverpb::HashKVResponse>;
  using HashCall = UnaryCall<etcdserverpb::HashRequest, etcdserverpb::HashResponse>;
  using MoveLeaderCall = UnaryCall<etcdserverpb::MoveLeaderRequest, etcdserverpb::MoveLeaderResponse>;
  using AuthStatusCall = UnaryCall<etcdserverpb::AuthStatusRequest, etcdserverpb::AuthStatusResponse>;
  using AuthenticateCall = UnaryCall<etcdserverpb::AuthenticateRequest, etcdserverpb::AuthenticateResponse>;

  void HandleStatus(StatusCall* call);
  void HandleAlarm(AlarmCall* call);
  void HandleDefragment(DefragmentCall* call);
  void HandleHashKv(HashKvCall* call);
  void HandleHash(HashCall* call);
  // The hash of every key's state at `revision` (OK), or why not.
  grpc::Status HashAt(int64_t revision, uint32_t* hash) const;
  void HandleMoveLeader(MoveLeaderCall* call);
  void HandleAuthStatus(AuthStatusCall* call);
  void HandleAuthenticate(AuthenticateCall* call);
  void FillHeader(etcdserverpb::ResponseHeader* header) const;

  const ServerOptions options_;
  RaftNode* const node_;
  Forwarder* const forwarder_;
  std::atomic<bool> defragmenting_{false};  // one Defragment at a time
};

}  // namespace raftkv
