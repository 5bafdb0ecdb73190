// The server reflection protocol (protos/grpc/reflection/v1alpha), generated
// into a library of its own (raftkv_reflection_proto) that only the server
// links.
#pragma once

#include "proto/windows_macros.h"  // first: before any generated header

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
