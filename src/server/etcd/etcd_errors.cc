#include "server/etcd/etcd_errors.h"

#include "server/rpc/grpc_status.h"

namespace raftkv {
namespace etcd {

grpc::Status ToEtcdStatus(const Status& status) {
  using C = grpc::StatusCode;
  using R = Status::Reason;
  switch (status.reason()) {
    case R::kNone: break;
    case R::kEmptyKey: return grpc::Status(C::INVALID_ARGUMENT, "etcdserver: key is not provided");
    case R::kKeyNotFound: return grpc::Status(C::INVALID_ARGUMENT, "etcdserver: key not found");
    case R::kValueProvided: return grpc::Status(C::INVALID_ARGUMENT, "etcdserver: value is provided");
    case R::kLeaseProvided: return grpc::Status(C::INVALID_ARGUMENT, "etcdserver: lease is provided");
    case R::kTooManyOps:
      return grpc::Status(C::INVALID_ARGUMENT, "etcdserver: too many operations in txn request");
    case R::kDuplicateKey:
      return grpc::Status(C::INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request");
    case R::kCompacted:
      return grpc::Status(C::OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted");
    case R::kFutureRevision:
      return grpc::Status(C::OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision");
    case R::kRequestTooLarge: return grpc::Status(C::INVALID_ARGUMENT, "etcdserver: request is too large");
    case R::kLeaseNotFound: return grpc::Status(C::NOT_FOUND, "etcdserver: requested lease not found");
    case R::kNotLeader: return grpc::Status(C::FAILED_PRECONDITION, "etcdserver: not leader");
    case R::kNoLeader: return grpc::Status(C::UNAVAILABLE, "etcdserver: no leader");
    case R::kLeaderChanged: return grpc::Status(C::UNAVAILABLE, "etcdserver: leader changed");
    case R::kTimeout: return grpc::Status(C::UNAVAILABLE, "etcdserver: request timed out");
    case R::kStopped: return grpc::Status(C::UNAVAILABLE, "etcdserver: server stopped");
    case R::kMemberExists: return grpc::Status(C::FAILED_PRECONDITION, "etcdserver: member ID already exist");
    case R::kAddressInUse: return grpc::Status(C::FAILED_PRECONDITION, "etcdserver: Peer URLs already exists");
    case R::kMemberNotFound: return grpc::Status(C::NOT_FOUND, "etcdserver: member not found");
    case R::kNotLearner:
      return grpc::Status(C::FAILED_PRECONDITION, "etcdserver: can only promote a learner member");
    case R::kLearnerNotReady:
      return grpc::Status(C::FAILED_PRECONDITION,
                          "etcdserver: can only promote a learner member which is in sync with leader");
    case R::kNotEnoughStarted:
      return grpc::Status(C::FAILED_PRECONDITION,
                          "etcdserver: re-configuration failed due to not enough started members");
    case R::kNoSpace: return grpc::Status(C::RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded");
  }
  return ToGrpcStatus(status);
}

}  // namespace etcd
}  // namespace raftkv
