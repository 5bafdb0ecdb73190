#include "service/lease_service.h"

#include <future>
#include <string>

#include "service/client_handlers.h"

namespace raftkv {

LeaseService::LeaseService(const ServerOptions& options, RaftNode* node, LeaseKeeper* keeper,
                           Forwarder* forwarder)
    : options_(options),
      node_(node),
      keeper_(keeper),
      forwarder_(forwarder),
      keep_alive_metrics_(node->server_metrics().Method(RpcName::Of<Lease>("LeaseKeepAlive"),
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

void LeaseService::HandleGrant(GrantCall* call) {
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseGrant")) return;
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
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseRevoke")) return;
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
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseTimeToLive")) return;
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
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseLeases")) return;
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
  SyncCallRecorder call(keep_alive_metrics_);
  return call.Done(ServeKeepAlive(context, stream));
}

grpc::Status LeaseService::ServeKeepAlive(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<LeaseKeepAliveResponse, LeaseKeepAliveRequest>* stream) {
  if (grpc::Status refused = AuthorizeCall(options_.auth, *context, Caller::kClient); !refused.ok()) {
    return refused;
  }
  grpc::Status relayed;
  if (RelayKeepAlive(context, stream, &relayed)) return relayed;
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

bool LeaseService::RelayKeepAlive(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<LeaseKeepAliveResponse, LeaseKeepAliveRequest>* stream, grpc::Status* status) {
  if (forwarder_ == nullptr) return false;
  std::shared_ptr<grpc::Channel> channel;
  grpc::ClientContext upstream_context;
  uint64_t leader_id = 0;
  std::string leader_address;
  if (!forwarder_->StartStream(*context, &channel, &upstream_context, &leader_id, &leader_address)) {
    return false;
  }
  // One request, one answer: relayed in lock step until either side ends.
  Lease::Stub stub(channel);
  auto upstream = stub.LeaseKeepAlive(&upstream_context);
  LeaseKeepAliveRequest req;
  LeaseKeepAliveResponse resp;
  bool upstream_ok = true;
  while (stream->Read(&req)) {
    if (!upstream->Write(req) || !upstream->Read(&resp)) {
      upstream_ok = false;
      break;
    }
    if (!stream->Write(resp)) break;
  }
  if (upstream_ok) upstream->WritesDone();  // the client ended or left: so does the leader's side
  grpc::Status leader_status = upstream->Finish();
  if (!upstream_ok) {
    for (const auto& [key, value] : upstream_context.GetServerTrailingMetadata()) {
      const std::string k(key.data(), key.size());
      if (k.compare(0, 7, "raftkv-") == 0) context->AddTrailingMetadata(k, std::string(value.data(), value.size()));
    }
    *status = leader_status.ok() ? leader_status
              : leader_status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                      leader_status.error_code() == grpc::StatusCode::CANCELLED
                  ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "keep-alive relayed to the leader (member " + std::to_string(leader_id) +
                                     " at " + leader_address + "): " + leader_status.error_message())
                  : leader_status;
  } else {
    *status = grpc::Status::OK;
  }
  forwarder_->EndStream(&upstream_context);
  return true;
}

}  // namespace raftkv
