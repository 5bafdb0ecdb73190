// What the gRPC server of a member is given: its address, completion-queue
// pools, request limits, deadlines and security.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "client/security.h"
#include "server/rpc/call_auth.h"
#include "server/rpc/server_metrics.h"
#include "kv/kv_requests.h"
#include "node/auto_compactor.h"
#include "node/lease_keeper.h"

namespace raftkv {

class FaultInjector;  // server/peer/fault_injector.h

// Watches (server/api/watch_hub.h).
struct WatchOptions {
  size_t max_watchers = 10000;           // per member; more get RESOURCE_EXHAUSTED
  size_t max_watchers_per_client = 1000;  // per client address
  size_t batch_bytes = 1 << 20;          // events per response (whole revisions)
  int stall_timeout_ms = 30000;          // a response not taken by then cuts the watcher off
  // A watcher that asked for progress notices and has had nothing to send
  // for this long gets an answer without events (etcd: 10 minutes).
  int progress_notify_interval_ms = 600000;
};

// Streams a snapshot of the member just taken (the Admin service does, for
// etcd's Maintenance.Snapshot too). `write` gets each chunk of the file in
// order with the bytes still to come after it and, with the last chunk,
// the SHA-256 of the whole file (hex); it returns false when the stream is
// gone. The first call also gets what the file holds.
class SnapshotStreamer {
 public:
  using Write = std::function<bool(const SnapshotSaveInfo& info, std::string* chunk, uint64_t remaining,
                                   const std::string& sha256)>;
  virtual ~SnapshotStreamer() = default;
  virtual grpc::Status StreamSnapshot(grpc::ServerContext* context, const Write& write) = 0;
  // The same in the frame etcd's clients expect (ops/backup.h,
  // EtcdSnapshotFrame): `remaining` counts the frame's trailer, which comes
  // with the last chunk.
  virtual grpc::Status StreamEtcdSnapshot(grpc::ServerContext* context, const Write& write) = 0;
};

struct ServerOptions {
  std::string listen_address;  // host:port to bind
  // The per-method counters the server updates (null: the GrpcServer keeps
  // its own, GrpcServer::metrics()). Must outlive the server.
  ServerMetrics* metrics = nullptr;
  // Count every unary call in `metrics` (per method and code, with its
  // latency); false leaves them uncounted (streams are still counted): what
  // counting costs per call is then measurable.
  bool count_unary_calls = true;
  int cq_num = 2;
  int threads_per_cq = 1;
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  size_t max_batch_ops = 10000;         // KV.Batch: operations per call
  size_t max_batch_bytes = 4 << 20;     // KV.Batch: key + value bytes per call
  size_t max_txn_ops = 128;             // KV.Txn: compares + operations per call
  // Answers: of a write (stamped in its entry: every replica builds it) and
  // of any read this member serves.
  size_t max_txn_result_bytes = 4 << 20;
  size_t max_response_bytes = 64 << 20;
  // Sessions (stamped in their entries): what one session and all keep of
  // their answers, and how many may be open.
  size_t max_session_saved_bytes = 8 << 20;
  size_t max_saved_bytes = 128 << 20;
  uint64_t max_sessions = 10000;
  // What peers send: the soft byte limit of one AppendEntries
  // (--max_append_bytes) and the InstallSnapshot chunk size. With the limits
  // above they bound the largest legitimate message (MaxReceiveMessageBytes).
  size_t max_append_bytes = 1 << 20;
  size_t snapshot_chunk_bytes = 1 << 20;
  // Deadline applied to client calls that carry none (or a later one).
  int max_request_timeout_ms = 10000;
  // Connections (gRPC's HTTP/2 transport): streams per connection, the
  // keep-alive policy (pings from a client more often than min_time end its
  // connection; this member pings an idle client every interval and drops it
  // without an answer within timeout), idle connections (0: kept), the
  // time a new connection has to complete its handshake, and the resource
  // quota of the port (threads of the synchronous methods, buffer memory).
  int max_concurrent_streams = 1000;
  int keepalive_min_time_ms = 5000;
  int keepalive_interval_ms = 2 * 60 * 60 * 1000;
  int keepalive_timeout_ms = 20000;
  int max_connection_idle_ms = 0;
  int handshake_timeout_ms = 10000;
  int max_sync_threads = 64;
  size_t grpc_memory_bytes = size_t{1} << 30;
  // Calls pre-posted per completion queue for each busy method.
  int calls_per_cq = 64;
  // Client calls answered by the apply thread are finished on a completion
  // queue thread, a batch at a time (of 4 calls or more; smaller batches on
  // the apply thread), rather than on the apply thread. Off by default: with
  // it on, raftkv-server under AddressSanitizer reported OpenSSL objects
  // still allocated at exit in some TLS runs, not yet explained.
  bool finish_on_cq = false;
  // OPEN_SESSION: idle time (cluster time) after which a session expires.
  uint64_t session_timeout_ms = 600000;
  // Leases: TTL bounds and how often the leader looks for expired ones.
  LeaseOptions lease;
  // The leader's automatic history compaction (off by default, as etcd).
  AutoCompactionOptions auto_compaction;
  // Watches: most watchers per member, events per response.
  WatchOptions watch;
  // Tests only (--enable_test_faults): peer requests from blocked members are
  // refused and the Testing service is served. Not owned; null = disabled.
  FaultInjector* faults = nullptr;
  // The Admin service (AdminServiceImpl, a synchronous service), served when
  // set. Not owned; must outlive the server.
  grpc::Service* admin_service = nullptr;
  // Serves etcd's Maintenance.Snapshot when set (UNIMPLEMENTED otherwise).
  // Not owned; must outlive the server.
  SnapshotStreamer* snapshot_streamer = nullptr;
  // TLS credentials of the port and who may call what (server/rpc/call_auth.h).
  // Not owned; null = plaintext, every call allowed.
  const CallAuthorizer* auth = nullptr;
  // A follower forwards the calls only the leader can answer to the leader
  // (server/api/forwarder.h) instead of refusing them with a leader hint.
  bool forward_to_leader = true;
  // Security of the member's own channels (to the leader when forwarding);
  // null: the process setting (client/security.h).
  std::shared_ptr<const ChannelSecurity> peer_security;

  // The request limits of the handlers, from the fields above.
  RequestLimits Limits() const {
    RequestLimits l;
    l.max_key_bytes = max_key_bytes;
    l.max_value_bytes = max_value_bytes;
    l.max_batch_ops = max_batch_ops;
    l.max_batch_bytes = max_batch_bytes;
    l.max_txn_ops = max_txn_ops;
    l.max_txn_result_bytes = max_txn_result_bytes;
    l.session_saved_bytes = max_session_saved_bytes;
    l.saved_bytes_total = max_saved_bytes;
    return l;
  }
};

// The deadline a call waits for the node under: the client's deadline,
// capped at `max_request_timeout_ms` (which is also used when the client set
// none). Client (KV) and Admin calls alike.
inline std::chrono::steady_clock::time_point CallDeadline(const grpc::ServerContextBase& context,
                                                          int max_request_timeout_ms) {
  using Steady = std::chrono::steady_clock;
  const auto cap = Steady::now() + std::chrono::milliseconds(max_request_timeout_ms);
  const auto client = context.deadline();
  if (client == std::chrono::system_clock::time_point::max()) return cap;
  const auto remaining = client - std::chrono::system_clock::now();
  return std::min(cap, Steady::now() + std::chrono::duration_cast<Steady::duration>(remaining));
}

}  // namespace raftkv
