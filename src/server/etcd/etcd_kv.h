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

using EtcdKvService = etcdserverpb::KV::AsyncService;

class EtcdKv : public KeyValueHandlers {
 public:
  // `forwarder` may be null (no forwarding).
  EtcdKv(const ServerOptions& options, RaftNode* node, Forwarder* forwarder);
  // Registers the methods; `busy` calls wait per queue for Range and Put.
  void Register(EtcdKvService* service, int busy, AsyncMethods* methods);

  // etcd's header: the cluster, this member, the revision the answer was
  // served at, the term.
  static void FillHeader(const RaftNode& node, int64_t revision, uint64_t term,
                         etcdserverpb::ResponseHeader* header);

 private:
  using RangeCall = UnaryCall<etcdserverpb::RangeRequest, etcdserverpb::RangeResponse>;
  using PutCall = UnaryCall<etcdserverpb::PutRequest, etcdserverpb::PutResponse>;
  using DeleteRangeCall = UnaryCall<etcdserverpb::DeleteRangeRequest, etcdserverpb::DeleteRangeResponse>;
  using TxnCall = UnaryCall<etcdserverpb::TxnRequest, etcdserverpb::TxnResponse>;
  using CompactCall = UnaryCall<etcdserverpb::CompactionRequest, etcdserverpb::CompactionResponse>;

  void HandleRange(RangeCall* call);
  void HandlePut(PutCall* call);
  void HandleDeleteRange(DeleteRangeCall* call);
  void HandleTxn(TxnCall* call);
  // Through the log: every member drops the same history.
  void HandleCompact(CompactCall* call);
  // A transaction without writes: ReadIndex, then this member's state.
  void ReadTxn(TxnCall* call, std::shared_ptr<TxnRequest> txn);
};

}  // namespace raftkv
