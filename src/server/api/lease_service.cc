#include "server/rpc/grpc_status.h"
#include "server/api/lease_service.h"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "server/api/client_handlers.h"

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

void LeaseService::HandleGrant(GrantCall* call) {
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseGrant")) return;
  const LeaseGrantRequest& req = call->request();
  int64_t ttl = 0;
  if (Status bad = keeper_->GrantTtl(req.ttl(), &ttl); !bad.ok()) return call->FinishWithError(ToGrpcStatus(bad));
  Command cmd;
  if (grpc::Status bad = ToGrpcStatus(LeaseGrantCommand(req, ttl, options_.Limits(), &cmd)); !bad.ok()) {
    return call->FinishWithError(bad);
  }
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
  const int64_t id = call->request().id();
  cmd.set_lease(id);
  // No renewal of the lease while its revoke is in flight.
  keeper_->BeginRevoke(id);
  node_->Propose(cmd.SerializeAsString(), CallDeadline(call->context(), options_.max_request_timeout_ms),
                 [this, call, id](Outcome out) {
                   keeper_->EndRevoke(id);
                   if (!out.status.ok()) return FinishWithOutcome(call, out);
                   LeaseRevokeResponse resp;
                   FillHeader(out.term, resp.mutable_header());
                   resp.mutable_header()->set_revision(out.apply.answer.revision());
                   call->Finish(resp);
                 });
}

void LeaseService::HandleTimeToLive(TtlCall* call) {
  if (Forwarder::MaybeForward<Lease>(forwarder_, call, "LeaseTimeToLive")) return;
  node_->ReadIndex(CallDeadline(call->context(), options_.max_request_timeout_ms),
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
  node_->ReadIndex(CallDeadline(call->context(), options_.max_request_timeout_ms),
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
  RenewHere(CallDeadline(incoming, options_.max_request_timeout_ms), id, std::move(done));
}

void LeaseService::HandleRenew(RenewCall* call) {
  const int64_t id = call->request().id();
  if (id <= 0) {
    return call->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lease ID must be > 0"));
  }
  // Never sent on again: a member that does not lead answers with the hint.
  RenewHere(CallDeadline(call->context(), options_.max_request_timeout_ms), id, [call](Renewal r) {
    for (auto& [key, value] : r.trailers) call->context().AddTrailingMetadata(key, value);
    if (!r.status.ok()) return call->FinishWithError(r.status);
    call->Finish(r.response);
  });
}

namespace {

// One LeaseKeepAlive stream: read a request, renew, write the answer, read
// the next. Deletes itself once gRPC is done with the stream and no renewal
// it started is still to answer.
class KeepAliveReactor final
    : public grpc::ServerBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse> {
 public:
  KeepAliveReactor(LeaseService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context), start_(std::chrono::steady_clock::now()) {
    if (RpcMethodMetrics* m = service_->keep_alive_metrics()) m->StreamStarted();
    grpc::Status refused = AuthorizeCall(service_->auth(), *context_, Caller::kClient);
    std::lock_guard<std::mutex> lock(mu_);
    if (!refused.ok()) {
      FinishLocked(refused);
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (finished_) return;  // cancelled meanwhile
    if (!ok) return FinishLocked(grpc::Status::OK);  // the client ended its side (or left)
    if (request_.id() <= 0) {
      return FinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lease ID must be > 0"));
    }
    ++holds_;
    const int64_t id = request_.id();
    lock.unlock();
    service_->Renew(*context_, id, [this](LeaseService::Renewal r) { OnRenewed(std::move(r)); });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!ok) return FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the keep-alive stream broke"));
    StartRead(&request_);
  }

  // The client cancelled, or the server is shutting down: finish now, not
  // when a renewal in flight returns (it may wait for its deadline).
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the keep-alive stream was cancelled"));
  }

  void OnDone() override {
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      last = holds_ == 0;
    }
    if (last) delete this;
  }

 private:
  void OnRenewed(LeaseService::Renewal r) {
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --holds_;
      if (!finished_) {
        if (!r.status.ok()) {
          for (auto& [key, value] : r.trailers) context_->AddTrailingMetadata(key, value);
          FinishLocked(r.status);
        } else {
          response_ = std::move(r.response);
          StartWrite(&response_);
        }
      }
      last = done_ && holds_ == 0;
    }
    if (last) delete this;
  }

  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    if (RpcMethodMetrics* m = service_->keep_alive_metrics()) {
      m->Finished(status.error_code(), std::chrono::steady_clock::now() - start_);
    }
    Finish(status);
  }

  LeaseService* const service_;
  grpc::CallbackServerContext* const context_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  LeaseKeepAliveRequest request_;    // written by gRPC between StartRead and OnReadDone
  LeaseKeepAliveResponse response_;  // read by gRPC between StartWrite and OnWriteDone
  bool finished_ = false;  // guarded by mu_: Finish was called
  bool done_ = false;      // guarded by mu_: OnDone came
  int holds_ = 0;          // guarded by mu_: renewals not yet answered
};

}  // namespace

grpc::ServerBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse>* LeaseService::LeaseKeepAlive(
    grpc::CallbackServerContext* context) {
  return new KeepAliveReactor(this, context);
}

}  // namespace raftkv
