#include "server/etcd/etcd_cluster.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include <glog/logging.h>

#include "common/endpoint.h"
#include "server/api/client_handlers.h"
#include "server/etcd/etcd_errors.h"
#include "server/etcd/etcd_kv.h"

namespace raftkv {

namespace pb = etcdserverpb;

void EtcdCluster::Register(EtcdClusterService* service, AsyncMethods* methods) {
  const int n = 2;
  using S = EtcdClusterService;
  auto name = [](const char* method) { return RpcName::Of<pb::Cluster>(method); };
  methods->Add<pb::MemberListRequest, pb::MemberListResponse>(service, &S::RequestMemberList, name("MemberList"),
                                                              Caller::kClient, n,
                                                              [this](ListCall* call) { HandleList(call); });
  methods->Add<pb::MemberAddRequest, pb::MemberAddResponse>(service, &S::RequestMemberAdd, name("MemberAdd"),
                                                            Caller::kAdmin, n,
                                                            [this](AddCall* call) { HandleAdd(call); });
  methods->Add<pb::MemberRemoveRequest, pb::MemberRemoveResponse>(
      service, &S::RequestMemberRemove, name("MemberRemove"), Caller::kAdmin, n,
      [this](RemoveCall* call) { HandleRemove(call); });
  methods->Add<pb::MemberUpdateRequest, pb::MemberUpdateResponse>(
      service, &S::RequestMemberUpdate, name("MemberUpdate"), Caller::kAdmin, n,
      [this](UpdateCall* call) { HandleUpdate(call); });
  methods->Add<pb::MemberPromoteRequest, pb::MemberPromoteResponse>(
      service, &S::RequestMemberPromote, name("MemberPromote"), Caller::kAdmin, n,
      [this](PromoteCall* call) { HandlePromote(call); });
}

void EtcdCluster::FillMember(const MemberInfo& m, pb::Member* out) const {
  const std::string scheme = options_.auth != nullptr && options_.auth->tls() ? "https://" : "http://";
  out->set_id(m.id);
  out->set_name("member-" + std::to_string(m.id));
  out->add_peerurls(scheme + m.address);
  out->add_clienturls(scheme + m.address);
  out->set_islearner(!m.voter);
}

template <class Resp>
void EtcdCluster::FillMembers(Resp* resp) const {
  EtcdKv::FillHeader(*node_, node_->state_machine().Revision(), node_->KnownTerm(), resp->mutable_header());
  for (const MemberInfo& m : node_->GetStatus().members) FillMember(m, resp->add_members());
}

void EtcdCluster::HandleList(ListCall* call) {
  // A linearizable list is the leader's configuration (the newest appended).
  if (call->request().linearizable() && Forwarder::MaybeForward<pb::Cluster>(forwarder_, call, "MemberList")) {
    return;
  }
  pb::MemberListResponse resp;
  FillMembers(&resp);
  call->Finish(resp);
}

grpc::Status EtcdCluster::PeerAddress(const google::protobuf::RepeatedPtrField<std::string>& urls,
                                      std::string* address) {
  if (urls.size() != 1) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "raftkv: a member has one address, its peer and client URL at once: give one peer URL, not " +
                            std::to_string(urls.size()));
  }
  const std::string& url = urls[0];
  const bool scheme_ok = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
  *address = StripEndpointScheme(url);
  if (!scheme_ok || !ParseEndpoint(*address).ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: given member URLs are invalid");
  }
  return grpc::Status::OK;
}

template <class Req, class Resp>
void EtcdCluster::Change(UnaryCall<Req, Resp>* call, const raft::MembershipChange& change) {
  node_->ChangeMembership(change, CallDeadline(call->context(), options_.max_request_timeout_ms),
                          [this, call, change](Outcome out) {
                            if (!out.status.ok()) return FinishWithOutcome(call, out, &etcd::ToEtcdStatus);
                            LOG(INFO) << "etcd Cluster: " << raft::ChangeTypeName(change.type) << " of member "
                                      << change.id << " committed at index " << out.index;
                            Resp resp;
                            FillMembers(&resp);
                            if constexpr (std::is_same_v<Resp, pb::MemberAddResponse>) {
                              for (const pb::Member& m : resp.members()) {
                                if (m.id() == change.id) *resp.mutable_member() = m;
                              }
                            }
                            call->Finish(resp);
                          });
}

void EtcdCluster::HandleAdd(AddCall* call) {
  if (Forwarder::MaybeForward<pb::Cluster>(forwarder_, call, "MemberAdd")) return;
  std::string address;
  if (grpc::Status bad = PeerAddress(call->request().peerurls(), &address); !bad.ok()) {
    return call->FinishWithError(bad);
  }
  uint64_t id = 1;
  for (const MemberInfo& m : node_->GetStatus().members) id = std::max(id, m.id + 1);
  const raft::ChangeType type = call->request().islearner() ? raft::ChangeType::kAddLearner
                                                             : raft::ChangeType::kAddVoter;
  Change(call, raft::MembershipChange{type, id, address});
}

void EtcdCluster::HandleRemove(RemoveCall* call) {
  if (Forwarder::MaybeForward<pb::Cluster>(forwarder_, call, "MemberRemove")) return;
  Change(call, raft::MembershipChange{raft::ChangeType::kRemove, call->request().id(), ""});
}

void EtcdCluster::HandleUpdate(UpdateCall* call) {
  if (Forwarder::MaybeForward<pb::Cluster>(forwarder_, call, "MemberUpdate")) return;
  std::string address;
  if (grpc::Status bad = PeerAddress(call->request().peerurls(), &address); !bad.ok()) {
    return call->FinishWithError(bad);
  }
  Change(call, raft::MembershipChange{raft::ChangeType::kUpdateAddress, call->request().id(), address});
}

void EtcdCluster::HandlePromote(PromoteCall* call) {
  if (Forwarder::MaybeForward<pb::Cluster>(forwarder_, call, "MemberPromote")) return;
  Change(call, raft::MembershipChange{raft::ChangeType::kPromote, call->request().id(), ""});
}

}  // namespace raftkv
