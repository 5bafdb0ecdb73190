#include "server/rpc/grpc_status.h"
#include "server/api/lease_service.h"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "server/api/client_handlers.h"
#include "server/api/keep_alive_reactor.h"

namespace raftkv {

LeaseService::LeaseService(const ServerOptions& options, RaftNode* node, LeaseKeeper* keeper,
                           Forwarder* forwarder)
    : options_(options),
      node_(node),
      keeper_(keeper),
      forwarder_(forwarder),
      keep_alive_metrics_(options.metrics->Method(RpcName::Of<Lease>("LeaseKeepAlive"),
                                                        RpcMethodMetrics::Kind::kStream)) {}

void LeaseService::Register(AsyncMethods* methods) {
  using S = LeaseHybridService;
  const Caller c = Caller::kClient;
  const int n = 4;
  auto name = [](const char* method) { return RpcName::Of<Lease>(method); };
  methods->Add<LeaseGrantRequest, LeaseGrantResponse>(
      this, &S::RequestLeaseGrant, name("LeaseGrant"), c, n,
      [this](GrantCall* call) { HandleGrant(call); });
  methods->Add<LeaseRevokeRequest, LeaseRevokeResponse>(
      this, &S::RequestLeaseRevoke, name("LeaseRevoke"), c, n,
      [this](RevokeCall* call) { HandleRevoke(call); });
  methods->Add<LeaseTimeToLiveRequest, LeaseTimeToLiveResponse>(
      this, &S::RequestLeaseTimeToLive, name("LeaseTimeToLive"), c, n,
      [this](TtlCall* call) { HandleTimeToLive(call); });
  methods->Add<LeaseLeasesRequest, LeaseLeasesResponse>(
      this, &S::RequestLeaseLeases, name("LeaseLeases"), c, n,
      [this](LeasesCall* call) { HandleLeases(call); });
}

void LeaseService::FillHeader(uint64_t term, ResponseHeader* header) const {
  header->set_member_id(node_->id());
  header->set_revision(node_->state_machine().Revision());
  header->set_raft_term(term);
}

void LeaseService::Grant(const LeaseGrantRequest& req, Clock::time_point deadline, OutcomeCallback done) {
  int64_t ttl = 0;
  if (Status bad = keeper_->GrantTtl(req.ttl(), &ttl); !bad.ok()) return done(Failure(bad.code(), bad.message()));
  Command cmd;
  Status bad = LeaseGrantCommand(req, ttl, options_.Limits(), &cmd);
  if (bad.ok()) bad = node_->CheckQuota(cmd);
  if (!bad.ok()) return done(Failure(bad.code(), bad.message(), bad.reason()));
  node_->Propose(cmd.SerializeAsString(), deadline, std::move(done));
}

void LeaseService::Revoke(int64_t id, Clock::time_point deadline, OutcomeCallback done) {
  if (id <= 0) return done(Failure(Status::Code::kInvalidArgument, "lease ID must be > 0"));
  Command cmd;
  cmd.set_op(Command::LEASE_REVOKE);
  cmd.set_lease(id);
  // No renewal of the lease while its revoke is in flight.
  keeper_->BeginRevoke(id);
  node_->Propose(cmd.SerializeAsString(), deadline, [this, id, done = std::move(done)](Outcome out) {
    keeper_->EndRevoke(id);
    done(std::move(out));
  });
}

void LeaseService::TimeToLive(int64_t id, bool keys, Clock::time_point deadline,
                              std::function<void(Outcome, LeaseTtl)> done) {
  node_->ReadIndex(deadline, [this, id, keys, done = std::move(done)](Outcome out) {
    LeaseTtl ttl;
    if (out.status.ok()) keeper_->Remaining(id, &ttl.remaining, &ttl.granted, keys ? &ttl.keys : nullptr);
    done(std::move(out), std::move(ttl));
  });
}

void LeaseService::List(Clock::time_point deadline, std::function<void(Outcome, std::vector<int64_t>)> done) {
  node_->ReadIndex(deadline, [this, done = std::move(done)](Outcome out) {
    std::vector<int64_t> ids;
    if (out.status.ok()) {
      for (const auto& [id, ttl] : node_->state_machine().Leases()) ids.push_back(id);
    }
    done(std::move(out), std::move(ids));
  });
}

void LeaseService::HandleGrant(GrantCall* call) {
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseGrant")) return;
  Grant(call->request(), Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    LeaseGrantResponse resp;
    FillHeader(out.term, resp.mutable_header());
    resp.set_id(out.apply.answer.lease_id());
    resp.set_ttl(out.apply.answer.lease_ttl());
    call->Finish(resp);
  });
}

void LeaseService::HandleRevoke(RevokeCall* call) {
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseRevoke")) return;
  Revoke(call->request().id(), Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    LeaseRevokeResponse resp;
    FillHeader(out.term, resp.mutable_header());
    resp.mutable_header()->set_revision(out.apply.answer.revision());
    call->Finish(resp);
  });
}

void LeaseService::HandleTimeToLive(TtlCall* call) {
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseTimeToLive")) return;
  const LeaseTimeToLiveRequest& req = call->request();
  TimeToLive(req.id(), req.keys(), Deadline(call->context()), [this, call](Outcome out, LeaseTtl ttl) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    LeaseTimeToLiveResponse resp;
    FillHeader(out.term, resp.mutable_header());
    resp.set_id(call->request().id());
    resp.set_ttl(ttl.remaining);
    resp.set_granted_ttl(ttl.granted);
    for (std::string& k : ttl.keys) resp.add_keys(std::move(k));
    call->Finish(resp);
  });
}

void LeaseService::HandleLeases(LeasesCall* call) {
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseLeases")) return;
  List(Deadline(call->context()), [this, call](Outcome out, std::vector<int64_t> ids) {
    if (!out.status.ok()) return FinishWithOutcome(call, out);
    LeaseLeasesResponse resp;
    FillHeader(out.term, resp.mutable_header());
    for (int64_t id : ids) resp.add_leases()->set_id(id);
    call->Finish(resp);
  });
}

void LeaseService::RenewHere(Clock::time_point deadline, int64_t id, std::function<void(Renewal)> done) {
  // Renewed only once a quorum confirmed this member still leads.
  node_->ReadIndex(deadline, [this, id, done = std::move(done)](Outcome out) {
    Renewal r;
    if (!out.status.ok()) {
      r.status = ToGrpcStatus(out.status);
      if (out.status.code() == Status::Code::kFailedPrecondition && out.leader_id != 0) {
        r.trailers.emplace_back("raftkv-leader-id", std::to_string(out.leader_id));
        r.trailers.emplace_back("raftkv-leader-addr", out.leader_address);
      }
      return done(std::move(r));
    }
    int64_t ttl = 0;
    keeper_->Renew(id, &ttl);
    FillHeader(out.term, r.response.mutable_header());
    r.response.set_id(id);
    r.response.set_ttl(ttl);
    done(std::move(r));
  });
}

void LeaseService::Renew(const grpc::ServerContextBase& incoming, int64_t id,
                         std::function<void(Renewal)> done) {
  if (forwarder_ != nullptr && forwarder_->LeaderElsewhere()) {
    LeaseKeepAliveRequest req;
    req.set_id(id);
    // `done` is moved into the call only if it is forwarded.
    auto shared = std::make_shared<std::function<void(Renewal)>>(std::move(done));
    const bool sent = forwarder_->ForwardRequest<LeaseKeepAliveRequest, LeaseKeepAliveResponse>(
        incoming, Forwarder::MethodPath<Peer>("RenewLease"), req,
        [shared](Forwarder::Answer<LeaseKeepAliveResponse> answer) {
          Renewal r;
          r.trailers = std::move(answer.trailers);
          if (answer.status.ok()) {
            r.response = std::move(answer.response);
          } else if (answer.status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                     answer.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                     answer.status.error_code() == grpc::StatusCode::CANCELLED) {
            r.status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "keep-alive sent on to the leader (member " +
                                        std::to_string(answer.leader_id) + " at " +
                                        answer.leader_address + "): " + answer.status.error_message());
          } else {
            r.status = answer.status;
          }
          (*shared)(std::move(r));
        });
    if (sent) return;
    done = std::move(*shared);
  }
  RenewHere(Deadline(incoming), id, std::move(done));
}

void LeaseService::HandleRenew(RenewCall* call) {
  const int64_t id = call->request().id();
  if (id <= 0) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lease ID must be > 0"));
  }
  // Never sent on again: a member that does not lead answers with the hint.
  RenewHere(Deadline(call->context()), id, [call](Renewal r) {
    for (auto& [key, value] : r.trailers) call->context().AddTrailingMetadata(key, value);
    if (!r.status.ok()) return call->FinishWithError(r.status);
    call->Finish(r.response);
  });
}

grpc::ServerBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse>* LeaseService::LeaseKeepAlive(
    grpc::CallbackServerContext* context) {
  return new KeepAliveReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse>(
      this, context, [](LeaseKeepAliveResponse in, LeaseKeepAliveResponse* out) { *out = std::move(in); },
      keep_alive_metrics_);
}

}  // namespace raftkv
