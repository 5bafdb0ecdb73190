// The client API's generated messages and services (protos/raftkv/v1,
// package raftkv.v1), visible in namespace raftkv: raftkv's own code names
// them unqualified (raftkv::PutRequest is raftkv::v1::PutRequest).
#pragma once

#include "proto/windows_macros.h"  // first: before any generated header

#include "raftkv/v1/admin.grpc.pb.h"
#include "raftkv/v1/admin.pb.h"
#include "raftkv/v1/kv.grpc.pb.h"
#include "raftkv/v1/kv.pb.h"
#include "raftkv/v1/lease.grpc.pb.h"
#include "raftkv/v1/lease.pb.h"
#include "raftkv/v1/watch.grpc.pb.h"
#include "raftkv/v1/watch.pb.h"

namespace raftkv {
using namespace ::raftkv::v1;  // NOLINT(google-build-using-namespace)
}  // namespace raftkv
