// The Admin gRPC service (protos/raftkv/v1/admin.proto): snapshots on demand,
// backups (a snapshot streamed to the caller), the member list, single-server
// membership changes and leadership transfer, for raftkvctl and the tests.
//
// A synchronous gRPC service: these calls are rare and slow (a membership
// change waits for a commit, a transfer for an election), so each handler
// simply bridges RaftNode's callback API to its gRPC thread and waits for the
// callback, bounded by the call's deadline and by max_request_timeout_ms.
//
// Outcomes map to gRPC statuses as for the KV service:
//   - not the leader: FAILED_PRECONDITION naming the leader, with trailing
//     metadata "raftkv-leader-id" / "raftkv-leader-addr" (clients follow it);
//     no leader known: UNAVAILABLE;
//   - refused by the leader (invalid change, another change uncommitted,
//     learner not caught up, transfer refused): FAILED_PRECONDITION with the
//     reason and without leader metadata;
//   - bad arguments (id 0, malformed address): INVALID_ARGUMENT;
//   - no answer in time: DEADLINE_EXCEEDED (a membership change may still
//     commit later: list the members to find out).
#pragma once

#include <grpcpp/grpcpp.h>

#include "proto/internal.h"
#include "server/rpc/call_auth.h"
#include "node/node.h"
#include "server/rpc/server_metrics.h"
#include "server/rpc/server_options.h"

namespace raftkv {

class AdminServiceImpl final : public Admin::Service, public SnapshotStreamer {
 public:
  // `node` must outlive the service. Calls without a deadline (or with a
  // later one) wait at most max_request_timeout_ms. `auth` (not owned; null =
  // every call allowed) decides who may call (server/rpc/call_auth.h):
  // ListMembers is a client method, every other Admin method an admin one.
  // Every call is counted in `metrics` (not owned; null: not counted) as
  // raftkv_grpc_requests_total and raftkv_grpc_request_duration_seconds,
  // service "Admin". The asynchronous services are counted by UnaryCall;
  // a synchronous one has no such common path, so each method passes
  // through one frame here that authorizes and counts it.
  AdminServiceImpl(RaftNode* node, int max_request_timeout_ms,
                   const CallAuthorizer* auth = nullptr, ServerMetrics* metrics = nullptr);

  grpc::Status TakeSnapshot(grpc::ServerContext* context, const TakeSnapshotRequest* request,
                            TakeSnapshotResponse* response) override;
  // A backup: takes a snapshot as TakeSnapshot does, then streams that file
  // (chunks of kSnapshotSaveChunkBytes) with its SHA-256 in the last message.
  grpc::Status SnapshotSave(grpc::ServerContext* context, const SnapshotSaveRequest* request,
                            grpc::ServerWriter<SnapshotSaveResponse>* writer) override;
  grpc::Status ListMembers(grpc::ServerContext* context, const ListMembersRequest* request,
                           ListMembersResponse* response) override;
  grpc::Status AddMember(grpc::ServerContext* context, const AddMemberRequest* request,
                         MemberChangeResponse* response) override;
  grpc::Status PromoteMember(grpc::ServerContext* context, const PromoteMemberRequest* request,
                             MemberChangeResponse* response) override;
  grpc::Status RemoveMember(grpc::ServerContext* context, const RemoveMemberRequest* request,
                            MemberChangeResponse* response) override;
  grpc::Status TransferLeader(grpc::ServerContext* context, const TransferLeaderRequest* request,
                              TransferLeaderResponse* response) override;
  // Takes a snapshot and streams its file (chunks of
  // kSnapshotSaveChunkBytes), for SnapshotSave and etcd's
  // Maintenance.Snapshot; the caller has authorized the call.
  grpc::Status StreamSnapshot(grpc::ServerContext* context, const Write& write) override;
  grpc::Status StreamEtcdSnapshot(grpc::ServerContext* context, const Write& write) override;

  // Bytes of the snapshot file per SnapshotSave message (gRPC's default
  // receive limit is 4 MiB).
  static constexpr size_t kSnapshotSaveChunkBytes = 1 << 20;

  // Fills `response` from a node status (exposed for tests).
  static void FillMembers(const NodeStatus& status, ListMembersResponse* response);

 private:
  // min(the call's deadline, now + max_request_timeout_ms).
  Clock::time_point Deadline(const grpc::ServerContext& context) const;
  // Asks the node for a snapshot (or the one being taken) and waits for it
  // until Deadline(context); `method` names the call in errors and logs.
  grpc::Status WaitForSnapshot(grpc::ServerContext* context, const char* method,
                               SnapshotInfo* info);
  grpc::Status ChangeMembership(grpc::ServerContext* context,
                                const raft::MembershipChange& change,
                                MemberChangeResponse* response);

  // The frame of every method: refused unless `auth_` lets `caller` make
  // the call, counted in `metrics` (null: not counted); `body` answers it.
  template <class Body>
  grpc::Status Serve(const grpc::ServerContext& context, Caller caller, RpcMethodMetrics* metrics,
                     Body&& body);

  // Each method's counters (null without metrics).
  struct Methods {
    RpcMethodMetrics* take_snapshot = nullptr;
    RpcMethodMetrics* snapshot_save = nullptr;
    RpcMethodMetrics* list_members = nullptr;
    RpcMethodMetrics* add_member = nullptr;
    RpcMethodMetrics* promote_member = nullptr;
    RpcMethodMetrics* remove_member = nullptr;
    RpcMethodMetrics* transfer_leader = nullptr;
  };
  static Methods MethodsOf(ServerMetrics* metrics);

  RaftNode* const node_;
  const int max_request_timeout_ms_;
  const CallAuthorizer* const auth_;
  const Methods methods_;
};

}  // namespace raftkv
