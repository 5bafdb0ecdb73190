// etcd's v3 messages (protos/etcd) to and from raftkv.v1's, for the etcd
// services: a request is translated and then served by the same checks, the
// same state machine and the same log entries as raftkv.v1's, and the
// answer translated back. Moves keys and values rather than copying them.
//
// Every field of the KV service's requests has its raftkv.v1 counterpart
// with etcd's meaning (sorted ranges and the min/max revision filters,
// ignore_value and ignore_lease, compares over a key range, nested
// transactions): nothing is refused here, nothing silently ignored; the
// checks that follow refuse what etcd refuses (and transactions nested
// deeper than kv_requests.h's kMaxTxnDepth).
#pragma once

#include "common/status.h"
#include "proto/etcd.h"
#include "proto/internal.h"

namespace raftkv {
namespace etcd {

Status ToV1(etcdserverpb::RangeRequest* in, RangeRequest* out);
Status ToV1(etcdserverpb::PutRequest* in, PutRequest* out);
Status ToV1(etcdserverpb::DeleteRangeRequest* in, DeleteRangeRequest* out);
Status ToV1(etcdserverpb::TxnRequest* in, TxnRequest* out);

// The answers, header aside (the caller fills it: FillHeader).
void FromV1(KeyValue* in, mvccpb::KeyValue* out);
void FromV1(RangeResponse* in, etcdserverpb::RangeResponse* out);
void FromV1(DeleteRangeResponse* in, etcdserverpb::DeleteRangeResponse* out);
// Every op's answer, with each op's header copied from `header`.
void FromV1(TxnResponse* in, const etcdserverpb::ResponseHeader& header,
            etcdserverpb::TxnResponse* out);

}  // namespace etcd
}  // namespace raftkv
