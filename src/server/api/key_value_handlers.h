// What the handlers of a key-value service share, whatever its wire format
// (raftkv.v1's KV in client_handlers.h, etcd's in server/etcd/etcd_kv.h):
// the server's options and request limits, the node, the forwarder, and
// where reads that walk a range run.
#pragma once

#include <functional>
#include <utility>

#include "kv/kv_requests.h"
#include "node/node.h"
#include "server/api/forwarder.h"
#include "server/rpc/server_options.h"

namespace raftkv {

class KeyValueHandlers {
 public:
  // Where the reads that walk a range run once their barrier is reached
  // (the server: a completion-queue thread); unset: where the barrier
  // completes (the apply thread). Set before the server starts.
  void SetOffload(std::function<void(std::function<void()>)> offload) { offload_ = std::move(offload); }

 protected:
  // `forwarder` (may be null: no forwarding) sends the calls only the
  // leader can answer to the leader when this member does not lead.
  KeyValueHandlers(const ServerOptions& options, RaftNode* node, Forwarder* forwarder)
      : options_(options), limits_(options.Limits()), node_(node), forwarder_(forwarder) {}

  // The client's deadline, capped at --max_request_timeout_ms.
  Clock::time_point Deadline(const grpc::ServerContext& context) const {
    return CallDeadline(context, options_.max_request_timeout_ms);
  }
  // Runs `read` where SetOffload said.
  void Offload(std::function<void()> read) const {
    if (offload_) return offload_(std::move(read));
    read();
  }

  const ServerOptions options_;
  const RequestLimits limits_;
  RaftNode* const node_;
  Forwarder* const forwarder_;

 private:
  std::function<void(std::function<void()>)> offload_;
};

}  // namespace raftkv
