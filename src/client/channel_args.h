// Channel arguments shared by every raftkv channel: clients (KvClient,
// raftkvctl, the benchmark) and the servers' channels to their peers.
#pragma once

#include <grpcpp/support/channel_arguments.h>

namespace raftkv {

// - Reconnect quickly: gRPC's default back-off grows to two minutes, during
//   which calls to a restarted server fail at once. Here the first retry
//   comes after 100 ms and retries never wait more than 1 s.
// - A connection attempt may take up to 2 s (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS
//   is gRPC's minimum connect timeout, not a back-off): a loaded server's
//   handshake is not abandoned.
// - Re-resolve the target after a failure within 100 ms: otherwise the DNS
//   resolver's 30 s rate limit keeps a channel whose first attempts failed
//   (a client started before the server) unusable for seconds.
// - No message size limit: the servers enforce their own key/value limits.
grpc::ChannelArguments RaftkvChannelArguments();

}  // namespace raftkv
