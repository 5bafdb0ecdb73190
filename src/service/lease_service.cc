#include "service/lease_service.h"

#include <future>
#include <string>

#include "service/client_handlers.h"

namespace raftkv {

LeaseService::LeaseService(const ServerOptions& options, RaftNode* node, LeaseKeeper* keeper)
    : options_(options), node_(node), keeper_(keeper) {}

void LeaseService::Register(AsyncMethods* methods) {
  const Caller c = Caller::kClient;
  const int n = 4;
  methods->Add<LeaseGrantRequest, LeaseGrantResponse>(this, &LeaseHybridService::RequestLeaseGrant, c, n,
                                                      [this](GrantCall* call) { HandleGrant(call); });
  methods->Add<LeaseRevokeRequest, LeaseRevokeResponse>(
      this, &LeaseHybridService::RequestLeaseRevoke, c, n, [this](RevokeCall* call) { HandleRevoke(call); });
  methods->Add<LeaseTimeToLiveRequest, LeaseTimeToLiveResponse>(
      this, &LeaseHybridService::RequestLeaseTimeToLive, c, n,
      [this](TtlCall* call) { HandleTimeToLive(call); });
  methods->Add<LeaseLeasesRequest, LeaseLeasesResponse>(
      this, &LeaseHybridService::RequestLeaseLeases, c, n, [this](LeasesCall* call) { HandleLeases(call); });
}

void LeaseService::FillHeader(uint64_t term, ResponseHeader* header) const {
  header->set_member_id(node_->id());
  header->set_revision(node_->state_machine().Revision());
  header->set_raft_term(term);
}

void LeaseService::HandleGrant(GrantCall* call) {
  const LeaseGrantRequest& req = call->request();
  int64_t ttl = 0;
  if (grpc::Status bad = keeper_->GrantTtl(req.ttl(), &ttl); !bad.ok()) return call->FinishWithError(bad);
  if (req.id() < 0) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                              "lease ID must be >= 0 (0: the server picks one)"));
  }
  Command cmd;
  cmd.set_op(Command::LEASE_GRANT);
  cmd.set_lease(req.id());
  cmd.set_lease_ttl(ttl);
  node_->Propose(cmd.SerializeAsString(), CallDeadline(call->context(), options_.max_request_timeout_ms),
                 [this, call](Outcome out) {
                   if (!out.status.ok()) return FinishWithOutcome(call, out);
                   LeaseGrantResponse resp;
                   FillHeader(out.term, resp.mutable_header());
                   resp.set_id(out.apply.answer.lease_id());
                   resp.set_ttl(out.apply.answer.lease_ttl());
                   call->Finish(resp);
                 });
}

void LeaseService::HandleRevoke(RevokeCall* call) {
  if (call->request().id() <= 0) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lease ID must be > 0"));
  }
  Command cmd;
  cmd.set_op(Command::LEASE_REVOKE);
  cmd.set_lease(call->request().id());
  node_->Propose(cmd.SerializeAsString(), CallDeadline(call->context(), options_.max_request_timeout_ms),
                 [this, call](Outcome out) {
                   if (!out.status.ok()) return FinishWithOutcome(call, out);
                   LeaseRevokeResponse resp;
                   FillHeader(out.term, resp.mutable_header());
                   resp.mutable_header()->set_revision(out.apply.answer.revision());
                   call->Finish(resp);
                 });
}

void LeaseService::HandleTimeToLive(TtlCall* call) {
  node_->ReadBarrier(CallDeadline(call->context(), options_.max_request_timeout_ms),
                     [this, call](Outcome out) {
                       if (!out.status.ok()) return FinishWithOutcome(call, out);
                       const LeaseTimeToLiveRequest& req = call->request();
                       LeaseTimeToLiveResponse resp;
                       FillHeader(out.term, resp.mutable_header());
                       int64_t remaining = 0;
                       int64_t granted = 0;
                       std::vector<std::string> keys;
                       keeper_->Remaining(req.id(), &remaining, &granted, req.keys() ? &keys : nullptr);
                       resp.set_id(req.id());
                       resp.set_ttl(remaining);
                       resp.set_granted_ttl(granted);
                       for (std::string& k : keys) resp.add_keys(std::move(k));
                       call->Finish(resp);
                     });
}

void LeaseService::HandleLeases(LeasesCall* call) {
  node_->ReadBarrier(CallDeadline(call->context(), options_.max_request_timeout_ms),
                     [this, call](Outcome out) {
                       if (!out.status.ok()) return FinishWithOutcome(call, out);
                       LeaseLeasesResponse resp;
                       FillHeader(out.term, resp.mutable_header());
                       for (const auto& [id, ttl] : node_->state_machine().Leases()) {
                         resp.add_leases()->set_id(id);
                       }
                       call->Finish(resp);
                     });
}

grpc::Status LeaseService::LeaseKeepAlive(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<LeaseKeepAliveResponse, LeaseKeepAliveRequest>* stream) {
  if (grpc::Status refused = AuthorizeCall(options_.auth, *context, Caller::kClient); !refused.ok()) {
    return refused;
  }
  LeaseKeepAliveRequest req;
  while (stream->Read(&req)) {
    if (req.id() <= 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lease ID must be > 0");
    }
    // Renewed only once a quorum confirmed this member still leads.
    std::promise<Outcome> barrier;
    node_->ReadBarrier(CallDeadline(*context, options_.max_request_timeout_ms),
                       [&barrier](Outcome out) { barrier.set_value(std::move(out)); });
    Outcome out = barrier.get_future().get();
    if (!out.status.ok()) {
      if (out.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION && out.leader_id != 0) {
        context->AddTrailingMetadata("raftkv-leader-id", std::to_string(out.leader_id));
        context->AddTrailingMetadata("raftkv-leader-addr", out.leader_address);
      }
      return out.status;
    }
    LeaseKeepAliveResponse resp;
    int64_t ttl = 0;
    keeper_->Renew(req.id(), &ttl);
    FillHeader(out.term, resp.mutable_header());
    resp.set_id(req.id());
    resp.set_ttl(ttl);
    if (!stream->Write(resp)) break;
  }
  return grpc::Status::OK;
}

}  // namespace raftkv
