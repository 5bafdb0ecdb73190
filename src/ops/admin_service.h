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
#include "server/call_auth.h"
#include "node/node.h"
#include "server/server_metrics.h"

namespace raftkv {

class AdminServiceImpl final : public Admin::Service {
 public:
  // `node` must outlive the service. Calls without a deadline (or with a
  // later one) wait at most max_request_timeout_ms. `auth` (not owned; null =
  // every call allowed) decides who may call (server/call_auth.h):
  // ListMembers is a client method, every other Admin method an admin one.
  AdminServiceImpl(RaftNode* node, int max_request_timeout_ms,
                   const CallAuthorizer* auth = nullptr);

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
  // SnapshotSave once authorized: takes a snapshot and streams its file.
  grpc::Status StreamSnapshot(grpc::ServerContext* context,
                              grpc::ServerWriter<SnapshotSaveResponse>* writer);
  grpc::Status ChangeMembership(grpc::ServerContext* context,
                                const raft::MembershipChange& change,
                                MemberChangeResponse* response);

  RaftNode* const node_;
  const int max_request_timeout_ms_;
  const CallAuthorizer* const auth_;
};

// An Admin service (AdminServiceImpl) with every call counted in
// `metrics` (raftkv_grpc_requests_total, raftkv_grpc_request_duration_seconds;
// service "Admin"). The asynchronous methods are counted by UnaryCall, the
// one place their calls all pass through; a synchronous service has no such
// place, so this wrapper is it. raftkv-server serves it around AdminServiceImpl.
class MeteredAdminService final : public Admin::Service {
 public:
  // Neither is owned; both must outlive the service.
  MeteredAdminService(Admin::Service* inner, ServerMetrics* metrics);

  grpc::Status TakeSnapshot(grpc::ServerContext* context, const TakeSnapshotRequest* request,
                            TakeSnapshotResponse* response) override;
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

 private:
  Admin::Service* const inner_;
  RpcMethodMetrics* const take_snapshot_;
  RpcMethodMetrics* const snapshot_save_;
  RpcMethodMetrics* const list_members_;
  RpcMethodMetrics* const add_member_;
  RpcMethodMetrics* const promote_member_;
  RpcMethodMetrics* const remove_member_;
  RpcMethodMetrics* const transfer_leader_;
};

}  // namespace raftkv
