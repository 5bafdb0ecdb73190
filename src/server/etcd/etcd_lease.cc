#include "server/etcd/etcd_lease.h"

#include <string>
#include <utility>
#include <vector>

#include "server/api/client_handlers.h"
#include "server/api/keep_alive_reactor.h"
#include "server/etcd/etcd_errors.h"
#include "server/etcd/etcd_kv.h"

namespace raftkv {

namespace pb = etcdserverpb;

EtcdLease::EtcdLease(const ServerOptions& options, LeaseService* core, RaftNode* node, Forwarder* forwarder)
    : core_(core),
      node_(node),
      forwarder_(forwarder),
      keep_alive_metrics_(options.metrics->Method(RpcName::Of<pb::Lease>("LeaseKeepAlive"),
                                                  RpcMethodMetrics::Kind::kStream)) {}

void EtcdLease::Register(AsyncMethods* methods) {
  using S = etcd_lease_detail::Hybrid;
  const Caller c = Caller::kClient;
  const int n = 4;
  auto name = [](const char* method) { return RpcName::Of<pb::Lease>(method); };
  methods->Add<pb::LeaseGrantRequest, pb::LeaseGrantResponse>(
      this, &S::RequestLeaseGrant, name("LeaseGrant"), c, n, [this](GrantCall* call) { HandleGrant(call); });
  methods->Add<pb::LeaseRevokeRequest, pb::LeaseRevokeResponse>(
      this, &S::RequestLeaseRevoke, name("LeaseRevoke"), c, n,
      [this](RevokeCall* call) { HandleRevoke(call); });
  methods->Add<pb::LeaseTimeToLiveRequest, pb::LeaseTimeToLiveResponse>(
      this, &S::RequestLeaseTimeToLive, name("LeaseTimeToLive"), c, n,
      [this](TtlCall* call) { HandleTimeToLive(call); });
  methods->Add<pb::LeaseLeasesRequest, pb::LeaseLeasesResponse>(
      this, &S::RequestLeaseLeases, name("LeaseLeases"), c, n,
      [this](LeasesCall* call) { HandleLeases(call); });
}

void EtcdLease::FillHeader(int64_t revision, uint64_t term, pb::ResponseHeader* header) const {
  EtcdKv::FillHeader(*node_, revision != 0 ? revision : node_->state_machine().Revision(), term,
                     header);
}

void EtcdLease::HandleGrant(GrantCall* call) {
  if (Forwarder::MaybeForward<pb::Lease>(forwarder_, call, "LeaseGrant")) return;
  LeaseGrantRequest req;
  req.set_ttl(call->request().ttl());
  req.set_id(call->request().id());
  core_->Grant(req, core_->Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    pb::LeaseGrantResponse resp;
    FillHeader(0, out.term, resp.mutable_header());
    resp.set_id(out.apply.answer.lease_id());
    resp.set_ttl(out.apply.answer.lease_ttl());
    call->Finish(resp);
  });
}

void EtcdLease::HandleRevoke(RevokeCall* call) {
  if (Forwarder::MaybeForward<pb::Lease>(forwarder_, call, "LeaseRevoke")) return;
  core_->Revoke(call->request().id(), core_->Deadline(call->context()), [this, call](Outcome out) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    pb::LeaseRevokeResponse resp;
    FillHeader(out.apply.answer.revision(), out.term, resp.mutable_header());
    call->Finish(resp);
  });
}

void EtcdLease::HandleTimeToLive(TtlCall* call) {
  if (Forwarder::MaybeForward<pb::Lease>(forwarder_, call, "LeaseTimeToLive")) return;
  const pb::LeaseTimeToLiveRequest& req = call->request();
  core_->TimeToLive(req.id(), req.keys(), core_->Deadline(call->context()),
                    [this, call](Outcome out, LeaseService::LeaseTtl ttl) {
                      if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
                      pb::LeaseTimeToLiveResponse resp;
                      FillHeader(0, out.term, resp.mutable_header());
                      resp.set_id(call->request().id());
                      resp.set_ttl(ttl.remaining);  // -1: no such lease, as etcd
                      resp.set_grantedttl(ttl.granted);
                      for (std::string& k : ttl.keys) resp.add_keys(std::move(k));
                      call->Finish(resp);
                    });
}

void EtcdLease::HandleLeases(LeasesCall* call) {
  if (Forwarder::MaybeForward<pb::Lease>(forwarder_, call, "LeaseLeases")) return;
  core_->List(core_->Deadline(call->context()), [this, call](Outcome out, std::vector<int64_t> ids) {
    if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
    pb::LeaseLeasesResponse resp;
    FillHeader(0, out.term, resp.mutable_header());
    for (int64_t id : ids) resp.add_leases()->set_id(id);
    call->Finish(resp);
  });
}

grpc::ServerBidiReactor<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>* EtcdLease::LeaseKeepAlive(
    grpc::CallbackServerContext* context) {
  // A lease that does not exist (any more) gets TTL 0, as from etcd.
  return new KeepAliveReactor<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>(
      core_, context,
      [node = node_](LeaseKeepAliveResponse in, pb::LeaseKeepAliveResponse* out) {
        EtcdKv::FillHeader(*node, in.header().revision(), in.header().raft_term(), out->mutable_header());
        out->set_id(in.id());
        out->set_ttl(in.ttl());
      },
      keep_alive_metrics_);
}

}  // namespace raftkv
