// etcd's v3 API as generated from protos/etcd: namespaces etcdserverpb,
// mvccpb and authpb, as etcd's own code names them.
#pragma once

#include "proto/windows_macros.h"  // first: before any generated header

#include "etcd/authpb/auth.pb.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcd/mvccpb/kv.pb.h"
