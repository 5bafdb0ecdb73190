#include "chaos/etcd_chaos_kv.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <glog/logging.h>

#include "client/channel_args.h"
#include "client/retry_loop.h"
#include "common/endpoint.h"

namespace raftkv {
namespace chaos {

EtcdAttempt ClassifyEtcdAttempt(const grpc::Status& status, bool write, bool not_applied,
                                bool redirect) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return EtcdAttempt::kAnswered;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return redirect ? EtcdAttempt::kRedirect : EtcdAttempt::kFinal;
    case grpc::StatusCode::UNAVAILABLE:
      return !write || not_applied ? EtcdAttempt::kRetry : EtcdAttempt::kIndeterminate;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      // As KvClient: a deadline says nothing of what was applied.
      return write ? EtcdAttempt::kIndeterminate : EtcdAttempt::kRetry;
    default:
      return EtcdAttempt::kFinal;
  }
}

// ---- raftkv.v1's messages to etcd's and back ----

namespace {

void CompareToEtcd(const Compare& in, etcdserverpb::Compare* out) {
  // The enums have etcd's values on both sides (etcd_convert.cc).
  out->set_result(static_cast<etcdserverpb::Compare::CompareResult>(in.result()));
  out->set_target(static_cast<etcdserverpb::Compare::CompareTarget>(in.target()));
  out->set_key(in.key());
  out->set_range_end(in.range_end());
  switch (in.target_union_case()) {
    case Compare::kVersion: out->set_version(in.version()); break;
    case Compare::kCreateRevision: out->set_create_revision(in.create_revision()); break;
    case Compare::kModRevision: out->set_mod_revision(in.mod_revision()); break;
    case Compare::kValue: out->set_value(in.value()); break;
    case Compare::kLease: out->set_lease(in.lease()); break;
    case Compare::TARGET_UNION_NOT_SET: break;
  }
}

void RangeToEtcd(const RangeRequest& in, etcdserverpb::RangeRequest* out) {
  out->set_key(in.key());
  out->set_range_end(in.range_end());
  out->set_limit(in.limit());
  out->set_revision(in.revision());
  out->set_serializable(in.serializable());
  out->set_keys_only(in.keys_only());
  out->set_count_only(in.count_only());
}

grpc::Status OpsToEtcd(const google::protobuf::RepeatedPtrField<RequestOp>& in,
                       google::protobuf::RepeatedPtrField<etcdserverpb::RequestOp>* out) {
  for (const RequestOp& op : in) {
    etcdserverpb::RequestOp* o = out->Add();
    if (op.has_request_range()) {
      RangeToEtcd(op.request_range(), o->mutable_request_range());
    } else if (op.has_request_put()) {
      const PutRequest& p = op.request_put();
      etcdserverpb::PutRequest* q = o->mutable_request_put();
      q->set_key(p.key());
      q->set_value(p.value());
      q->set_lease(p.lease());
      q->set_prev_kv(p.prev_kv());
    } else if (op.has_request_delete_range()) {
      const DeleteRangeRequest& d = op.request_delete_range();
      etcdserverpb::DeleteRangeRequest* e = o->mutable_request_delete_range();
      e->set_key(d.key());
      e->set_range_end(d.range_end());
      e->set_prev_kv(d.prev_kv());
    } else {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "the chaos etcd client sends no nested transaction");
    }
  }
  return grpc::Status::OK;
}

bool HasWrites(const google::protobuf::RepeatedPtrField<RequestOp>& ops) {
  for (const RequestOp& op : ops) {
    if (!op.has_request_range()) return true;
  }
  return false;
}

}  // namespace

grpc::Status ToEtcd(const TxnRequest& in, etcdserverpb::TxnRequest* out) {
  for (const Compare& c : in.compare()) CompareToEtcd(c, out->add_compare());
  grpc::Status s = OpsToEtcd(in.success(), out->mutable_success());
  if (s.ok()) s = OpsToEtcd(in.failure(), out->mutable_failure());
  return s;
}

void FromEtcd(const etcdserverpb::ResponseHeader& in, ResponseHeader* out) {
  out->set_member_id(in.member_id());
  out->set_revision(in.revision());
  out->set_raft_term(in.raft_term());
}

void FromEtcd(const mvccpb::KeyValue& in, KeyValue* out) {
  out->set_key(in.key());
  out->set_value(in.value());
  out->set_create_revision(in.create_revision());
  out->set_mod_revision(in.mod_revision());
  out->set_version(in.version());
  out->set_lease(in.lease());
}

void FromEtcd(const etcdserverpb::RangeResponse& in, RangeResponse* out) {
  FromEtcd(in.header(), out->mutable_header());
  for (const mvccpb::KeyValue& kv : in.kvs()) FromEtcd(kv, out->add_kvs());
  out->set_more(in.more());
  out->set_count(in.count());
}

void FromEtcd(const etcdserverpb::DeleteRangeResponse& in, DeleteRangeResponse* out) {
  FromEtcd(in.header(), out->mutable_header());
  out->set_deleted(in.deleted());
  for (const mvccpb::KeyValue& kv : in.prev_kvs()) FromEtcd(kv, out->add_prev_kvs());
}

void FromEtcd(const etcdserverpb::TxnResponse& in, TxnResponse* out) {
  FromEtcd(in.header(), out->mutable_header());
  out->set_succeeded(in.succeeded());
  for (const etcdserverpb::ResponseOp& op : in.responses()) {
    ResponseOp* o = out->add_responses();
    switch (op.response_case()) {
      case etcdserverpb::ResponseOp::kResponseRange:
        FromEtcd(op.response_range(), o->mutable_response_range());
        break;
      case etcdserverpb::ResponseOp::kResponsePut:
        o->mutable_response_put()->set_revision(op.response_put().header().revision());
        if (op.response_put().has_prev_kv()) {
          FromEtcd(op.response_put().prev_kv(), o->mutable_response_put()->mutable_prev_kv());
        }
        break;
      case etcdserverpb::ResponseOp::kResponseDeleteRange:
        FromEtcd(op.response_delete_range(), o->mutable_response_delete_range());
        break;
      case etcdserverpb::ResponseOp::kResponseTxn:
        FromEtcd(op.response_txn(), o->mutable_response_txn());
        break;
      case etcdserverpb::ResponseOp::RESPONSE_NOT_SET:
        break;
    }
  }
}

// ---- the client ----

EtcdChaosKv::EtcdChaosKv(EtcdChaosOptions options)
    : options_(std::move(options)),
      stale_endpoints_{options_.stale_endpoint},
      seeds_(options_.retry_seed) {}

EtcdChaosKv::Member* EtcdChaosKv::MemberAt(const std::string& address) {
  Member& m = members_[address];
  if (!m.stub) {
    m.channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                          RaftkvChannelArguments());
    m.stub = etcdserverpb::KV::NewStub(m.channel);
  }
  return &m;
}

template <typename Req, typename Resp>
grpc::Status EtcdChaosKv::Call(const char* name, Method<Req, Resp> method, const Req& request,
                               Resp* response, bool write, bool stale) {
  using Clock = RetryLoop::Clock;
  not_applied_ = false;
  RetryLoop loop(stale ? stale_endpoints_ : options_.endpoints, stale ? std::string() : leader_,
                 std::chrono::milliseconds(options_.timeout_ms), seeds_.Next());
  const auto rpc_timeout = std::chrono::milliseconds(std::max(1, options_.rpc_timeout_ms));
  grpc::Status last(grpc::StatusCode::DEADLINE_EXCEEDED, "no attempt made");
  while (loop.Start()) {
    const std::string target = loop.target();
    Member* m = MemberAt(target);
    const Clock::duration attempt = std::min<Clock::duration>(loop.left(), rpc_timeout);
    if (write && !m->channel->WaitForConnected(
                     std::chrono::system_clock::now() +
                     std::chrono::duration_cast<std::chrono::milliseconds>(attempt))) {
      // Not sent, so not applied: the next member.
      last = grpc::Status(grpc::StatusCode::UNAVAILABLE, "no connection to " + target);
      if (leader_ == target) leader_.clear();
      loop.Advance();
      if (loop.RoundDone() && !loop.Backoff()) break;
      continue;
    }
    grpc::ClientContext ctx;
    // A write is sent once: it gets what is left of the budget.
    SetTimeout(&ctx, write ? loop.left() : attempt);
    *response = Resp();
    const grpc::Status s = (m->stub.get()->*method)(&ctx, request, response);
    const std::string hint = TrailingValue(ctx, kLeaderAddrMetadataKey);
    const bool hint_ok = !hint.empty() && ParseEndpoint(hint).ok();
    const bool not_applied = TrailingValue(ctx, kNotAppliedMetadataKey) == "1";
    const EtcdAttempt verdict = ClassifyEtcdAttempt(s, write, not_applied, hint_ok && hint != target);
    if (!s.ok()) {
      VLOG(1) << "etcd " << name << " at " << target << ": " << StatusCodeName(s.error_code())
              << ": " << s.error_message() << (not_applied ? " (not applied)" : "");
      last = s;
    }
    switch (verdict) {
      case EtcdAttempt::kAnswered:
        if (!stale) leader_ = hint_ok ? hint : target;  // a follower that forwarded names it
        return s;
      case EtcdAttempt::kRedirect:
        leader_ = hint;
        if (loop.Redirect(hint) && !loop.Backoff()) return Finish(loop.GaveUp(last, name), write);
        break;
      case EtcdAttempt::kRetry:
        if (leader_ == target) leader_.clear();
        loop.Advance();
        if (!loop.Backoff()) return Finish(loop.GaveUp(last, name), write);
        break;
      case EtcdAttempt::kIndeterminate:
        if (leader_ == target) leader_.clear();
        return grpc::Status(s.error_code(), s.error_message() + " (etcd " + name + " at " +
                                                target + ": outcome unknown, not retried)");
      case EtcdAttempt::kFinal:
        return s;
    }
  }
  return Finish(loop.GaveUp(last, name), write);
}

grpc::Status EtcdChaosKv::Finish(grpc::Status gave_up, bool write) {
  // Every attempt was refused before it was proposed, or never sent.
  not_applied_ = write;
  return gave_up;
}

grpc::Status EtcdChaosKv::RangeEtcd(const etcdserverpb::RangeRequest& request,
                                    etcdserverpb::RangeResponse* out) {
  return Call("Range", &Stub::Range, request, out, /*write=*/false, request.serializable());
}

grpc::Status EtcdChaosKv::Get(const std::string& key, bool stale, std::string* value,
                              bool* found) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  req.set_serializable(stale);
  etcdserverpb::RangeResponse resp;
  grpc::Status s = RangeEtcd(req, &resp);
  *found = s.ok() && resp.kvs_size() > 0;
  if (*found) {
    *value = resp.kvs(0).value();
  } else {
    value->clear();
  }
  return s;
}

grpc::Status EtcdChaosKv::Range(const RangeRequest& request, RangeResponse* response) {
  etcdserverpb::RangeRequest req;
  RangeToEtcd(request, &req);
  etcdserverpb::RangeResponse resp;
  grpc::Status s = RangeEtcd(req, &resp);
  *response = RangeResponse();
  if (s.ok()) FromEtcd(resp, response);
  return s;
}

grpc::Status EtcdChaosKv::Put(const std::string& key, const std::string& value,
                              PutResponse* response) {
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  etcdserverpb::PutResponse resp;
  grpc::Status s = Call("Put", &Stub::Put, req, &resp, /*write=*/true);
  *response = PutResponse();
  if (s.ok()) response->set_revision(resp.header().revision());
  return s;
}

grpc::Status EtcdChaosKv::CompareAndSwap(const std::string& key, const std::string* expected,
                                         const std::string& value, bool* swapped, bool* found,
                                         std::string* current, int64_t* revision) {
  TxnRequest t;
  AddValueCompare(&t, key, expected);
  PutRequest* put = t.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  t.add_failure()->mutable_request_range()->set_key(key);
  TxnResponse resp;
  grpc::Status s = Txn(&t, &resp);
  *revision = 0;
  if (!s.ok()) return s;
  *swapped = resp.succeeded();
  if (*swapped) {
    *found = expected != nullptr;
    *current = expected != nullptr ? *expected : std::string();
    *revision = resp.header().revision();
  } else if (resp.responses_size() == 1 && resp.responses(0).has_response_range()) {
    const RangeResponse& rr = resp.responses(0).response_range();
    *found = rr.kvs_size() > 0;
    *current = *found ? rr.kvs(0).value() : std::string();
  } else {
    return grpc::Status(grpc::StatusCode::INTERNAL, "a failed txn without its range answer");
  }
  return s;
}

grpc::Status EtcdChaosKv::Txn(TxnRequest* request, TxnResponse* response) {
  etcdserverpb::TxnRequest req;
  grpc::Status s = ToEtcd(*request, &req);
  if (!s.ok()) return s;
  const bool write = HasWrites(request->success()) || HasWrites(request->failure());
  etcdserverpb::TxnResponse resp;
  s = Call("Txn", &Stub::Txn, req, &resp, write);
  *response = TxnResponse();
  if (s.ok()) FromEtcd(resp, response);
  return s;
}

grpc::Status EtcdChaosKv::Delete(const std::string& key, bool* existed) {
  DeleteRangeRequest req;
  req.set_key(key);
  DeleteRangeResponse resp;
  grpc::Status s = DeleteRange(&req, &resp);
  *existed = s.ok() && resp.deleted() > 0;
  return s;
}

grpc::Status EtcdChaosKv::DeleteRange(DeleteRangeRequest* request,
                                      DeleteRangeResponse* response) {
  etcdserverpb::DeleteRangeRequest req;
  req.set_key(request->key());
  req.set_range_end(request->range_end());
  req.set_prev_kv(request->prev_kv());
  etcdserverpb::DeleteRangeResponse resp;
  grpc::Status s = Call("DeleteRange", &Stub::DeleteRange, req, &resp, /*write=*/true);
  *response = DeleteRangeResponse();
  if (s.ok()) FromEtcd(resp, response);
  return s;
}

}  // namespace chaos
}  // namespace raftkv
