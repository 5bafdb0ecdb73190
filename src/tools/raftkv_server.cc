// raftkv-server: one member of a raftkv cluster.
//
//   raftkv-server --flagfile=conf/node1.flags
//   raftkv-server --id=1 --cluster_file=conf/cluster.conf --data_dir=data/node1
//
// SIGTERM / SIGINT stop the server gracefully; SIGKILL at any point loses no
// acknowledged write (see doc/storage.md, "Crash safety, in order").
#ifndef _WIN32
#include <sys/resource.h>
#endif

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <utility>

#include "client/grpc_runtime.h"
#include "client/kv_client.h"
#include "client/security.h"
#include "common/version.h"
#include "ops/admin_service.h"

DECLARE_string(tls_ca_file);  // client/security.cc
#include "server/rpc/call_auth.h"
#include "node/auto_compactor.h"
#include "node/cluster_config.h"
#include "ops/flag_files.h"
#include "server/grpc_server.h"
#include "ops/metrics_endpoint.h"
#include "node/node.h"
#include "ops/tls_check.h"
#include "server/peer/peer_client.h"

DEFINE_uint64(id, 0,
              "This member's id (required). Must appear in --cluster_file, unless --join is set.");
DEFINE_string(cluster_file, "conf/cluster.conf",
              "Cluster file listing every member as '<id> <host:port>', one per line. The same "
              "file is given to every member. It bootstraps a new data directory (see "
              "--initial_cluster_state); once a directory holds state, its own record and log say "
              "who the members are and the file only supplies addresses (a file that disagrees "
              "is reported and ignored).");
DEFINE_string(initial_cluster_state, "new",
              "What an empty --data_dir starts as: 'new' bootstraps a new cluster from "
              "--cluster_file (every listed member a voter); 'existing' joins a running cluster: "
              "the member takes no vote of its own and waits for the leader's log or snapshot "
              "(the cluster's membership must already name it: raftkvctl member add). Ignored "
              "for a directory that holds state.");
DEFINE_string(initial_cluster_token, "raftkv-cluster",
              "Mixed into the id of the cluster an empty --data_dir founds (etcd's "
              "--initial-cluster-token): give every founding member the same token, and a new "
              "cluster on the same addresses a new one, so that members of the old cluster are "
              "refused. Members that join learn the id from the leader; ignored for a directory "
              "that holds state.");
DEFINE_string(data_dir, "", "Directory for this member's log and state (required).");
DEFINE_string(listen_address, "",
              "host:port to bind. Default: 0.0.0.0 and the port of this member's address in "
              "--cluster_file (so LAN peers can connect).");
DEFINE_int32(server_cq_num, 2, "Completion queues serving incoming client and peer calls.");
DEFINE_int32(server_threads_per_cq, 1, "Threads polling each server completion queue.");
DEFINE_int32(peer_cq_num, 1, "Completion queues for this member's calls to its peers.");
DEFINE_int32(peer_threads_per_cq, 1, "Threads polling each peer completion queue.");
DEFINE_int32(calls_per_cq, 64, "Calls pre-posted per server completion queue for each busy method.");
DEFINE_bool(forward_to_leader, true,
            "A follower sends the calls only the leader can answer (writes, transactions, sessions, "
            "lease calls, linearizable reads) to the leader and relays the answer, so clients may use "
            "any member (false: it refuses them with FAILED_PRECONDITION and the leader's address).");
DEFINE_bool(finish_on_cq, true,
            "Finish the client calls that the apply thread answers on a server completion-queue thread, "
            "one batch per apply pass when it holds 4 calls or more (false: the apply thread finishes "
            "them itself).");
DEFINE_int32(tick_ms, raftkv::raft::Config().tick_ms, "Length of one logical clock tick in milliseconds.");
DEFINE_int32(election_ticks, raftkv::raft::Config().election_ticks,
             "Minimum election timeout in ticks; each timeout is drawn from [n, 2n) ticks.");
DEFINE_int32(heartbeat_ticks, raftkv::raft::Config().heartbeat_ticks, "Ticks between leader heartbeats; must be < --election_ticks.");
DEFINE_uint64(max_key_bytes, 4096, "Largest key accepted; longer keys get INVALID_ARGUMENT.");
DEFINE_uint64(max_value_bytes, 1 << 20, "Largest value accepted; longer values get INVALID_ARGUMENT.");
DEFINE_uint64(max_batch_ops, 10000,
              "Most operations in one KV.Batch call (they become one log entry); more get "
              "INVALID_ARGUMENT.");
DEFINE_uint64(max_batch_bytes, 4 << 20,
              "Most key + value bytes in one KV.Batch or KV.Txn call; more get INVALID_ARGUMENT.");
DEFINE_uint64(max_txn_ops, 128,
              "Most compares + operations (both lists) in one KV.Txn call, as etcd's "
              "--max-txn-ops; more get INVALID_ARGUMENT.");
DEFINE_uint64(max_txn_result_bytes, 4 << 20,
              "Most bytes the answer of a write may carry: the range results of a transaction that "
              "also writes, the previous key-values of a delete with prev_kv (each key visited "
              "counting at least 32 bytes). Every replica builds and keeps that answer, so it is "
              "bounded before the write is proposed and again, alike on every replica, when it "
              "is applied: a larger one is refused whole with RESOURCE_EXHAUSTED.");
DEFINE_uint64(max_response_bytes, 64 << 20,
              "Most key-value bytes in the answer of a read this member serves (a range, a "
              "read-only transaction); a larger one gets RESOURCE_EXHAUSTED naming the flag "
              "(read in pages with limit).");
DEFINE_uint64(max_session_saved_bytes, 8 << 20,
              "Bytes of answers one exactly-once session keeps for its retries (stamped in each "
              "write: every replica keeps the same); past it the oldest are dropped and their "
              "retries refused, never applied twice.");
DEFINE_uint64(max_saved_bytes, 128 << 20,
              "Bytes of answers all sessions keep together on every replica (and in every "
              "snapshot); past it the oldest answers of any session are dropped, a session's "
              "newest kept.");
DEFINE_uint64(max_sessions, 10000,
              "Most open exactly-once sessions (stamped in each OpenSession); more get "
              "RESOURCE_EXHAUSTED until idle ones expire (--session_timeout_ms) or are closed.");
DEFINE_int32(max_request_timeout_ms, 10000,
             "Server-side deadline for client calls with no deadline (or a later one).");
DEFINE_uint64(max_inflight_appends, raftkv::raft::Config().max_inflight_appends,
              "AppendEntries calls in flight per follower (pipelining window).");
DEFINE_uint64(max_inflight_bytes, raftkv::raft::Config().max_inflight_bytes,
              "Entry bytes of the AppendEntries calls in flight per follower (0 = no limit; one call may "
              "always be in flight): a far-behind follower draws at most this much from the leader at "
              "once, so the heartbeats to the others are not held up behind its backlog.");
DEFINE_uint64(max_append_entries, raftkv::raft::Config().max_append_entries, "Most entries in one AppendEntries.");
DEFINE_uint64(max_append_bytes, raftkv::raft::Config().max_append_bytes, "Soft limit on the entry bytes in one AppendEntries.");
DEFINE_int32(append_timeout_ms, 2000,
             "Deadline of one AppendEntries call to a peer; on an append stream, how long the oldest "
             "append may wait for its answer before the stream is dropped and opened again.");
DEFINE_bool(peer_append_stream, true,
            "Send appends and heartbeats to each follower on one long-lived Peer.Append stream (false: "
            "one AppendEntries call each). A follower that does not serve the stream gets calls.");
DEFINE_int32(vote_timeout_ms, 1000, "Deadline of one RequestVote call to a peer.");
DEFINE_uint64(segment_bytes, 64ull << 20, "Log segment size at which a new segment file starts.");
DEFINE_uint64(segment_preallocate_bytes, 4ull << 20,
              "The last log segment is extended this many bytes at a time ahead of its writes "
              "(fallocate, Linux), so that an append changes no inode and each fsync waits for "
              "the data only; the space reads as zeros until written. 0: files grow per write.");
DEFINE_uint64(session_timeout_ms, 600000,
              "A client session expires after this long without a write (measured in cluster "
              "time, the leader-stamped time carried by log entries); its retries then fail with "
              "ABORTED. Stored in the session when it is opened.");
DEFINE_uint64(history_revisions, 100000,
              "Revisions of changes kept for watches and reads at a past revision "
              "(get --rev); a watch or read from before them gets OUT_OF_RANGE naming the oldest "
              "kept. Local to the member. With --storage_engine=rocksdb a restart keeps them and "
              "an installed checkpoint brings the sender's; with 'memory' a restart or an "
              "installed snapshot keeps the last --snapshot_history_revisions of them and what "
              "followed the snapshot.");
DEFINE_uint64(snapshot_history_revisions, 10000,
              "Revisions of that history written into every snapshot file (the memory engine's; "
              "a checkpoint holds all the store keeps), so that a watch can "
              "resume on a member that restarted or caught up from a snapshot from up to this "
              "many revisions before it (0: none; costs their bytes in each snapshot).");
DEFINE_uint64(history_bytes, 64ull << 20,
              "Bytes of changes (keys, values and previous values) kept for watches and reads "
              "at a past revision; whichever of this and --history_revisions is reached first "
              "trims the oldest revisions.");
DEFINE_int64(quota_backend_bytes, 0,
             "Most bytes the key-value state may hold (keys and values with 64 bytes each, "
             "the history kept, saved answers, leases; etcd's backend quota). A write that "
             "would take it past this is refused (RESOURCE_EXHAUSTED, etcd's 'database space "
             "exceeded') and raises the NOSPACE alarm: every member then refuses writes that "
             "add data, while reads, deletes and compaction go on, until an operator clears "
             "it (etcdctl alarm disarm). 0: the default, 2 GiB; negative: no quota. With "
             "--storage_engine=memory the state is in memory: keep the quota well below the RAM.");
#ifdef RAFTKV_HAVE_ROCKSDB
constexpr char kDefaultStorageEngine[] = "rocksdb";
#else
constexpr char kDefaultStorageEngine[] = "memory";
#endif
DEFINE_string(storage_engine, kDefaultStorageEngine,
              "Where the key-value state lives: 'rocksdb' (on disk in <data_dir>/kv-*/, "
              "named by <data_dir>/KV_CURRENT; a restart opens it and applies only the log "
              "after the last entry it made durable; the default where the server is built "
              "with RocksDB) or 'memory' (restored from the newest snapshot at start, then the "
              "log after it; faster writes, state bounded by the RAM; the default otherwise). "
              "Either engine starts from a directory the other wrote: the state is rebuilt "
              "from its snapshot and log.");
DEFINE_string(auto_compaction_mode, "periodic",
              "How --auto_compaction_retention is read, as etcd's: 'periodic' (a duration: the "
              "leader compacts the history, every min(retention, 1h), through the revision it "
              "had that long ago) or 'revision' (a number: every 5 minutes it compacts through "
              "the current revision minus that many).");
DEFINE_string(auto_compaction_retention, "0",
              "History the leader keeps when it compacts automatically (etcd's Compact, "
              "replicated): for --auto_compaction_mode=periodic a duration such as 72h, 30m, "
              "1h30m or a bare number of hours; for revision a number of revisions. 0: no "
              "automatic compaction (the default, as etcd).");
DEFINE_int64(min_lease_ttl_s, 2,
             "Shortest lease TTL in seconds: a grant asking for less gets this (as etcd). "
             "Keep it above the election timeout.");
DEFINE_int64(max_lease_ttl_s, 9000000000LL,
             "Longest lease TTL in seconds (at most 9000000000, as etcd); longer grants get "
             "INVALID_ARGUMENT.");
DEFINE_uint64(max_watchers, 10000,
              "Most watch streams one member serves; more get RESOURCE_EXHAUSTED.");
DEFINE_uint64(max_watchers_per_client, 1000,
              "Most watch streams one client address may hold on this member; more get "
              "RESOURCE_EXHAUSTED, so one client cannot take every slot of --max_watchers.");
DEFINE_int32(watch_stall_timeout_ms, 30000,
             "A watcher whose client has not taken a response for this long (it stopped reading) "
             "is cut off with RESOURCE_EXHAUSTED and its slot freed.");
DEFINE_int32(watch_progress_notify_interval_ms, 600000,
             "A watcher that asked for progress notices (etcd's progress_notify) and had nothing "
             "to send for this long gets an answer without events naming the revision it is "
             "up to date with (etcd's --experimental-watch-progress-notify-interval, 10 min).");
DEFINE_int32(max_concurrent_streams, 1000,
             "Most calls and streams open at once on one client connection (HTTP/2 "
             "SETTINGS_MAX_CONCURRENT_STREAMS); more wait in the client.");
DEFINE_int32(grpc_keepalive_min_time_ms, 5000,
             "Shortest interval at which a client may ping this server (as etcd's "
             "--grpc-keepalive-min-time); a client pinging more often is disconnected.");
DEFINE_int32(grpc_keepalive_interval_ms, 2 * 60 * 60 * 1000,
             "How often this server pings an idle client connection to see that it is alive (as "
             "etcd's --grpc-keepalive-interval).");
DEFINE_int32(grpc_keepalive_timeout_ms, 20000,
             "How long a ping may go unanswered before the connection is closed (as etcd's "
             "--grpc-keepalive-timeout): dead and half-open connections are dropped.");
DEFINE_int32(max_connection_idle_ms, 0,
             "Close a client connection that had no call for this long (0: never).");
DEFINE_int32(grpc_handshake_timeout_ms, 10000,
             "Time a new connection has to complete its handshake (TLS, HTTP/2 preface) before "
             "it is closed.");
DEFINE_int32(grpc_max_sync_threads, 64,
             "Threads gRPC may run for the synchronous methods (Admin, snapshot transfers, "
             "time-out-now) at once; further such calls wait or are refused.");
DEFINE_uint64(grpc_memory_bytes, 1ull << 30,
              "Memory gRPC may use for the buffers of all connections (its resource quota); "
              "past it, it slows reading and drops the largest consumers.");
DEFINE_uint64(watch_batch_bytes, 1 << 20,
              "Event bytes per watch response (whole revisions: one revision may exceed it).");
DEFINE_bool(join, false,
            "Start a new member that is not in --cluster_file: it gets no vote and waits for the "
            "cluster's leader to add it (raftkvctl member add, then member promote), receiving "
            "the log or a snapshot. Its address is --listen_address (required with --join). "
            "Keep the flag on restarts of such a member. Not for members listed in the file.");
DEFINE_uint64(snapshot_entries, 100000,
              "Take a snapshot (and compact the log) when this many entries were applied since "
              "the last one. 0: never by count.");
DEFINE_uint64(snapshot_log_bytes, 512ull << 20,
              "Also take a snapshot when the log files reach this many bytes (and have grown by "
              "half of it since the last compaction). 0: never by size.");
DEFINE_uint64(snapshots_kept, 2,
              "Snapshot files kept (>= 2). The log is kept back to the oldest of them, so when "
              "the newest is damaged the member restarts from the previous one.");
DEFINE_int32(snapshot_nice, 10,
             "Nice value (0-19) of the thread that takes a snapshot (Linux; ignored elsewhere): "
             "encoding a large state is background work, and at a lower priority it yields the "
             "cores to the threads that serve writes when they compete. 0: the server's own.");
DEFINE_int32(shutdown_transfer_ms, 2000,
             "On SIGTERM/SIGINT a leader first hands leadership to its most up-to-date reachable "
             "voter (leadership transfer) and waits for it at most this long before shutting down, "
             "so clients see a new leader at once instead of after an election timeout. "
             "0 = shut down without a transfer.");
DEFINE_uint64(promote_max_lag, raftkv::raft::Config().promote_max_lag,
              "A learner is promoted to voter only when its log is within this many entries of "
              "the leader's.");
DEFINE_int32(snapshot_timeout_ms, 10 * 60 * 1000,
             "Deadline of one whole InstallSnapshot transfer to a peer.");
DEFINE_bool(enable_test_faults, false,
            "Serve the Testing.SetFaults RPC, which cuts links to chosen peers (fault tests and "
            "scripts/chaos.sh only; never in production: anyone reaching the client port could "
            "partition the node).");
DEFINE_int32(metrics_port, 0,
             "Serve Prometheus metrics at http://<--metrics_address>:<port>/metrics (text format "
             "0.0.4; see doc/metrics.md); 0 = no metrics endpoint.");
DEFINE_bool(rpc_metrics, true,
            "Count every unary call per method and status code, with its latency "
            "(raftkv_grpc_requests_total, raftkv_grpc_request_duration_seconds): two clock reads "
            "and three counter increments per call. false leaves unary calls uncounted (streams "
            "still are), to measure what counting costs.");
DEFINE_string(metrics_address, "0.0.0.0",
              "IP address (IPv4 or IPv6 literal) the metrics endpoint listens on, e.g. 127.0.0.1 "
              "to serve the local host only.");

DEFINE_string(peer_token_file, "",
              "File whose first line is the secret the members share (the same file on every "
              "member, different from --token_file). Members send it with their calls to each "
              "other (\"raftkv-peer-token\") and refuse peer calls (append entries, votes, "
              "snapshots) without it, so that without TLS a client cannot act as a member. "
              "Required with --token_file or --admin_token_file when TLS is off.");
DEFINE_string(admin_token_file, "",
              "File whose first line is the administrators' bearer token. With it, the Admin "
              "methods that change the cluster (add, promote and remove members, transfer "
              "leadership, take and save snapshots) and the test faults require this token; "
              "the --token_file token no longer grants them (PERMISSION_DENIED). It is also "
              "accepted wherever the client token is. Without it, the client token grants them.");
DEFINE_bool(client_cert_required, false,
            "With TLS: every caller, client or peer, must present a certificate signed by "
            "--tls_ca_file (refused in the TLS handshake otherwise). Without it clients may "
            "connect without one; peer methods always require one.");
DEFINE_string(peer_cert_allowed_names, "",
              "With TLS: comma-separated names of the certificates allowed to call the peer "
              "methods (Raft.*: append entries, vote, snapshots), matched against the "
              "certificate's common name and DNS SANs; \"prefix*\" matches a prefix. Empty: "
              "any certificate signed by --tls_ca_file.");

namespace {

// Where each flag set by a --flagfile was set ("FILE:LINE").
std::map<std::string, std::string>& FlagOrigin() {
  static std::map<std::string, std::string> origin;
  return origin;
}

// Reports a start-up error; a message about "--name ..." (or "--name=...",
// "--name: ...") names the flag file line that set it, if one did.
int Fail(std::string message) {
  if (message.compare(0, 2, "--") == 0) {
    const std::string name = message.substr(2, message.find_first_of(" =:", 2) - 2);
    auto it = FlagOrigin().find(name);
    if (it != FlagOrigin().end()) message = it->second + ": " + message;
  }
  std::cerr << "raftkv-server: " << message << std::endl;
  LOG(ERROR) << message;
  return 2;
}

// Graceful shutdown of a leader: transfer leadership to the voter with the
// highest match index among those being replicated to ("replicate" state:
// recently reachable), and wait for the outcome, at most timeout_ms. A
// follower, a leader without such a voter, or a refused or failed transfer
// shuts down at once (the others then elect a leader as after a crash).
void HandOverLeadership(raftkv::RaftNode* node, int timeout_ms) {
  if (node->GetStatus().role != raftkv::raft::Role::kLeader) return;
  const uint64_t target = node->MostUpToDateVoter();
  if (target == 0) {
    LOG(INFO) << "leader shutting down: no reachable voter to hand leadership to";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  std::promise<raftkv::Outcome> done;
  std::future<raftkv::Outcome> outcome = done.get_future();
  node->TransferLeadership(target, start + std::chrono::milliseconds(timeout_ms),
                           [&done](raftkv::Outcome out) { done.set_value(std::move(out)); });
  const raftkv::Outcome out = outcome.get();  // the node answers by the deadline
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start).count();
  if (out.status.ok()) {
    LOG(INFO) << "leader shutting down: handed leadership to member " << target << " (term "
              << out.term << ") in " << ms << " ms";
  } else {
    LOG(WARNING) << "leader shutting down: leadership transfer to member " << target
                 << " failed after " << ms << " ms: " << out.status.message();
  }
}

// Raises the soft limit on open files to the hard one: every client and peer
// connection is a descriptor, and a burst of connections (or idle ones
// waiting for their handshake timeout) must not run the member out of them.
void RaiseOpenFileLimit() {
#ifndef _WIN32
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    LOG(INFO) << "open file limit raised from " << before << " to " << limit.rlim_cur;
  }
#endif
}

}  // namespace

// Checks the member's identity, clock, thread and lease flags; 0 if they
// hold, else the exit code of the reported error.
static int CheckMemberFlags() {
  if (FLAGS_id == 0) return Fail("--id is required (a positive member id)");
  if (FLAGS_data_dir.empty()) return Fail("--data_dir is required");
  if (FLAGS_tick_ms < 1) return Fail("--tick_ms must be >= 1");
  if (FLAGS_heartbeat_ticks < 1 || FLAGS_heartbeat_ticks >= FLAGS_election_ticks) {
    return Fail("--heartbeat_ticks must be >= 1 and < --election_ticks");
  }
  // One flag per message, so it names the flag file line to fix.
  for (const auto& [name, value] :
       {std::pair<const char*, int32_t>{"--server_cq_num", FLAGS_server_cq_num},
        {"--server_threads_per_cq", FLAGS_server_threads_per_cq},
        {"--peer_cq_num", FLAGS_peer_cq_num},
        {"--peer_threads_per_cq", FLAGS_peer_threads_per_cq},
        {"--calls_per_cq", FLAGS_calls_per_cq}}) {
    if (value < 1) return Fail(std::string(name) + " must be >= 1, got " + std::to_string(value));
  }
  for (const auto& [name, value] :
       {std::pair<const char*, uint64_t>{"--max_inflight_appends", FLAGS_max_inflight_appends},
        {"--max_append_entries", FLAGS_max_append_entries},
        {"--max_batch_ops", FLAGS_max_batch_ops},
        {"--max_batch_bytes", FLAGS_max_batch_bytes}}) {
    if (value < 1) return Fail(std::string(name) + " must be >= 1, got 0");
  }
  if (FLAGS_session_timeout_ms < 1) return Fail("--session_timeout_ms must be >= 1");
  if (FLAGS_min_lease_ttl_s < 1 || FLAGS_max_lease_ttl_s < FLAGS_min_lease_ttl_s) {
    return Fail("--min_lease_ttl_s must be >= 1 and <= --max_lease_ttl_s");
  }
  if (FLAGS_max_lease_ttl_s > raftkv::LeaseOptions::kMaxTtlS) {
    return Fail("--max_lease_ttl_s must be at most " + std::to_string(raftkv::LeaseOptions::kMaxTtlS) +
                " (285 years), got " + std::to_string(FLAGS_max_lease_ttl_s));
  }
  raftkv::AutoCompactionOptions auto_compaction;
  const raftkv::Status compaction =
      raftkv::ParseAutoCompaction(FLAGS_auto_compaction_mode, FLAGS_auto_compaction_retention, &auto_compaction);
  if (!compaction.ok()) return Fail(compaction.message());
  if (FLAGS_storage_engine != "memory" && FLAGS_storage_engine != "rocksdb") {
    return Fail("--storage_engine must be 'memory' or 'rocksdb', got '" + FLAGS_storage_engine + "'");
  }
#ifndef RAFTKV_HAVE_ROCKSDB
  if (FLAGS_storage_engine == "rocksdb") {
    return Fail("--storage_engine=rocksdb: this raftkv-server was built without RocksDB "
                "(RAFTKV_WITH_ROCKSDB=OFF or the library was not found)");
  }
#endif
  if (FLAGS_initial_cluster_state != "new" && FLAGS_initial_cluster_state != "existing") {
    return Fail("--initial_cluster_state must be 'new' or 'existing', got '" + FLAGS_initial_cluster_state + "'");
  }
  return 0;
}

// Checks the size and resource limits (and warns of no automatic
// snapshots); 0 if they hold, else the exit code of the reported error.
static int CheckLimitFlags() {
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{"--max_txn_ops", static_cast<int64_t>(FLAGS_max_txn_ops)},
        {"--max_txn_result_bytes", static_cast<int64_t>(FLAGS_max_txn_result_bytes)},
        {"--max_response_bytes", static_cast<int64_t>(FLAGS_max_response_bytes)},
        {"--max_session_saved_bytes", static_cast<int64_t>(FLAGS_max_session_saved_bytes)},
        {"--max_saved_bytes", static_cast<int64_t>(FLAGS_max_saved_bytes)},
        {"--max_sessions", static_cast<int64_t>(FLAGS_max_sessions)},
        {"--max_watchers_per_client", static_cast<int64_t>(FLAGS_max_watchers_per_client)},
        {"--watch_stall_timeout_ms", FLAGS_watch_stall_timeout_ms},
        {"--watch_progress_notify_interval_ms", FLAGS_watch_progress_notify_interval_ms},
        {"--max_concurrent_streams", FLAGS_max_concurrent_streams},
        {"--grpc_keepalive_min_time_ms", FLAGS_grpc_keepalive_min_time_ms},
        {"--grpc_keepalive_interval_ms", FLAGS_grpc_keepalive_interval_ms},
        {"--grpc_keepalive_timeout_ms", FLAGS_grpc_keepalive_timeout_ms},
        {"--grpc_handshake_timeout_ms", FLAGS_grpc_handshake_timeout_ms},
        {"--grpc_max_sync_threads", FLAGS_grpc_max_sync_threads},
        {"--grpc_memory_bytes", static_cast<int64_t>(FLAGS_grpc_memory_bytes)}}) {
    if (value < 1) return Fail(std::string(name) + " must be >= 1, got " + std::to_string(value));
  }
  if (FLAGS_max_connection_idle_ms < 0) return Fail("--max_connection_idle_ms must be >= 0 (0: never)");
  if (FLAGS_max_txn_ops > 100000) return Fail("--max_txn_ops must be at most 100000");
  if (FLAGS_max_txn_result_bytes > FLAGS_max_response_bytes) {
    return Fail("--max_txn_result_bytes must be at most --max_response_bytes (" +
                std::to_string(FLAGS_max_response_bytes) + ")");
  }
  if (FLAGS_grpc_memory_bytes < (64u << 20)) {
    return Fail("--grpc_memory_bytes must be at least 67108864 (64 MiB), got " +
                std::to_string(FLAGS_grpc_memory_bytes));
  }
  if (FLAGS_max_watchers < 1 || FLAGS_watch_batch_bytes < 1) {
    return Fail("--max_watchers and --watch_batch_bytes must be >= 1");
  }
  if (FLAGS_shutdown_transfer_ms < 0) return Fail("--shutdown_transfer_ms must be >= 0");
  constexpr uint64_t kMaxLimit = 256ull << 20;  // keeps the gRPC message limit below 2 GiB
  for (const auto& [name, value] :
       {std::pair<const char*, uint64_t>{"--max_key_bytes", FLAGS_max_key_bytes},
        {"--max_value_bytes", FLAGS_max_value_bytes},
        {"--max_batch_bytes", FLAGS_max_batch_bytes},
        {"--max_append_bytes", FLAGS_max_append_bytes}}) {
    if (value > kMaxLimit) {
      return Fail(std::string(name) + " must be at most " + std::to_string(kMaxLimit) + ", got " +
                  std::to_string(value));
    }
  }
  if (FLAGS_max_batch_ops > 1000000) return Fail("--max_batch_ops must be at most 1000000");
  if (FLAGS_snapshots_kept < 2) {
    return Fail("--snapshots_kept must be >= 2 (the previous snapshot is the fallback when the "
                "newest is damaged), got " + std::to_string(FLAGS_snapshots_kept));
  }
  if (FLAGS_snapshot_timeout_ms < 1000) return Fail("--snapshot_timeout_ms must be >= 1000");
  if (FLAGS_snapshot_nice < 0 || FLAGS_snapshot_nice > 19) {
    return Fail("--snapshot_nice must be 0..19, got " + std::to_string(FLAGS_snapshot_nice));
  }
  if (FLAGS_metrics_port < 0 || FLAGS_metrics_port > 65535) {
    return Fail("--metrics_port must be 0 (off) or a TCP port 1..65535, got " +
                std::to_string(FLAGS_metrics_port));
  }
  if (FLAGS_snapshot_entries == 0 && FLAGS_snapshot_log_bytes == 0) {
    LOG(WARNING) << "--snapshot_entries=0 and --snapshot_log_bytes=0: no automatic snapshots; "
                    "the log grows until a snapshot is taken with raftkvctl";
  }
  return 0;
}

// TLS and tokens (client/security.h, server/rpc/call_auth.h): loads the files
// named by the flags into *shared (the process-wide channel security: the
// member's own channels to its peers use the same CA, certificate and key)
// and makes *auth. 0 on success, else the exit code of the reported error.
static int LoadSecurity(const std::shared_ptr<raftkv::ChannelSecurity>& shared,
                        std::unique_ptr<raftkv::CallAuthorizer>* auth) {
  raftkv::ChannelSecurity* security = shared.get();
  if (raftkv::Status bad = raftkv::LoadChannelSecurity(raftkv::SecurityFilesFromFlags(), security);
      !bad.ok()) {
    return Fail(bad.message());
  }
  if (!FLAGS_peer_token_file.empty()) {
    if (raftkv::Status bad = raftkv::LoadTokenFile("peer_token_file", FLAGS_peer_token_file,
                                                   &security->peer_token);
        !bad.ok()) {
      return Fail(bad.message());
    }
    if (security->peer_token == security->token) {
      return Fail("--peer_token_file holds the same token as --token_file: every client could "
                  "act as a member; give the members a secret of their own");
    }
  }
  raftkv::ServerSecurityOptions sec;
  if (!FLAGS_admin_token_file.empty()) {
    if (raftkv::Status bad = raftkv::LoadTokenFile("admin_token_file", FLAGS_admin_token_file,
                                                   &sec.admin_token);
        !bad.ok()) {
      return Fail(bad.message());
    }
    if (sec.admin_token == security->token || sec.admin_token == security->peer_token) {
      return Fail("--admin_token_file holds the same token as --token_file or "
                  "--peer_token_file: give the administrators a token of their own");
    }
  } else if (!security->token.empty()) {
    LOG(WARNING) << "--token_file without --admin_token_file: every holder of the client token "
                    "may also change the membership and take snapshots";
  }
  sec.files = *security;
  sec.client_cert_required = FLAGS_client_cert_required;
  if (raftkv::Status bad = raftkv::CallAuthorizer::ParseNames(FLAGS_peer_cert_allowed_names, &sec.peer_allowed_names);
      !bad.ok()) {
    return Fail("--peer_cert_allowed_names: " + bad.message());
  }
  if (raftkv::Status bad = raftkv::CallAuthorizer::Create(std::move(sec), auth); !bad.ok()) {
    return Fail(bad.message());
  }
  raftkv::SetProcessChannelSecurity(shared);
  if (!security->tls()) {
    LOG(WARNING) << "plaintext: client and peer traffic is neither encrypted nor authenticated "
                    "(set --tls_ca_file, --tls_cert_file, --tls_key_file)";
    if (!security->token.empty()) {
      LOG(WARNING) << "--token_file without TLS: the token travels in clear text";
    }
  }
  return 0;
}

// Loads --cluster_file into *cluster and finds the address this member
// serves on (its line there, or --listen_address with --join); 0 on
// success, else the exit code of the reported error.
static int LoadCluster(raftkv::ClusterConfig* cluster, std::string* self_address) {
  raftkv::Status s = raftkv::LoadClusterConfig(FLAGS_cluster_file, cluster);
  if (!s.ok()) {
    // A file that cannot be read is named with the flag file line that set
    // --cluster_file; parse errors name the cluster file's own line.
    const bool unreadable = !std::ifstream(FLAGS_cluster_file);
    return Fail(unreadable ? "--cluster_file: " + s.message() : s.message());
  }
  const raftkv::Member* self = cluster->Find(FLAGS_id);
  if (FLAGS_join) {
    if (self != nullptr) {
      return Fail("--join is for a new member whose id is not in " + FLAGS_cluster_file +
                  ", but member " + std::to_string(FLAGS_id) +
                  " is listed there: start it without --join");
    }
    if (FLAGS_listen_address.empty()) {
      return Fail("--join needs --listen_address: the host:port this new member serves on");
    }
    if (raftkv::Status bad = raftkv::ParseEndpoint(FLAGS_listen_address); !bad.ok()) {
      return Fail("--listen_address '" + FLAGS_listen_address + "': " + bad.message());
    }
    *self_address = FLAGS_listen_address;
  } else if (self == nullptr) {
    std::string ids;
    for (uint64_t id : cluster->Ids()) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    return Fail("--id=" + std::to_string(FLAGS_id) + " is not listed in " + FLAGS_cluster_file +
                " (its members: " + ids +
                "; a new member being added to a running cluster needs --join)");
  } else {
    *self_address = self->address;
  }
  return 0;
}

// With TLS: checks this member's certificate against the host the others
// dial and logs what peers and clients need; 0 on success, else the exit
// code of the reported error.
static int CheckServerTls(const raftkv::ChannelSecurity& security,
                          const std::string& self_address) {
  // The host the others dial: the address without its port.
  std::string host = self_address.substr(0, self_address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string warning;
  if (raftkv::Status bad = raftkv::CheckServerCertificate(security, host, &warning); !bad.ok()) {
    return Fail(bad.message());
  }
  if (!warning.empty()) LOG(WARNING) << warning;
  LOG(INFO) << "TLS on: peers need a certificate signed by " << FLAGS_tls_ca_file
            << (FLAGS_peer_cert_allowed_names.empty()
                    ? std::string()
                    : " naming one of " + FLAGS_peer_cert_allowed_names)
            << (FLAGS_client_cert_required ? "; clients need one too" : "")
            << (security.token.empty() ? "" : "; client calls need the bearer token");
  return 0;
}

static raftkv::NodeOptions MakeNodeOptions(const raftkv::ClusterConfig& cluster,
                                           const std::string& self_address) {
  raftkv::NodeOptions node_options;
  node_options.id = FLAGS_id;
  node_options.cluster = cluster;
  node_options.data_dir = FLAGS_data_dir;
  node_options.core.tick_ms = FLAGS_tick_ms;
  node_options.core.election_ticks = FLAGS_election_ticks;
  node_options.core.heartbeat_ticks = FLAGS_heartbeat_ticks;
  node_options.core.max_inflight_appends = FLAGS_max_inflight_appends;
  node_options.core.max_append_entries = FLAGS_max_append_entries;
  node_options.core.max_append_bytes = FLAGS_max_append_bytes;
  node_options.core.max_inflight_bytes = FLAGS_max_inflight_bytes;
  node_options.core.promote_max_lag = FLAGS_promote_max_lag;
  node_options.log.max_segment_bytes = FLAGS_segment_bytes;
  node_options.log.preallocate_bytes = FLAGS_segment_preallocate_bytes;
  node_options.join = FLAGS_join;
  node_options.initial_cluster_token = FLAGS_initial_cluster_token;
  node_options.initial_cluster_state = FLAGS_initial_cluster_state == "existing"
                                           ? raftkv::NodeOptions::ClusterState::kExisting
                                           : raftkv::NodeOptions::ClusterState::kNew;
  node_options.self_address = self_address;
  node_options.snapshot_entries = FLAGS_snapshot_entries;
  node_options.snapshot_log_bytes = FLAGS_snapshot_log_bytes;
  node_options.snapshots_kept = FLAGS_snapshots_kept;
  node_options.snapshot_nice = FLAGS_snapshot_nice;
  node_options.history_revisions = FLAGS_history_revisions;
  node_options.history_bytes = FLAGS_history_bytes;
  node_options.quota_backend_bytes =
      FLAGS_quota_backend_bytes == 0 ? int64_t{2} << 30 : FLAGS_quota_backend_bytes;
  node_options.snapshot_history_revisions = FLAGS_snapshot_history_revisions;
  node_options.storage_engine = FLAGS_storage_engine == "rocksdb" ? raftkv::NodeOptions::StorageEngine::kRocksDb
                                                                  : raftkv::NodeOptions::StorageEngine::kMemory;
  return node_options;
}

static raftkv::PeerClientOptions MakePeerOptions(
    const std::shared_ptr<raftkv::ChannelSecurity>& security) {
  raftkv::PeerClientOptions peer_options;
  peer_options.cq_num = FLAGS_peer_cq_num;
  peer_options.threads_per_cq = FLAGS_peer_threads_per_cq;
  peer_options.append_timeout_ms = FLAGS_append_timeout_ms;
  peer_options.append_stream = FLAGS_peer_append_stream;
  peer_options.vote_timeout_ms = FLAGS_vote_timeout_ms;
  peer_options.snapshot_timeout_ms = FLAGS_snapshot_timeout_ms;
  peer_options.security = security;
  return peer_options;
}

static raftkv::ServerOptions MakeServerOptions(
    const std::string& self_address, size_t snapshot_chunk_bytes, raftkv::FaultInjector* faults,
    raftkv::CallAuthorizer* auth, const std::shared_ptr<raftkv::ChannelSecurity>& security) {
  raftkv::ServerOptions server_options;
  server_options.listen_address = FLAGS_listen_address;
  if (server_options.listen_address.empty()) {
    server_options.listen_address = "0.0.0.0" + self_address.substr(self_address.rfind(':'));
  }
  server_options.count_unary_calls = FLAGS_rpc_metrics;
  server_options.cq_num = FLAGS_server_cq_num;
  server_options.threads_per_cq = FLAGS_server_threads_per_cq;
  server_options.calls_per_cq = FLAGS_calls_per_cq;
  server_options.finish_on_cq = FLAGS_finish_on_cq;
  server_options.max_key_bytes = FLAGS_max_key_bytes;
  server_options.max_value_bytes = FLAGS_max_value_bytes;
  server_options.max_batch_ops = FLAGS_max_batch_ops;
  server_options.max_batch_bytes = FLAGS_max_batch_bytes;
  server_options.max_txn_ops = FLAGS_max_txn_ops;
  server_options.max_txn_result_bytes = FLAGS_max_txn_result_bytes;
  server_options.max_response_bytes = FLAGS_max_response_bytes;
  server_options.max_session_saved_bytes = FLAGS_max_session_saved_bytes;
  server_options.max_saved_bytes = FLAGS_max_saved_bytes;
  server_options.max_sessions = FLAGS_max_sessions;
  server_options.max_concurrent_streams = FLAGS_max_concurrent_streams;
  server_options.keepalive_min_time_ms = FLAGS_grpc_keepalive_min_time_ms;
  server_options.keepalive_interval_ms = FLAGS_grpc_keepalive_interval_ms;
  server_options.keepalive_timeout_ms = FLAGS_grpc_keepalive_timeout_ms;
  server_options.max_connection_idle_ms = FLAGS_max_connection_idle_ms;
  server_options.handshake_timeout_ms = FLAGS_grpc_handshake_timeout_ms;
  server_options.max_sync_threads = FLAGS_grpc_max_sync_threads;
  server_options.grpc_memory_bytes = FLAGS_grpc_memory_bytes;
  server_options.max_append_bytes = FLAGS_max_append_bytes;
  server_options.snapshot_chunk_bytes = snapshot_chunk_bytes;
  server_options.max_request_timeout_ms = FLAGS_max_request_timeout_ms;
  server_options.session_timeout_ms = FLAGS_session_timeout_ms;
  // Checked by CheckMemberFlags.
  (void)raftkv::ParseAutoCompaction(FLAGS_auto_compaction_mode, FLAGS_auto_compaction_retention,
                                    &server_options.auto_compaction);
  server_options.lease.min_ttl_s = FLAGS_min_lease_ttl_s;
  server_options.lease.max_ttl_s = FLAGS_max_lease_ttl_s;
  server_options.watch.max_watchers = FLAGS_max_watchers;
  server_options.watch.batch_bytes = FLAGS_watch_batch_bytes;
  server_options.watch.max_watchers_per_client = FLAGS_max_watchers_per_client;
  server_options.watch.stall_timeout_ms = FLAGS_watch_stall_timeout_ms;
  server_options.watch.progress_notify_interval_ms = FLAGS_watch_progress_notify_interval_ms;
  if (FLAGS_enable_test_faults) server_options.faults = faults;
  server_options.auth = auth;
  server_options.forward_to_leader = FLAGS_forward_to_leader;
  server_options.peer_security = security;
  return server_options;
}

// Starts the metrics endpoint when --metrics_port asks for one; 0 on
// success, else the exit code of the reported error.
static int StartMetrics(raftkv::RaftNode* node, raftkv::ServerMetrics* rpc_metrics,
                        std::unique_ptr<raftkv::MetricsEndpoint>* metrics) {
  if (FLAGS_metrics_port == 0) return 0;
  *metrics = std::make_unique<raftkv::MetricsEndpoint>(node, rpc_metrics, FLAGS_metrics_address,
                                                      FLAGS_metrics_port);
  const raftkv::Status s = (*metrics)->Start();
  if (!s.ok()) {
    return Fail("--metrics_port=" + std::to_string(FLAGS_metrics_port) +
                " --metrics_address=" + FLAGS_metrics_address + ": " + s.message());
  }
  return 0;
}

static void LogStarted(const raftkv::ServerOptions& server_options, const std::string& self_address,
                       const raftkv::ClusterConfig& cluster) {
  LOG(INFO) << "largest accepted message: " << raftkv::MaxReceiveMessageBytes(server_options)
            << " bytes (from --max_key_bytes, --max_value_bytes, --max_batch_bytes, "
               "--max_batch_ops, --max_append_bytes; every member should use the same limits)";
  LOG(INFO) << "raftkv-server " << raftkv::VersionString();
  LOG(INFO) << "raftkv-server member " << FLAGS_id << " at " << self_address
            << (FLAGS_join ? " (joining)" : "") << " started; cluster file lists "
            << cluster.members.size() << " members; data in " << FLAGS_data_dir;
}

// Waits for a termination signal (registered on *signals); returns its number.
static int WaitForSignal(boost::asio::io_context* signal_context,
                         boost::asio::signal_set* signals) {
  int signal_number = 0;
  signals->async_wait([&signal_number](const boost::system::error_code& error, int number) {
    if (!error) signal_number = number;
  });
  signal_context->run();  // returns once the wait above has completed
  return signal_number;
}

// Runs the member until a signal; every gRPC object it made is destroyed
// when it returns.
static int Serve(int argc, char** argv) {
  gflags::SetUsageMessage("raftkv-server --flagfile=conf/node1.flags  (see --help)");
  gflags::SetVersionString(raftkv::VersionString());
  // Bad flag file lines are reported as FILE:LINE before gflags reads them.
  if (raftkv::Status s = raftkv::CheckFlagFiles(argc, argv, &FlagOrigin()); !s.ok()) {
    std::cerr << "raftkv-server: " << s.message() << std::endl;
    return 2;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (!FLAGS_log_dir.empty()) {
    std::error_code ec;  // glog silently drops logs if its directory is missing
    std::filesystem::create_directories(FLAGS_log_dir, ec);
  }
  google::InitGoogleLogging(argv[0]);
  // A crash (SIGSEGV, SIGABRT from a failed assertion in a library...) prints
  // its stack to stderr. It also catches SIGTERM, but the signal_set below
  // takes SIGTERM and SIGINT back for the graceful stop.
  google::InstallFailureSignalHandler();
  RaiseOpenFileLimit();
  raftkv::InitGrpcRuntime();
  if (argc > 1) return Fail(std::string("unexpected argument '") + argv[1] + "'");
  if (int code = CheckMemberFlags(); code != 0) return code;
  if (int code = CheckLimitFlags(); code != 0) return code;

  auto security = std::make_shared<raftkv::ChannelSecurity>();
  std::unique_ptr<raftkv::CallAuthorizer> auth;
  if (int code = LoadSecurity(security, &auth); code != 0) return code;
  raftkv::ClusterConfig cluster;
  std::string self_address;
  if (int code = LoadCluster(&cluster, &self_address); code != 0) return code;
  if (security->tls()) {
    if (int code = CheckServerTls(*security, self_address); code != 0) return code;
  }
  const raftkv::NodeOptions node_options = MakeNodeOptions(cluster, self_address);

  // Termination signals, waited for in main once the member runs. Registered
  // before the first thread starts: a signal that arrives during start-up is
  // queued and handled by the wait below. Boost.Asio's signal_set works on
  // POSIX (a handler that wakes the io_context, whatever thread the signal
  // lands on: no signal mask) and on Windows (the C runtime's signal():
  // Ctrl-C is SIGINT, Ctrl-Break SIGBREAK).
  boost::asio::io_context signal_context;
  boost::asio::signal_set signals(signal_context, SIGINT, SIGTERM);
#ifdef SIGBREAK
  signals.add(SIGBREAK);
#endif

  std::unique_ptr<raftkv::RaftNode> node;
  raftkv::Status s = raftkv::RaftNode::Open(node_options, &node);
  if (!s.ok()) return Fail("cannot open " + FLAGS_data_dir + ": " + s.ToString());

  raftkv::PeerClientOptions peer_options = MakePeerOptions(security);
  raftkv::FaultInjector faults;
  if (FLAGS_enable_test_faults) {
    LOG(WARNING) << "--enable_test_faults: the Testing service can cut this node's peer links";
    peer_options.faults = &faults;
  }
  raftkv::RaftNode* raw_node = node.get();
  peer_options.cluster_id = [raw_node] { return raw_node->cluster_id(); };
  raftkv::PeerClient peers(
      cluster, FLAGS_id, peer_options,
      [raw_node](const raftkv::raft::Message& m) { raw_node->StepResponse(m); },
      [raw_node](uint64_t peer) { raw_node->ReportUnreachable(peer); },
      [raw_node](uint64_t index, uint64_t term, std::unique_ptr<raftkv::SnapshotSource>* out) {
        return raw_node->OpenSnapshotSource(index, term, out);
      });

  raftkv::ServerOptions server_options = MakeServerOptions(
      self_address, peer_options.snapshot_chunk_bytes, &faults, auth.get(), security);
  // The gRPC server's per-method counters; the metrics endpoint, which starts
  // first and stops last, reads them.
  raftkv::ServerMetrics rpc_metrics;
  server_options.metrics = &rpc_metrics;
  raftkv::AdminServiceImpl admin(raw_node, FLAGS_max_request_timeout_ms, auth.get(), &rpc_metrics);
  server_options.admin_service = &admin;
  server_options.snapshot_streamer = &admin;
  // Metrics first: a port that cannot be bound stops the start-up before
  // this member serves anything.
  std::unique_ptr<raftkv::MetricsEndpoint> metrics;
  if (int code = StartMetrics(raw_node, &rpc_metrics, &metrics); code != 0) return code;
  raftkv::GrpcServer server(server_options, raw_node);
  s = server.Start();
  if (!s.ok()) return Fail(s.message());
  node->Start(&peers);
  LogStarted(server_options, self_address, cluster);

  const int signal_number = WaitForSignal(&signal_context, &signals);
  LOG(INFO) << "signal " << signal_number << ": shutting down";
  if (metrics) metrics->Stop();  // before the node it reads
  if (FLAGS_shutdown_transfer_ms > 0) HandOverLeadership(raw_node, FLAGS_shutdown_transfer_ms);
  server.Shutdown(500);
  node->Stop();
  peers.Shutdown();
  server.Join();
  node.reset();
  return 0;
}

int main(int argc, char** argv) {
  const int code = Serve(argc, argv);
  const auto wait_start = std::chrono::steady_clock::now();
  if (!raftkv::WaitForGrpcShutdown(std::chrono::seconds(5))) {
    // A connection attempt to an unreachable peer can outlast the wait; the
    // state is durable, so leave without the exit handlers that would race
    // with gRPC's threads.
    LOG(WARNING) << "gRPC still running 5 s after shutdown; exiting without exit handlers";
    google::FlushLogFiles(google::GLOG_INFO);
    std::_Exit(code);
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - wait_start);
  LOG_IF(INFO, waited.count() >= 100) << "gRPC shut down " << waited.count() << " ms after the member";
  if (google::IsGoogleLoggingInitialized()) google::ShutdownGoogleLogging();
  return code;
}
