#include "server/etcd/etcd_kv.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "server/api/client_handlers.h"
#include "server/etcd/etcd_convert.h"
#include "server/etcd/etcd_errors.h"

namespace raftkv {

EtcdKv::EtcdKv(const ServerOptions& options, RaftNode* node, Forwarder* forwarder)
    : KeyValueHandlers(options, node, forwarder) {}

void EtcdKv::Register(EtcdKvService* service, int busy, AsyncMethods* methods) {
  using S = EtcdKvService;
  namespace pb = etcdserverpb;
  const int some = std::max(4, busy / 4);
  const Caller c = Caller::kClient;
  auto name = [](const char* method) { return RpcName::Of<pb::KV>(method); };
  methods->Add<pb::RangeRequest, pb::RangeResponse>(service, &S::RequestRange, name("Range"), c, busy,
                                                    [this](RangeCall* call) { HandleRange(call); });
  methods->Add<pb::PutRequest, pb::PutResponse>(service, &S::RequestPut, name("Put"), c, busy,
                                                [this](PutCall* call) { HandlePut(call); });
  methods->Add<pb::DeleteRangeRequest, pb::DeleteRangeResponse>(
      service, &S::RequestDeleteRange, name("DeleteRange"), c, some,
      [this](DeleteRangeCall* call) { HandleDeleteRange(call); });
  methods->Add<pb::TxnRequest, pb::TxnResponse>(service, &S::RequestTxn, name("Txn"), c, some,
                                                [this](TxnCall* call) { HandleTxn(call); });
  methods->Add<pb::CompactionRequest, pb::CompactionResponse>(
      service, &S::RequestCompact, name("Compact"), c, 2, [this](CompactCall* call) { HandleCompact(call); });
}

void EtcdKv::FillHeader(const RaftNode& node, int64_t revision, uint64_t term,
                        etcdserverpb::ResponseHeader* header) {
  header->set_cluster_id(node.cluster_id());
  header->set_member_id(node.id());
  header->set_revision(revision);
  header->set_raft_term(term);
}

// As ClientHandlers::HandleRange: served from this member's state after a
// ReadIndex barrier, or at once when serializable.
void EtcdKv::HandleRange(RangeCall* call) {
  if (!call->request().serializable() &&
      Forwarder::MaybeForward<etcdserverpb::KV>(forwarder_, call, "Range")) {
    return;
  }
  auto req = std::make_shared<RangeRequest>();
  Status bad = etcd::ToV1(&call->request(), req.get());
  if (bad.ok()) bad = CheckRangeRequest(*req, limits_);
  if (!bad.ok()) return call->FinishWithError(etcd::ToEtcdStatus(bad));
  auto answer = [this, call, req](uint64_t term) {
    RangeResponse v1;
    Status s = node_->state_machine().Range(*req, &v1, options_.max_response_bytes);
    if (!s.ok()) return call->FinishWithError(etcd::ToEtcdStatus(s));
    etcdserverpb::RangeResponse resp;
    FillHeader(*node_, v1.header().revision(), term, resp.mutable_header());
    etcd::FromV1(&v1, &resp);
    call->Finish(resp);
  };
  if (req->serializable()) return answer(node_->GetStatus().term);
  node_->ReadIndex(Deadline(call->context()), [this, call, req, answer](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    if (req->range_end().empty()) return answer(out.term);  // one key: here
    Offload([answer, term = out.term] { answer(term); });
  });
}

void EtcdKv::HandlePut(PutCall* call) {
  if (Forwarder::MaybeForward<etcdserverpb::KV>(forwarder_, call, "Put")) return;
  PutRequest req;
  Command cmd;
  Status bad = etcd::ToV1(&call->request(), &req);
  if (bad.ok()) bad = PutCommand(&req, limits_, &cmd);
  if (bad.ok()) bad = node_->CheckQuota(cmd);
  if (!bad.ok()) return call->FinishWithError(etcd::ToEtcdStatus(bad));
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    etcdserverpb::PutResponse resp;
    FillHeader(*node_, out.apply.answer.revision(), out.term, resp.mutable_header());
    if (out.apply.answer.has_prev_kv()) {
      etcd::FromV1(out.apply.answer.mutable_prev_kv(), resp.mutable_prev_kv());
    }
    call->Finish(resp);
  });
}

void EtcdKv::HandleDeleteRange(DeleteRangeCall* call) {
  if (Forwarder::MaybeForward<etcdserverpb::KV>(forwarder_, call, "DeleteRange")) return;
  DeleteRangeRequest req;
  Command cmd;
  Status bad = etcd::ToV1(&call->request(), &req);
  if (bad.ok()) bad = DeleteRangeCommand(&req, limits_, &cmd);
  if (bad.ok() && cmd.prev_kv()) {  // refused before it is proposed, as in raftkv.v1
    bad = node_->state_machine().CheckDeleteAnswer(cmd.key(), cmd.range_end(), cmd.max_result_bytes());
  }
  if (!bad.ok()) return call->FinishWithError(etcd::ToEtcdStatus(bad));
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    DeleteRangeResponse v1;
    v1.set_deleted(out.apply.answer.deleted());
    v1.mutable_prev_kvs()->Swap(out.apply.answer.mutable_prev_kvs());
    etcdserverpb::DeleteRangeResponse resp;
    FillHeader(*node_, out.apply.answer.revision(), out.term, resp.mutable_header());
    etcd::FromV1(&v1, &resp);
    call->Finish(resp);
  });
}

// Through the log as one entry, or, without writes, like a range.
void EtcdKv::HandleTxn(TxnCall* call) {
  if (Forwarder::MaybeForward<etcdserverpb::KV>(forwarder_, call, "Txn")) return;
  auto txn = std::make_shared<TxnRequest>();
  Status bad = etcd::ToV1(&call->request(), txn.get());
  if (!bad.ok()) return call->FinishWithError(etcd::ToEtcdStatus(bad));
  if (TxnIsReadOnly(*txn)) return ReadTxn(call, std::move(txn));
  Command cmd;
  bad = TxnCommand(txn.get(), limits_, &cmd);
  // Refused before it is proposed when its answer would be over the bound
  // on the state as it is now (checked again when applied).
  if (bad.ok()) bad = node_->state_machine().CheckTxnAnswer(cmd.txn(), limits_.max_txn_result_bytes);
  if (bad.ok()) bad = node_->CheckQuota(cmd);
  if (!bad.ok()) return call->FinishWithError(etcd::ToEtcdStatus(bad));
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    TxnResponse* v1 = out.apply.answer.mutable_txn();
    etcdserverpb::TxnResponse resp;
    FillHeader(*node_, v1->header().revision(), out.term, resp.mutable_header());
    etcd::FromV1(v1, resp.header(), &resp);
    call->Finish(resp);
  });
}

void EtcdKv::HandleCompact(CompactCall* call) {
  if (Forwarder::MaybeForward<etcdserverpb::KV>(forwarder_, call, "Compact")) return;
  if (call->request().revision() <= 0) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "revision must be > 0"));
  }
  // Applied at once whether `physical` or not: the history is in memory.
  Command cmd;
  cmd.set_op(Command::COMPACT);
  cmd.set_compact_revision(call->request().revision());
  node_->Propose(cmd.SerializeAsString(), Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    etcdserverpb::CompactionResponse resp;
    FillHeader(*node_, out.apply.answer.revision(), out.term, resp.mutable_header());
    call->Finish(resp);
  });
}

void EtcdKv::ReadTxn(TxnCall* call, std::shared_ptr<TxnRequest> txn) {
  Command unused;
  TxnRequest copy = *txn;  // TxnCommand moves what it checks
  Status bad = TxnCommand(&copy, limits_, &unused);
  if (!bad.ok()) return call->FinishWithError(etcd::ToEtcdStatus(bad));
  node_->ReadIndex(Deadline(call->context()), [this, call, txn](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    Offload([this, call, txn, term = out.term] {
      TxnResponse v1;
      Status s = node_->state_machine().ReadTxn(*txn, &v1, options_.max_response_bytes);
      if (!s.ok()) return call->FinishWithError(etcd::ToEtcdStatus(s));
      etcdserverpb::TxnResponse resp;
      FillHeader(*node_, v1.header().revision(), term, resp.mutable_header());
      etcd::FromV1(&v1, resp.header(), &resp);
      call->Finish(resp);
    });
  });
}

}  // namespace raftkv
