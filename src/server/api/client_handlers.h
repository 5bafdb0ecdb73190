// The client service (KV) of a member: each method's validation, the
// command it proposes or the read it serves, and the answer once the node
// has decided it. Served on the completion queues (async_call.h).
#pragma once

#include <functional>

#include "server/rpc/grpc_status.h"
#include "proto/internal.h"
#include "server/rpc/async_call.h"
#include "server/api/key_value_handlers.h"

namespace raftkv {

class ClientHandlers : public KeyValueHandlers {
 public:
  // `forwarder` may be null (no forwarding).
  ClientHandlers(const ServerOptions& options, RaftNode* node, Forwarder* forwarder);
  // Registers every KV method in `methods`; `calls_per_cq` calls wait per
  // queue for the busy ones (Put, Get, Echo), fewer for the rest.
  void Register(KV::AsyncService* kv, int calls_per_cq, AsyncMethods* methods);

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
  // The same in a transaction's answer and in each of its operations'
  // (nested transactions included).
  void FillTxnHeaders(int64_t revision, uint64_t term, TxnResponse* resp) const;

};

// Finishes `call` with the error of `out`, with the trailers a client acts
// on: the leader's id and address (raftkv-leader-id, raftkv-leader-addr) on
// FAILED_PRECONDITION, raftkv-not-applied, raftkv-session-expired. `to_grpc`
// makes the status (an etcd service answers etcd's: etcd_errors.h).
template <class Call>
void FinishWithOutcome(Call* call, const Outcome& out,
                       grpc::Status (*to_grpc)(const Status&) = &ToGrpcStatus) {
  if (out.status.code() == Status::Code::kFailedPrecondition && out.leader_id != 0) {
    call->context().AddTrailingMetadata("raftkv-leader-id", std::to_string(out.leader_id));
    call->context().AddTrailingMetadata("raftkv-leader-addr", out.leader_address);
  }
  if (out.not_applied) call->context().AddTrailingMetadata("raftkv-not-applied", "1");
  if (out.session_expired) call->context().AddTrailingMetadata("raftkv-session-expired", "1");
  call->FinishWithError(to_grpc(out.status));
}

}  // namespace raftkv
