#include "server/etcd/etcd_convert.h"

#include <string>
#include <utility>

namespace raftkv {
namespace etcd {

Status ToV1(etcdserverpb::RangeRequest* in, RangeRequest* out) {
  out->set_key(std::move(*in->mutable_key()));
  out->set_range_end(std::move(*in->mutable_range_end()));
  out->set_limit(in->limit());
  out->set_revision(in->revision() > 0 ? in->revision() : 0);  // etcd: <= 0 is the newest
  out->set_serializable(in->serializable());
  out->set_keys_only(in->keys_only());
  out->set_count_only(in->count_only());
  // The enums have etcd's values on both sides.
  out->set_sort_order(static_cast<RangeRequest::SortOrder>(in->sort_order()));
  out->set_sort_target(static_cast<RangeRequest::SortTarget>(in->sort_target()));
  out->set_min_mod_revision(in->min_mod_revision());
  out->set_max_mod_revision(in->max_mod_revision());
  out->set_min_create_revision(in->min_create_revision());
  out->set_max_create_revision(in->max_create_revision());
  return Status::OK();
}

Status ToV1(etcdserverpb::PutRequest* in, PutRequest* out) {
  out->set_key(std::move(*in->mutable_key()));
  out->set_value(std::move(*in->mutable_value()));
  out->set_lease(in->lease());
  out->set_prev_kv(in->prev_kv());
  out->set_ignore_value(in->ignore_value());
  out->set_ignore_lease(in->ignore_lease());
  return Status::OK();
}

Status ToV1(etcdserverpb::DeleteRangeRequest* in, DeleteRangeRequest* out) {
  out->set_key(std::move(*in->mutable_key()));
  out->set_range_end(std::move(*in->mutable_range_end()));
  out->set_prev_kv(in->prev_kv());
  return Status::OK();
}

namespace {

void CompareToV1(etcdserverpb::Compare* in, Compare* out) {
  // The enums have etcd's values on both sides.
  out->set_result(static_cast<Compare::CompareResult>(in->result()));
  out->set_target(static_cast<Compare::CompareTarget>(in->target()));
  out->set_key(std::move(*in->mutable_key()));
  out->set_range_end(std::move(*in->mutable_range_end()));
  switch (in->target_union_case()) {
    case etcdserverpb::Compare::kVersion:
      out->set_version(in->version());
      break;
    case etcdserverpb::Compare::kCreateRevision:
      out->set_create_revision(in->create_revision());
      break;
    case etcdserverpb::Compare::kModRevision:
      out->set_mod_revision(in->mod_revision());
      break;
    case etcdserverpb::Compare::kValue:
      out->set_value(std::move(*in->mutable_value()));
      break;
    case etcdserverpb::Compare::kLease:
      out->set_lease(in->lease());
      break;
    case etcdserverpb::Compare::TARGET_UNION_NOT_SET:
      break;
  }
}

Status OpsToV1(google::protobuf::RepeatedPtrField<etcdserverpb::RequestOp>* in,
               google::protobuf::RepeatedPtrField<RequestOp>* out) {
  out->Reserve(in->size());
  for (etcdserverpb::RequestOp& op : *in) {
    RequestOp* o = out->Add();
    Status s;
    switch (op.request_case()) {
      case etcdserverpb::RequestOp::kRequestRange:
        s = ToV1(op.mutable_request_range(), o->mutable_request_range());
        break;
      case etcdserverpb::RequestOp::kRequestPut:
        s = ToV1(op.mutable_request_put(), o->mutable_request_put());
        break;
      case etcdserverpb::RequestOp::kRequestDeleteRange:
        s = ToV1(op.mutable_request_delete_range(), o->mutable_request_delete_range());
        break;
      case etcdserverpb::RequestOp::kRequestTxn:
        // As deep as the request nests (protobuf's parsing bounds it); the
        // checks refuse what is deeper than kMaxTxnDepth.
        s = ToV1(op.mutable_request_txn(), o->mutable_request_txn());
        break;
      case etcdserverpb::RequestOp::REQUEST_NOT_SET:
        break;  // refused by the transaction's checks, as in raftkv.v1
    }
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace

Status ToV1(etcdserverpb::TxnRequest* in, TxnRequest* out) {
  out->mutable_compare()->Reserve(in->compare_size());
  for (etcdserverpb::Compare& c : *in->mutable_compare()) CompareToV1(&c, out->add_compare());
  if (Status s = OpsToV1(in->mutable_success(), out->mutable_success()); !s.ok()) return s;
  return OpsToV1(in->mutable_failure(), out->mutable_failure());
}

void FromV1(KeyValue* in, mvccpb::KeyValue* out) {
  out->set_key(std::move(*in->mutable_key()));
  out->set_create_revision(in->create_revision());
  out->set_mod_revision(in->mod_revision());
  out->set_version(in->version());
  out->set_value(std::move(*in->mutable_value()));
  out->set_lease(in->lease());
}

void FromV1(RangeResponse* in, etcdserverpb::RangeResponse* out) {
  out->mutable_kvs()->Reserve(in->kvs_size());
  for (KeyValue& kv : *in->mutable_kvs()) FromV1(&kv, out->add_kvs());
  out->set_more(in->more());
  out->set_count(in->count());
}

void FromV1(DeleteRangeResponse* in, etcdserverpb::DeleteRangeResponse* out) {
  out->set_deleted(in->deleted());
  out->mutable_prev_kvs()->Reserve(in->prev_kvs_size());
  for (KeyValue& kv : *in->mutable_prev_kvs()) FromV1(&kv, out->add_prev_kvs());
}

void FromV1(TxnResponse* in, const etcdserverpb::ResponseHeader& header,
            etcdserverpb::TxnResponse* out) {
  out->set_succeeded(in->succeeded());
  out->mutable_responses()->Reserve(in->responses_size());
  for (ResponseOp& op : *in->mutable_responses()) {
    etcdserverpb::ResponseOp* o = out->add_responses();
    switch (op.response_case()) {
      case ResponseOp::kResponseRange:
        FromV1(op.mutable_response_range(), o->mutable_response_range());
        *o->mutable_response_range()->mutable_header() = header;
        break;
      case ResponseOp::kResponsePut: {
        etcdserverpb::PutResponse* put = o->mutable_response_put();
        if (op.response_put().has_prev_kv()) {
          FromV1(op.mutable_response_put()->mutable_prev_kv(), put->mutable_prev_kv());
        }
        *put->mutable_header() = header;
        break;
      }
      case ResponseOp::kResponseDeleteRange:
        FromV1(op.mutable_response_delete_range(), o->mutable_response_delete_range());
        *o->mutable_response_delete_range()->mutable_header() = header;
        break;
      case ResponseOp::kResponseTxn:
        *o->mutable_response_txn()->mutable_header() = header;
        FromV1(op.mutable_response_txn(), header, o->mutable_response_txn());
        break;
      case ResponseOp::RESPONSE_NOT_SET:
        break;
    }
  }
}

}  // namespace etcd
}  // namespace raftkv
