// The /metrics endpoint of raftkv-server (--metrics_port, --metrics_address):
// the node's state (RaftNode::GetStatus(), the same snapshot the Admin
// service's ListMembers and the KV Status RPC report) and its counters
// (RaftNode::metrics()) in the Prometheus text format, served by an
// HttpServer. Metric names and meanings: doc/metrics.md.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "ops/http_server.h"
#include "node/metrics.h"
#include "node/node.h"
#include "ops/process_metrics.h"
#include "server/rpc/server_metrics.h"

namespace raftkv {

// The Content-Type of the text exposition format.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4";

// What a scrape gathers besides the node's status and counters.
struct ScrapeExtras {
  uint64_t keys = 0;            // in the state machine
  uint64_t leases = 0;          // in the state machine
  uint64_t saved_answer_bytes = 0;  // the sessions' saved answers, in the state machine
  uint64_t backend_bytes = 0;       // KvStateMachine::StateBytes
  int64_t quota_backend_bytes = 0;  // <= 0: no quota
  bool nospace_alarm = false;       // a NOSPACE alarm is raised (on any member)
  uint64_t store_write_errors = 0;  // KvStateMachine::StoreWriteErrors
  bool store_stalled = false;       // KvStateMachine::StoreStalled
  uint64_t store_bytes = 0;         // KvStateMachine::StoredBytes
  uint64_t store_memtable_memory_bytes = 0;  // BackendStats::memtable_memory_bytes
  uint64_t watchers = 0;        // of the running gRPC server
  uint64_t snapshot_bytes = 0;  // the files in the snapshot directory
  const ServerMetrics* server = nullptr;  // null: no raftkv_grpc_* families
  std::optional<ProcessStats> process;    // empty (not available here): no process_* families
};

// Renders one scrape. `proposals_per_second`: the server-side rate gauge.
// Per-peer series (raftkv_peer_*) are exported by the leader only, one per
// other member of the configuration; a follower or candidate exports none
// (it has no replication progress to report), so a query over them shows
// the current leader's view.
std::string RenderNodeMetrics(const NodeStatus& status, const NodeMetrics& metrics,
                              double proposals_per_second,
                              const ScrapeExtras& extras = ScrapeExtras());

// Bytes of the regular files directly in `dir` (0 if it cannot be read).
uint64_t DirectoryBytes(const std::string& dir);

class MetricsEndpoint {
 public:
  // `node` and `rpc` (the gRPC server's counters; null: none) must outlive
  // Stop().
  MetricsEndpoint(RaftNode* node, const ServerMetrics* rpc, const std::string& address, int port);
  ~MetricsEndpoint() { Stop(); }

  Status Start();
  void Stop() { server_.Stop(); }
  int port() const { return server_.port(); }

  // Window of the raftkv_proposals_per_second gauge, sampled every second.
  static constexpr std::chrono::seconds kRateWindow{5};

 private:
  RaftNode* const node_;
  const ServerMetrics* const rpc_;
  const std::string address_;
  HttpServer server_;
  RateWindow proposal_rate_{kRateWindow};  // the server's thread only
};

}  // namespace raftkv
