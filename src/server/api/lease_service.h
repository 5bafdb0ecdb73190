// The Lease service of a member: grant and revoke go through the log,
// keep-alive and time-to-live are answered by the leader's LeaseKeeper after
// a ReadIndex barrier. Grant, revoke, time-to-live and list are served on
// the completion queues; LeaseKeepAlive (a long bidirectional stream, one
// request every TTL/3 per holder) uses gRPC's callback API: an open stream
// holds no thread, only its reactor, and answers one request at a time. A
// follower sends each keep-alive request on to the leader
// (Peer.RenewLease, a peer method with the forwarded calls' deadline), so
// a stream may be opened on any member.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "proto/internal.h"
#include "server/rpc/async_call.h"
#include "server/api/forwarder.h"
#include "node/lease_keeper.h"
#include "node/node.h"
#include "server/rpc/server_options.h"

namespace raftkv {

using LeaseHybridService = Lease::WithAsyncMethod_LeaseGrant<Lease::WithAsyncMethod_LeaseRevoke<
    Lease::WithAsyncMethod_LeaseTimeToLive<Lease::WithAsyncMethod_LeaseLeases<
        Lease::WithCallbackMethod_LeaseKeepAlive<Lease::Service>>>>>;

class LeaseService final : public LeaseHybridService {
 public:
  // `forwarder` (may be null) sends every lease call to the leader when
  // this member does not lead; keep-alive requests are sent on one by one.
  LeaseService(const ServerOptions& options, RaftNode* node, LeaseKeeper* keeper, Forwarder* forwarder);
  void Register(AsyncMethods* methods);

  grpc::ServerBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse>* LeaseKeepAlive(
      grpc::CallbackServerContext* context) override;

  using RenewCall = UnaryCall<LeaseKeepAliveRequest, LeaseKeepAliveResponse>;
  // Peer.RenewLease on the leader: one keep-alive a follower sent on.
  void HandleRenew(RenewCall* call);

  // Renews lease `id` (leader: after a read barrier; follower: through the
  // leader) and runs `done` once with the answer, or with the error and the
  // trailers to end the stream with. `incoming` must outlive `done`.
  struct Renewal {
    grpc::Status status;
    LeaseKeepAliveResponse response;
    std::vector<std::pair<std::string, std::string>> trailers;
  };
  void Renew(const grpc::ServerContextBase& incoming, int64_t id, std::function<void(Renewal)> done);

  const CallAuthorizer* auth() const { return options_.auth; }

  // The lease operations below either service's wire format (raftkv.v1's
  // Lease here, etcd's in server/etcd): each runs `done` once, with the
  // node's outcome (an error, or OK and the answer). A grant's id and TTL
  // and a revoke's revision are in the outcome's apply answer.
  void Grant(const LeaseGrantRequest& req, Clock::time_point deadline, OutcomeCallback done);
  void Revoke(int64_t id, Clock::time_point deadline, OutcomeCallback done);
  struct LeaseTtl {
    int64_t remaining = 0;  // seconds left (-1: no such lease)
    int64_t granted = 0;
    std::vector<std::string> keys;
  };
  void TimeToLive(int64_t id, bool keys, Clock::time_point deadline,
                  std::function<void(Outcome, LeaseTtl)> done);
  void List(Clock::time_point deadline, std::function<void(Outcome, std::vector<int64_t>)> done);

  // The client's deadline, capped at --max_request_timeout_ms.
  Clock::time_point Deadline(const grpc::ServerContextBase& context) const {
    return CallDeadline(context, options_.max_request_timeout_ms);
  }
  // The member's header fields: id, revision now, `term`.
  void FillHeader(uint64_t term, ResponseHeader* header) const;

 private:
  using GrantCall = UnaryCall<LeaseGrantRequest, LeaseGrantResponse>;
  using RevokeCall = UnaryCall<LeaseRevokeRequest, LeaseRevokeResponse>;
  using TtlCall = UnaryCall<LeaseTimeToLiveRequest, LeaseTimeToLiveResponse>;
  using LeasesCall = UnaryCall<LeaseLeasesRequest, LeaseLeasesResponse>;

  void HandleGrant(GrantCall* call);
  void HandleRevoke(RevokeCall* call);
  void HandleTimeToLive(TtlCall* call);
  void HandleLeases(LeasesCall* call);
  // The leader's renewal after its read barrier.
  void RenewHere(Clock::time_point deadline, int64_t id, std::function<void(Renewal)> done);

  const ServerOptions options_;
  RaftNode* const node_;
  LeaseKeeper* const keeper_;
  Forwarder* const forwarder_;
  RpcMethodMetrics* const keep_alive_metrics_;
};

}  // namespace raftkv
