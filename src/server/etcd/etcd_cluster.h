// etcd's Cluster service (etcdserverpb.Cluster): the members of the
// configuration in effect, and single-server changes of it through the log.
//  - MemberList: a member's peer and client URL are its one address (raftkv
//    serves both on one port); `linearizable` asks the leader.
//  - MemberAdd: the next id above the highest in the configuration (ids are
//    never chosen by the caller in etcd's API); as a learner, or directly as
//    a voter when the voters answering the leader stay a majority of the
//    larger set (etcd's "not enough started members" otherwise). The new
//    member then runs `raftkv-server --id=<id> --join`.
//  - MemberPromote, MemberRemove, MemberUpdate (the member's one address:
//    peers dial the new one from the entry on).
// Changes are for administrators, go to the leader (a follower forwards
// them) and are answered once their configuration entry is committed.
#pragma once

#include "node/node.h"
#include "proto/etcd.h"
#include "raft/core/membership.h"
#include "server/api/forwarder.h"
#include "server/rpc/async_call.h"
#include "server/rpc/server_options.h"

namespace raftkv {

namespace etcd_cluster_detail {
namespace pb = etcdserverpb;
using Async = pb::Cluster::WithAsyncMethod_MemberList<pb::Cluster::WithAsyncMethod_MemberAdd<
    pb::Cluster::WithAsyncMethod_MemberRemove<pb::Cluster::WithAsyncMethod_MemberUpdate<
        pb::Cluster::WithAsyncMethod_MemberPromote<pb::Cluster::Service>>>>>;
}  // namespace etcd_cluster_detail
using EtcdClusterService = etcd_cluster_detail::Async;

class EtcdCluster {
 public:
  // `forwarder` (may be null) sends changes to the leader from a follower.
  EtcdCluster(const ServerOptions& options, RaftNode* node, Forwarder* forwarder)
      : options_(options), node_(node), forwarder_(forwarder) {}
  void Register(EtcdClusterService* service, AsyncMethods* methods);

 private:
  using ListCall = UnaryCall<etcdserverpb::MemberListRequest, etcdserverpb::MemberListResponse>;
  using AddCall = UnaryCall<etcdserverpb::MemberAddRequest, etcdserverpb::MemberAddResponse>;
  using RemoveCall = UnaryCall<etcdserverpb::MemberRemoveRequest, etcdserverpb::MemberRemoveResponse>;
  using UpdateCall = UnaryCall<etcdserverpb::MemberUpdateRequest, etcdserverpb::MemberUpdateResponse>;
  using PromoteCall = UnaryCall<etcdserverpb::MemberPromoteRequest, etcdserverpb::MemberPromoteResponse>;

  void HandleList(ListCall* call);
  void HandleAdd(AddCall* call);
  void HandleRemove(RemoveCall* call);
  void HandleUpdate(UpdateCall* call);
  void HandlePromote(PromoteCall* call);
  // Proposes `change` for `call` and answers it, once committed, with the
  // header and the members (MemberAdd's also with the new member).
  template <class Req, class Resp>
  void Change(UnaryCall<Req, Resp>* call, const raft::MembershipChange& change);
  // The one address in etcd's `urls` (OK), or why they are refused.
  static grpc::Status PeerAddress(const google::protobuf::RepeatedPtrField<std::string>& urls,
                                  std::string* address);
  void FillMember(const MemberInfo& m, etcdserverpb::Member* out) const;
  // The header and the members of the configuration in effect.
  template <class Resp>
  void FillMembers(Resp* resp) const;

  const ServerOptions options_;
  RaftNode* const node_;
  Forwarder* const forwarder_;
};

}  // namespace raftkv
