// The client service (KV) of a member: each method's validation, the
// command it proposes or the read it serves, and the answer once the node
// has decided it. Served on the completion queues (async_call.h).
#pragma once

#include <functional>

#include "server/rpc/grpc_status.h"
#include "proto/internal.h"
#include "server/rpc/async_call.h"
#include "server/api/forwarder.h"
#include "kv/kv_requests.h"
#include "node/node.h"
#include "server/rpc/server_options.h"

namespace raftkv {

class ClientHandlers {
 public:
  // `forwarder` (may be null: no forwarding) sends the calls only the
  // leader can answer to the leader when this member does not lead.
  ClientHandlers(const ServerOptions& options, RaftNode* node, Forwarder* forwarder);
  // Registers every KV method in `methods`; `calls_per_cq` calls wait per
  // queue for the busy ones (Put, Get, Echo), fewer for the rest.
  void Register(KV::AsyncService* kv, int calls_per_cq, AsyncMethods* methods);
  // Where the reads that walk a range run once their barrier is reached
  // (the server: a completion-queue thread); unset: where the barrier
  // completes (the apply thread). Set before the server starts.
  void SetOffload(std::function<void(std::function<void()>)> offload) { offload_ = std::move(offload); }

 private:
  using PutCall = UnaryCall<PutRequest, PutResponse>;
  using GetCall = UnaryCall<GetRequest, GetResponse>;
  using DeleteCall = UnaryCall<DeleteRequest, DeleteResponse>;
  using CasCall = UnaryCall<CompareAndSwapRequest, CompareAndSwapResponse>;
  using BatchCall = UnaryCall<BatchRequest, BatchResponse>;
  using StatusCall = UnaryCall<StatusRequest, StatusResponse>;
  using EchoCall = UnaryCall<EchoRequest, EchoResponse>;
  using OpenSessionCall = UnaryCall<OpenSessionRequest, OpenSessionResponse>;
  using CloseSessionCall = UnaryCall<CloseSessionRequest, CloseSessionResponse>;
  using RangeCall = UnaryCall<RangeRequest, RangeResponse>;
  using DeleteRangeCall = UnaryCall<DeleteRangeRequest, DeleteRangeResponse>;
  using TxnCall = UnaryCall<TxnRequest, TxnResponse>;

  // The client's deadline, capped at --max_request_timeout_ms.
  Clock::time_point Deadline(grpc::ServerContext& context) const;

  void HandlePut(PutCall* call);
  void HandleGet(GetCall* call);
  void HandleDelete(DeleteCall* call);
  void HandleCompareAndSwap(CasCall* call);
  void HandleBatch(BatchCall* call);
  void HandleStatus(StatusCall* call);
  void HandleEcho(EchoCall* call);
  void HandleOpenSession(OpenSessionCall* call);
  void HandleCloseSession(CloseSessionCall* call);
  void HandleRange(RangeCall* call);
  void HandleDeleteRange(DeleteRangeCall* call);
  void HandleTxn(TxnCall* call);
  // member_id, raft_term and revision of an answer.
  void FillHeader(int64_t revision, uint64_t term, ResponseHeader* header) const;

  // Runs `read` where SetOffload said.
  void Offload(std::function<void()> read) const {
    if (offload_) return offload_(std::move(read));
    read();
  }

  const ServerOptions options_;
  const RequestLimits limits_;
  RaftNode* const node_;
  Forwarder* const forwarder_;
  std::function<void(std::function<void()>)> offload_;
};

// Finishes `call` with the error of `out`, with the trailers a client acts
// on: the leader's id and address (raftkv-leader-id, raftkv-leader-addr) on
// FAILED_PRECONDITION, raftkv-not-applied, raftkv-session-expired.
template <class Call>
void FinishWithOutcome(Call* call, const Outcome& out) {
  if (out.status.code() == Status::Code::kFailedPrecondition && out.leader_id != 0) {
    call->context().AddTrailingMetadata("raftkv-leader-id", std::to_string(out.leader_id));
    call->context().AddTrailingMetadata("raftkv-leader-addr", out.leader_address);
  }
  if (out.not_applied) call->context().AddTrailingMetadata("raftkv-not-applied", "1");
  if (out.session_expired) call->context().AddTrailingMetadata("raftkv-session-expired", "1");
  call->FinishWithError(ToGrpcStatus(out.status));
}

}  // namespace raftkv
