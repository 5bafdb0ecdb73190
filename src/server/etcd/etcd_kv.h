// etcd's KV service (etcdserverpb.KV: Range, Put, DeleteRange, Txn) on the
// completion queues, beside raftkv.v1's. Each call is translated to
// raftkv.v1's request (etcd_convert.h), checked by the same kv_requests
// functions, proposed as the same log entry or read from the same state
// machine, and answered in etcd's messages with etcd's header (member id,
// revision, raft term). A follower forwards what only the leader answers,
// as for raftkv.v1.
#pragma once

#include <memory>

#include "proto/etcd.h"
#include "server/api/key_value_handlers.h"
#include "server/rpc/async_call.h"

namespace raftkv {

// The methods served (Compact is not yet: gRPC's generated answer,
// UNIMPLEMENTED, instead of a call left waiting for a handler).
using EtcdKvService = etcdserverpb::KV::WithAsyncMethod_Range<etcdserverpb::KV::WithAsyncMethod_Put<
    etcdserverpb::KV::WithAsyncMethod_DeleteRange<etcdserverpb::KV::WithAsyncMethod_Txn<etcdserverpb::KV::Service>>>>;

class EtcdKv : public KeyValueHandlers {
 public:
  // `forwarder` may be null (no forwarding).
  EtcdKv(const ServerOptions& options, RaftNode* node, Forwarder* forwarder);
  // Registers the methods; `busy` calls wait per queue for Range and Put.
  void Register(EtcdKvService* service, int busy, AsyncMethods* methods);

  // etcd's header: this member, the revision the answer was served at, the
  // term. cluster_id stays 0 (raftkv has no cluster id yet).
  static void FillHeader(uint64_t member_id, int64_t revision, uint64_t term,
                         etcdserverpb::ResponseHeader* header);

 private:
  using RangeCall = UnaryCall<etcdserverpb::RangeRequest, etcdserverpb::RangeResponse>;
  using PutCall = UnaryCall<etcdserverpb::PutRequest, etcdserverpb::PutResponse>;
  using DeleteRangeCall = UnaryCall<etcdserverpb::DeleteRangeRequest, etcdserverpb::DeleteRangeResponse>;
  using TxnCall = UnaryCall<etcdserverpb::TxnRequest, etcdserverpb::TxnResponse>;

  void HandleRange(RangeCall* call);
  void HandlePut(PutCall* call);
  void HandleDeleteRange(DeleteRangeCall* call);
  void HandleTxn(TxnCall* call);
  // A transaction without writes: ReadIndex, then this member's state.
  void ReadTxn(TxnCall* call, std::shared_ptr<TxnRequest> txn);
};

}  // namespace raftkv
