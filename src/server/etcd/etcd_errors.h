// raftkv's errors as etcd's services answer them: etcd's gRPC code and its
// exact message (clientv3's rpctypes, api/v3rpc/rpctypes/error.go), which
// etcd's clients match whole to tell the errors apart (ErrCompacted,
// ErrLeaderChanged, ...). Mapped by the reason the error was made with
// (Status::Reason), never by its text. An error etcd has no counterpart for
// keeps raftkv's code and message (which names the field, bound or flag).
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace raftkv {
namespace etcd {

// etcd's status for `status` (OK for OK).
grpc::Status ToEtcdStatus(const Status& status);

}  // namespace etcd
}  // namespace raftkv
