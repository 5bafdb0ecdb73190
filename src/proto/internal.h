// The server's own generated messages and services: the peer protocol and
// the replicated log (protos/raftkv/internal/raft.proto), the snapshot file
// records (storage.proto), and the client API (api.h), all visible in
// namespace raftkv; and the descriptor of the standard health service. Not for the client library, which speaks v1 only.
#pragma once

#include "proto/windows_macros.h"  // first: before any generated header

#include "grpc/health/v1/health.pb.h"
#include "proto/api.h"
#include "raftkv/internal/raft.grpc.pb.h"
#include "raftkv/internal/raft.pb.h"
#include "raftkv/internal/storage.pb.h"

namespace raftkv {
using namespace ::raftkv::internal;  // NOLINT(google-build-using-namespace)
}  // namespace raftkv
