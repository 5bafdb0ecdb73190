// The Lease service of a member: grant and revoke go through the log,
// keep-alive and time-to-live are answered by the leader's LeaseKeeper after
// a ReadIndex barrier. Grant, revoke, time-to-live and list are served on
// the completion queues; LeaseKeepAlive (a long bidirectional stream, one
// request every TTL/3 per holder) is a synchronous method on gRPC's thread
// pool.
#pragma once

#include "proto/internal.h"
#include "service/async_call.h"
#include "service/forwarder.h"
#include "service/lease_keeper.h"
#include "service/node.h"
#include "service/server_options.h"

namespace raftkv {

using LeaseHybridService = Lease::WithAsyncMethod_LeaseGrant<Lease::WithAsyncMethod_LeaseRevoke<
    Lease::WithAsyncMethod_LeaseTimeToLive<Lease::WithAsyncMethod_LeaseLeases<Lease::Service>>>>;

class LeaseService final : public LeaseHybridService {
 public:
  // `forwarder` (may be null) sends every lease call to the leader when
  // this member does not lead; keep-alive streams are relayed.
  LeaseService(const ServerOptions& options, RaftNode* node, LeaseKeeper* keeper, Forwarder* forwarder);
  void Register(AsyncMethods* methods);

  grpc::Status LeaseKeepAlive(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<LeaseKeepAliveResponse, LeaseKeepAliveRequest>* stream) override;

 private:
  using GrantCall = UnaryCall<LeaseGrantRequest, LeaseGrantResponse>;
  using RevokeCall = UnaryCall<LeaseRevokeRequest, LeaseRevokeResponse>;
  using TtlCall = UnaryCall<LeaseTimeToLiveRequest, LeaseTimeToLiveResponse>;
  using LeasesCall = UnaryCall<LeaseLeasesRequest, LeaseLeasesResponse>;

  void HandleGrant(GrantCall* call);
  void HandleRevoke(RevokeCall* call);
  void HandleTimeToLive(TtlCall* call);
  void HandleLeases(LeasesCall* call);
  void FillHeader(uint64_t term, ResponseHeader* header) const;
  // LeaseKeepAlive, counted by LeaseKeepAlive().
  grpc::Status ServeKeepAlive(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<LeaseKeepAliveResponse, LeaseKeepAliveRequest>* stream);
  // Relays a keep-alive stream to the leader: true with *status when it
  // did; false when this member answers it.
  bool RelayKeepAlive(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<LeaseKeepAliveResponse, LeaseKeepAliveRequest>* stream,
                      grpc::Status* status);

  const ServerOptions options_;
  RaftNode* const node_;
  LeaseKeeper* const keeper_;
  Forwarder* const forwarder_;
  RpcMethodMetrics* const keep_alive_metrics_;
};

}  // namespace raftkv
