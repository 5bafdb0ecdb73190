// Status (common/status.h) to gRPC status at the edge of the server.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace raftkv {

inline grpc::StatusCode ToGrpcCode(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return grpc::StatusCode::OK;
    case Status::Code::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case Status::Code::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case Status::Code::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case Status::Code::kIOError: return grpc::StatusCode::INTERNAL;
    case Status::Code::kCorruption: return grpc::StatusCode::DATA_LOSS;
    case Status::Code::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case Status::Code::kOutOfRange: return grpc::StatusCode::OUT_OF_RANGE;
    case Status::Code::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case Status::Code::kAborted: return grpc::StatusCode::ABORTED;
    case Status::Code::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case Status::Code::kInternal: return grpc::StatusCode::INTERNAL;
    case Status::Code::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
  }
  return grpc::StatusCode::UNKNOWN;
}

// The same code's gRPC counterpart and the message alone (the code is in the
// status): what a client sees.
inline grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(status.code()), status.message());
}

}  // namespace raftkv
