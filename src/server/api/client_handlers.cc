#include "server/api/client_handlers.h"

#include "common/version.h"
#include "server/rpc/grpc_status.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

namespace raftkv {

ClientHandlers::ClientHandlers(const ServerOptions& options, RaftNode* node, Forwarder* forwarder)
    : KeyValueHandlers(options, node, forwarder) {}

void ClientHandlers::Register(KV::AsyncService* kv, int busy, AsyncMethods* methods) {
  using S = KV::AsyncService;
  const int rare = 4;
  const int some = std::max(rare, busy / 4);
  const Caller c = Caller::kClient;
  auto name = [](const char* method) { return RpcName::Of<KV>(method); };
  methods->Add<PutRequest, PutResponse>(kv, &S::RequestPut, name("Put"), c, busy,
                                        [this](PutCall* call) { HandlePut(call); });
  methods->Add<GetRequest, GetResponse>(kv, &S::RequestGet, name("Get"), c, busy,
                                        [this](GetCall* call) { HandleGet(call); });
  methods->Add<EchoRequest, EchoResponse>(kv, &S::RequestEcho, name("Echo"), c, busy,
                                          [this](EchoCall* call) { HandleEcho(call); });
  methods->Add<BatchRequest, BatchResponse>(kv, &S::RequestBatch, name("Batch"), c, some,
                                            [this](BatchCall* call) { HandleBatch(call); });
  methods->Add<DeleteRequest, DeleteResponse>(kv, &S::RequestDelete, name("Delete"), c, rare,
                                              [this](DeleteCall* call) { HandleDelete(call); });
  methods->Add<CompareAndSwapRequest, CompareAndSwapResponse>(
      kv, &S::RequestCompareAndSwap, name("CompareAndSwap"), c, rare,
      [this](CasCall* call) { HandleCompareAndSwap(call); });
  methods->Add<StatusRequest, StatusResponse>(kv, &S::RequestStatus, name("Status"), c, rare,
                                              [this](StatusCall* call) { HandleStatus(call); });
  methods->Add<OpenSessionRequest, OpenSessionResponse>(
      kv, &S::RequestOpenSession, name("OpenSession"), c, rare,
      [this](OpenSessionCall* call) { HandleOpenSession(call); });
  methods->Add<CloseSessionRequest, CloseSessionResponse>(
      kv, &S::RequestCloseSession, name("CloseSession"), c, rare,
      [this](CloseSessionCall* call) { HandleCloseSession(call); });
  methods->Add<RangeRequest, RangeResponse>(kv, &S::RequestRange, name("Range"), c, some,
                                            [this](RangeCall* call) { HandleRange(call); });
  methods->Add<DeleteRangeRequest, DeleteRangeResponse>(
      kv, &S::RequestDeleteRange, name("DeleteRange"), c, rare,
      [this](DeleteRangeCall* call) { HandleDeleteRange(call); });
  methods->Add<TxnRequest, TxnResponse>(kv, &S::RequestTxn, name("Txn"), c, some,
                                        [this](TxnCall* call) { HandleTxn(call); });
}

void ClientHandlers::FillHeader(int64_t revision, uint64_t term, ResponseHeader* header) const {
  header->set_member_id(node_->id());
  header->set_revision(revision);
  header->set_raft_term(term);
}

void ClientHandlers::HandleEcho(EchoCall* call) {
  EchoResponse resp;
  resp.set_payload(std::move(*call->request().mutable_payload()));
  call->Finish(resp);
}

void ClientHandlers::HandleOpenSession(OpenSessionCall* call) {
  if (Forwarder::MaybeForward<KV>(forwarder_, call, "OpenSession")) return;
  Command cmd;
  cmd.set_op(Command::OPEN_SESSION);
  cmd.set_session_timeout_ms(options_.session_timeout_ms);
  cmd.set_max_sessions(options_.max_sessions);
  const uint64_t timeout = options_.session_timeout_ms;
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call, timeout](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    OpenSessionResponse resp;
    resp.set_client_id(out.apply.client_id);
    resp.set_timeout_ms(timeout);
    call->Finish(resp);
  });
}

void ClientHandlers::HandleCloseSession(CloseSessionCall* call) {
  if (Forwarder::MaybeForward<KV>(forwarder_, call, "CloseSession")) return;
  if (call->request().client_id() == 0) {
    return call->FinishWithError(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "client_id must be > 0"));
  }
  Command cmd;
  cmd.set_op(Command::CLOSE_SESSION);
  cmd.set_client_id(call->request().client_id());
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    call->Finish(CloseSessionResponse());
  });
}

void ClientHandlers::HandlePut(PutCall* call) {
  if (Forwarder::MaybeForward<KV>(forwarder_, call, "Put")) return;
  Command cmd;
  Status bad = PutCommand(&call->request(), limits_, &cmd);
  if (bad.ok()) bad = node_->CheckQuota(cmd);
  if (!bad.ok()) return call->FinishWithError(ToGrpcStatus(bad));
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    PutResponse resp;
    resp.set_index(out.index);
    resp.set_term(out.term);
    resp.set_revision(out.apply.answer.revision());
    if (out.apply.answer.has_prev_kv()) resp.mutable_prev_kv()->Swap(out.apply.answer.mutable_prev_kv());
    call->Finish(resp);
  });
}

void ClientHandlers::HandleDelete(DeleteCall* call) {
  if (Forwarder::MaybeForward<KV>(forwarder_, call, "Delete")) return;
  Command cmd;
  grpc::Status bad = ToGrpcStatus(DeleteCommand(&call->request(), limits_, &cmd));
  if (!bad.ok()) return call->FinishWithError(bad);
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    DeleteResponse resp;
    resp.set_existed(out.apply.existed);
    resp.set_index(out.index);
    resp.set_term(out.term);
    resp.set_revision(out.apply.answer.revision());
    call->Finish(resp);
  });
}

// Like Put, but the state machine writes only if the key's current state
// matches; the response reports whether it did and what was there before.
void ClientHandlers::HandleCompareAndSwap(CasCall* call) {
  if (Forwarder::MaybeForward<KV>(forwarder_, call, "CompareAndSwap")) return;
  Command cmd;
  Status bad = CompareAndSwapCommand(&call->request(), limits_, &cmd);
  if (bad.ok()) bad = node_->CheckQuota(cmd);
  if (!bad.ok()) return call->FinishWithError(ToGrpcStatus(bad));
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    CompareAndSwapResponse resp;
    resp.set_swapped(out.apply.swapped);
    resp.set_found(out.apply.found);
    resp.set_current(std::move(out.apply.current));
    resp.set_index(out.index);
    resp.set_term(out.term);
    resp.set_revision(out.apply.answer.revision());
    call->Finish(resp);
  });
}

// Many PUTs and DELETEs as one log entry, answered once it is applied.
void ClientHandlers::HandleBatch(BatchCall* call) {
  if (Forwarder::MaybeForward<KV>(forwarder_, call, "Batch")) return;
  Command cmd;
  Status bad = BatchCommand(&call->request(), limits_, &cmd);
  if (bad.ok()) bad = node_->CheckQuota(cmd);
  if (!bad.ok()) return call->FinishWithError(ToGrpcStatus(bad));
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    BatchResponse resp;
    resp.set_index(out.index);
    resp.set_term(out.term);
    resp.mutable_existed()->Reserve(static_cast<int>(out.apply.batch_existed.size()));
    for (bool e : out.apply.batch_existed) resp.add_existed(e);
    resp.set_revision(out.apply.answer.revision());
    call->Finish(resp);
  });
}

void ClientHandlers::HandleGet(GetCall* call) {
  if (!call->request().allow_stale() &&
      Forwarder::MaybeForward<KV>(forwarder_, call, "Get")) {
    return;
  }
  grpc::Status bad = ToGrpcStatus(CheckGetRequest(call->request(), limits_));
  if (!bad.ok()) return call->FinishWithError(bad);
  const KvStateMachine& sm = node_->state_machine();
  auto answer = [call, &sm](uint64_t index) {
    GetResponse resp;
    int64_t revision = 0;  // read with the record, under one lock
    std::optional<KvRecord> record = sm.GetRecord(call->request().key(), &revision);
    resp.set_revision(revision);
    if (record) {
      resp.set_found(true);
      KeyValue* kv = resp.mutable_kv();
      kv->set_value(record->value);
      resp.set_value(std::move(record->value));
      kv->set_key(call->request().key());
      kv->set_create_revision(record->create_revision);
      kv->set_mod_revision(record->mod_revision);
      kv->set_version(record->version);
      kv->set_lease(record->lease);
    }
    resp.set_applied_index(std::max(index, sm.AppliedIndex()));
    call->Finish(resp);
  };
  if (call->request().allow_stale()) return answer(0);
  node_->ReadIndex(Deadline(call->context()), [call, answer](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    answer(out.index);
  });
}

// Served from this member's state after a ReadIndex barrier (or at once
// when serializable); a range at a past revision reads the history.
void ClientHandlers::HandleRange(RangeCall* call) {
  if (!call->request().serializable() &&
      Forwarder::MaybeForward<KV>(forwarder_, call, "Range")) {
    return;
  }
  grpc::Status bad = ToGrpcStatus(CheckRangeRequest(call->request(), limits_));
  if (!bad.ok()) return call->FinishWithError(bad);
  auto answer = [this, call](uint64_t term) {
    RangeResponse resp;
    Status s = node_->state_machine().Range(call->request(), &resp, options_.max_response_bytes);
    if (!s.ok()) return call->FinishWithError(ToGrpcStatus(s));
    FillHeader(resp.header().revision(), term, resp.mutable_header());
    call->Finish(resp);
  };
  if (call->request().serializable()) return answer(node_->GetStatus().term);
  node_->ReadIndex(Deadline(call->context()), [this, call, answer](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    if (call->request().range_end().empty()) return answer(out.term);  // one key: here
    Offload([answer, term = out.term] { answer(term); });
  });
}

void ClientHandlers::HandleDeleteRange(DeleteRangeCall* call) {
  if (Forwarder::MaybeForward<KV>(forwarder_, call, "DeleteRange")) return;
  Command cmd;
  grpc::Status bad = ToGrpcStatus(DeleteRangeCommand(&call->request(), limits_, &cmd));
  if (!bad.ok()) return call->FinishWithError(bad);
  if (cmd.prev_kv()) {  // as a transaction's answer: refused before it is proposed
    Status too_big = node_->state_machine().CheckDeleteAnswer(cmd.key(), cmd.range_end(), cmd.max_result_bytes());
    if (!too_big.ok()) return call->FinishWithError(ToGrpcStatus(too_big));
  }
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    DeleteRangeResponse resp;
    FillHeader(out.apply.answer.revision(), out.term, resp.mutable_header());
    resp.set_deleted(out.apply.answer.deleted());
    resp.mutable_prev_kvs()->Swap(out.apply.answer.mutable_prev_kvs());
    resp.set_index(out.index);
    call->Finish(resp);
  });
}

// Through the log as one entry; a transaction that only reads is served
// like a range (ReadIndex, then this member's state).
void ClientHandlers::HandleTxn(TxnCall* call) {
  if (Forwarder::MaybeForward<KV>(forwarder_, call, "Txn")) return;
  if (TxnIsReadOnly(call->request())) {
    Command unused;
    TxnRequest copy = call->request();
    grpc::Status bad = ToGrpcStatus(TxnCommand(&copy, limits_, &unused));
    if (!bad.ok()) return call->FinishWithError(bad);
    node_->ReadIndex(Deadline(call->context()), [this, call](Outcome out) {
      if (!out.status.ok()) return FinishWithOutcome(call, out);
      Offload([this, call, term = out.term] {
        TxnResponse resp;
        Status s = node_->state_machine().ReadTxn(call->request(), &resp, options_.max_response_bytes);
        if (!s.ok()) return call->FinishWithError(ToGrpcStatus(s));
        FillTxnHeaders(resp.header().revision(), term, &resp);
        call->Finish(resp);
      });
    });
    return;
  }
  Command cmd;
  Status bad = TxnCommand(&call->request(), limits_, &cmd);
  // Refused here, before it is proposed, when its answer would be over the
  // bound on the state as it is now (the entry is checked again, alike on
  // every replica, when it is applied), or it would take the state past its quota.
  if (bad.ok()) bad = node_->state_machine().CheckTxnAnswer(cmd.txn(), limits_.max_txn_result_bytes);
  if (bad.ok()) bad = node_->CheckQuota(cmd);
  if (!bad.ok()) return call->FinishWithError(ToGrpcStatus(bad));
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    TxnResponse resp;
    resp.Swap(out.apply.answer.mutable_txn());
    FillTxnHeaders(resp.header().revision(), out.term, &resp);
    resp.set_index(out.index);
    call->Finish(resp);
  });
}

void ClientHandlers::FillTxnHeaders(int64_t revision, uint64_t term, TxnResponse* resp) const {
  FillHeader(revision, term, resp->mutable_header());
  for (ResponseOp& r : *resp->mutable_responses()) {
    if (r.has_response_range()) {
      FillHeader(revision, term, r.mutable_response_range()->mutable_header());
    } else if (r.has_response_delete_range()) {
      FillHeader(revision, term, r.mutable_response_delete_range()->mutable_header());
    } else if (r.has_response_txn()) {  // nested at most kMaxTxnDepth deep
      FillTxnHeaders(revision, term, r.mutable_response_txn());
    }
  }
}

void ClientHandlers::HandleStatus(StatusCall* call) {
  const NodeStatus st = node_->GetStatus();
  StatusResponse resp;
  resp.set_id(st.id);
  resp.set_address(st.address);
  resp.set_role(raft::RoleName(st.role));
  resp.set_term(st.term);
  resp.set_commit_index(st.commit_index);
  resp.set_applied_index(st.applied_index);
  resp.set_leader_id(st.leader_id);
  resp.set_leader_address(st.leader_address);
  resp.set_last_log_index(st.last_log_index);
  resp.set_durable_index(st.durable_index);
  for (uint64_t v : st.voters) resp.add_voters(v);
  resp.set_sessions(st.sessions);
  resp.set_revision(st.revision);
  resp.set_version(VersionString());
  call->Finish(resp);
}

}  // namespace raftkv
