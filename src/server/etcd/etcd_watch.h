// etcd's Watch service: one bidirectional stream carries any number of
// watches, each created, cancelled and asked for progress by the client's
// requests on the stream. Every watch is a watcher of the member's WatchHub
// (the same one raftkv.v1's Watch streams use: same events, same history
// window, same bounds per member and per client address); the stream
// multiplexes their answers, tagged with each watch's id, onto one gRPC
// stream with gRPC's callback API (an open stream holds no thread).
//
// As etcd: watch ids are chosen by the client or, when it gives 0, by the
// stream (0, 1, 2, ...); a watch whose start revision is compacted gets its
// created answer and then a cancel carrying compact_revision; a create that
// cannot be served is answered created and cancelled with the reason; a
// progress request is answered with watch_id -1 and a revision every watch of
// the stream has sent all events up to. A member that shuts down or loses
// its leader ends the whole stream with UNAVAILABLE, which etcd's clients
// take as "reconnect and resume" (on another member).
#pragma once

#include <cstdint>

#include <grpcpp/grpcpp.h>

#include "kv/kv_requests.h"
#include "node/node.h"
#include "proto/etcd.h"
#include "server/api/watch_hub.h"
#include "server/rpc/call_auth.h"
#include "server/rpc/server_metrics.h"

namespace raftkv {

class EtcdWatch final : public etcdserverpb::Watch::CallbackService {
 public:
  // Answers queued on one stream before it stops reading requests.
  static constexpr size_t kMaxQueuedAnswers = 64;

  // `metrics` (may be null) counts the streams.
  EtcdWatch(WatchHub* hub, const RaftNode* node, const RequestLimits& limits,
            const CallAuthorizer* auth, RpcMethodMetrics* metrics)
      : hub_(hub), node_(node), limits_(limits), auth_(auth), metrics_(metrics) {}

  grpc::ServerBidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>* Watch(
      grpc::CallbackServerContext* context) override;

  WatchHub* hub() const { return hub_; }
  const RaftNode* node() const { return node_; }
  const RequestLimits& limits() const { return limits_; }
  const CallAuthorizer* auth() const { return auth_; }
  RpcMethodMetrics* metrics() const { return metrics_; }

 private:
  WatchHub* const hub_;
  const RaftNode* const node_;
  const RequestLimits limits_;
  const CallAuthorizer* const auth_;
  RpcMethodMetrics* const metrics_;
};

}  // namespace raftkv
