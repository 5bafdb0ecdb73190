// etcd's Lease service (etcdserverpb.Lease) beside raftkv.v1's: every call
// is served by LeaseService's operations (the same log entries, the same
// lease clock on the leader, the same forwarding from a follower) and
// answered in etcd's messages with etcd's header. LeaseKeepAlive is a
// callback stream, as raftkv.v1's.
#pragma once

#include <grpcpp/grpcpp.h>

#include "proto/etcd.h"
#include "server/api/lease_service.h"
#include "server/rpc/async_call.h"

namespace raftkv {

namespace etcd_lease_detail {
namespace pb = etcdserverpb;
using Hybrid = pb::Lease::WithAsyncMethod_LeaseGrant<pb::Lease::WithAsyncMethod_LeaseRevoke<
    pb::Lease::WithAsyncMethod_LeaseTimeToLive<pb::Lease::WithAsyncMethod_LeaseLeases<
        pb::Lease::WithCallbackMethod_LeaseKeepAlive<pb::Lease::Service>>>>>;
}  // namespace etcd_lease_detail

class EtcdLease final : public etcd_lease_detail::Hybrid {
 public:
  // `forwarder` (may be null) sends the unary calls to the leader when this
  // member does not lead (keep-alives go through `core`).
  EtcdLease(const ServerOptions& options, LeaseService* core, RaftNode* node, Forwarder* forwarder);
  void Register(AsyncMethods* methods);

  grpc::ServerBidiReactor<etcdserverpb::LeaseKeepAliveRequest, etcdserverpb::LeaseKeepAliveResponse>*
  LeaseKeepAlive(grpc::CallbackServerContext* context) override;

 private:
  using GrantCall = UnaryCall<etcdserverpb::LeaseGrantRequest, etcdserverpb::LeaseGrantResponse>;
  using RevokeCall = UnaryCall<etcdserverpb::LeaseRevokeRequest, etcdserverpb::LeaseRevokeResponse>;
  using TtlCall = UnaryCall<etcdserverpb::LeaseTimeToLiveRequest, etcdserverpb::LeaseTimeToLiveResponse>;
  using LeasesCall = UnaryCall<etcdserverpb::LeaseLeasesRequest, etcdserverpb::LeaseLeasesResponse>;

  void HandleGrant(GrantCall* call);
  void HandleRevoke(RevokeCall* call);
  void HandleTimeToLive(TtlCall* call);
  void HandleLeases(LeasesCall* call);
  // This member, `revision` (0: the store's now), `term`.
  void FillHeader(int64_t revision, uint64_t term, etcdserverpb::ResponseHeader* header) const;

  LeaseService* const core_;
  RaftNode* const node_;
  Forwarder* const forwarder_;
  RpcMethodMetrics* const keep_alive_metrics_;
};

}  // namespace raftkv
