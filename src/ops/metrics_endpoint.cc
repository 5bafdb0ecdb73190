#include "ops/metrics_endpoint.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

#include "common/version.h"
#include "proto/internal.h"

namespace raftkv {

namespace {

double D(uint64_t v) { return static_cast<double>(v); }

double Load(const std::atomic<uint64_t>& v) { return D(v.load(std::memory_order_relaxed)); }

}  // namespace

uint64_t DirectoryBytes(const std::string& dir) {
  std::error_code ec;
  uint64_t bytes = 0;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    // A file removed meanwhile (a snapshot pruned) is skipped, not an error.
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    const uintmax_t size = it->file_size(file_ec);
    if (!file_ec) bytes += size;
  }
  return bytes;
}

namespace {

// The build: version, git commit and client API.
void RenderBuild(ExpositionWriter& w) {
  std::string api = KV::service_full_name();  // "raftkv.v1.KV": the API is its package
  api = api.substr(0, api.rfind('.'));
  w.Family("raftkv_build_info", "gauge",
           "Always 1; the labels name the server's version, git commit and client API.");
  w.Sample("raftkv_build_info",
           {{"version", Version()}, {"git_commit", GitCommit()}, {"api", api}}, 1);
}

// This member's Raft state (gauges, from GetStatus).
void RenderRaftState(ExpositionWriter& w, const NodeStatus& st) {
  w.Single("raftkv_member_id", "gauge",
           "Raft id of this member.",
           D(st.id));
  w.Family("raftkv_role", "gauge",
           "1 for the role this member has now, 0 for the others.");
  for (raft::Role role : {raft::Role::kFollower, raft::Role::kPreCandidate,
                          raft::Role::kCandidate, raft::Role::kLeader}) {
    w.Sample("raftkv_role", {{"role", raft::RoleName(role)}}, st.role == role ? 1 : 0);
  }
  w.Single("raftkv_term", "gauge",
           "Current Raft term of this member.",
           D(st.term));
  w.Single("raftkv_leader_id", "gauge",
           "Id of the leader this member knows of (0: none).",
           D(st.leader_id));
  w.Single("raftkv_has_leader", "gauge",
           "1 if this member knows a leader (itself included), else 0.",
           st.leader_id != 0 ? 1 : 0);
  w.Single("raftkv_is_leader", "gauge",
           "1 if this member is the leader, else 0.",
           st.role == raft::Role::kLeader ? 1 : 0);
  w.Single("raftkv_commit_index", "gauge",
           "Highest log index known to be committed.",
           D(st.commit_index));
  w.Single("raftkv_applied_index", "gauge",
           "Highest log index applied to this member's state machine.",
           D(st.applied_index));
  w.Single("raftkv_last_log_index", "gauge",
           "Index of the last entry in this member's log.",
           D(st.last_log_index));
  w.Single("raftkv_durable_index", "gauge",
           "Index of the last log entry synced to disk on this member.",
           D(st.durable_index));
  w.Single("raftkv_first_log_index", "gauge",
           "Index of the first entry in the in-memory log (earlier ones are in a snapshot).",
           D(st.first_log_index));
  w.Single("raftkv_snapshot_index", "gauge",
           "Last index covered by the newest snapshot (0: none).",
           D(st.snapshot_index));
}

// The size of this member's state (sessions, keys, leases, watchers, files)
// and the members of its configuration (gauges).
void RenderStoreState(ExpositionWriter& w, const NodeStatus& st, const NodeMetrics& m,
                      const ScrapeExtras& x) {
  w.Single("raftkv_sessions", "gauge",
           "Client sessions in the state machine.",
           D(st.sessions));
  w.Single("raftkv_revision", "gauge",
           "Revision of the store in this member's applied state.",
           static_cast<double>(st.revision));
  w.Single("raftkv_keys", "gauge",
           "Keys in this member's state machine.",
           D(x.keys));
  w.Single("raftkv_leases", "gauge",
           "Leases in this member's state machine.",
           D(x.leases));
  w.Single("raftkv_session_saved_bytes", "gauge",
           "Bytes of the answers the client sessions keep for their retries (bounded by "
           "--max_saved_bytes).",
           D(x.saved_answer_bytes));
  w.Single("raftkv_backend_bytes", "gauge",
           "Bytes the key-value state holds, as the backend quota counts them (keys and values, "
           "the history kept, saved answers, leases).",
           D(x.backend_bytes));
  w.Single("raftkv_store_bytes", "gauge",
           "Bytes the key-value store's engine holds (RocksDB: live SST files and memtables not "
           "yet flushed; memory engine: keys and values).",
           D(x.store_bytes));
  w.Single("raftkv_store_memtable_memory_bytes", "gauge",
           "Memory the on-disk store's memtables take, flushed ones a reader still holds included "
           "(0 on the memory engine).",
           D(x.store_memtable_memory_bytes));
  w.Single("raftkv_quota_backend_bytes", "gauge",
           "The backend quota (--quota_backend_bytes; 0: none).",
           static_cast<double>(std::max<int64_t>(x.quota_backend_bytes, 0)));
  w.Family("raftkv_alarm_active", "gauge",
           "1 while an alarm of this type is raised on any member (NOSPACE: writes that add "
           "data are refused).");
  w.Sample("raftkv_alarm_active", {{"alarm", "NOSPACE"}}, x.nospace_alarm ? 1 : 0);
  w.Single("raftkv_watchers", "gauge",
           "Watch streams this member serves.",
           D(x.watchers));
  w.Single("raftkv_log_bytes", "gauge",
           "Bytes of this member's log segment files.",
           Load(m.log_bytes));
  w.Single("raftkv_snapshot_bytes", "gauge",
           "Bytes of the files in this member's snapshot directory (a snapshot being written or "
           "received included).",
           D(x.snapshot_bytes));
  uint64_t voters = 0, learners = 0;
  for (const MemberInfo& mi : st.members) (mi.voter ? voters : learners)++;
  w.Family("raftkv_config_members", "gauge",
           "Members of the configuration in effect, by kind (voter or learner).");
  w.Sample("raftkv_config_members", {{"kind", "voter"}}, D(voters));
  w.Sample("raftkv_config_members", {{"kind", "learner"}}, D(learners));
}

// Replication to each peer (samples on the leader only).
void RenderReplication(ExpositionWriter& w, const NodeStatus& st) {
  const bool leader = st.role == raft::Role::kLeader;
  w.Family("raftkv_peer_match_index", "gauge",
           "Leader only: highest log index known to be durable on the peer.");
  if (leader) {
    for (const MemberInfo& mi : st.members) {
      if (mi.id == st.id) continue;
      w.Sample("raftkv_peer_match_index", {{"peer", std::to_string(mi.id)}}, D(mi.match_index));
    }
  }
  w.Family("raftkv_peer_replication_lag_entries", "gauge",
           "Leader only: the leader's last log index minus the peer's match index.");
  if (leader) {
    for (const MemberInfo& mi : st.members) {
      if (mi.id == st.id) continue;
      const uint64_t lag =
          st.last_log_index > mi.match_index ? st.last_log_index - mi.match_index : 0;
      w.Sample("raftkv_peer_replication_lag_entries", {{"peer", std::to_string(mi.id)}}, D(lag));
    }
  }
}

// The node's counters and its proposal rate.
void RenderCounters(ExpositionWriter& w, const NodeMetrics& m, double proposals_per_second,
                    const ScrapeExtras& x) {
  w.Single("raftkv_proposals_total", "counter",
           "Client commands this member accepted into its log as leader.",
           Load(m.proposals));
  w.Single("raftkv_proposals_refused_total", "counter",
           "Proposals refused (not leader, leadership transfer, shutting down).",
           Load(m.proposals_refused));
  w.Single("raftkv_proposals_per_second", "gauge",
           "Proposals accepted per second over the last " +
               std::to_string(MetricsEndpoint::kRateWindow.count()) +
               " s, computed by the server (rate(raftkv_proposals_total[...]) is the same from "
               "Prometheus).",
           proposals_per_second);
  w.Single("raftkv_applied_entries_total", "counter",
           "Committed log entries applied to the state machine on this member.",
           Load(m.applied_entries));
  w.Single("raftkv_io_loop_cycles_total", "counter",
           "Passes of the I/O loop (the thread that persists and sends), one per wake-up.",
           Load(m.io_loop_cycles));
  w.Single("raftkv_slow_io_loop_cycles_total", "counter",
           "Passes of the I/O loop that took half the shortest election timeout or more: heartbeats "
           "waited that long (the server log says what the time went to).",
           Load(m.slow_io_cycles));
  w.Single("raftkv_apply_wakeups_total", "counter",
           "Wake-ups of the apply thread (each applies the entries handed since the last and "
           "completes the calls they answer).",
           Load(m.apply_wakeups));
  w.Single("raftkv_leader_changes_total", "counter",
           "Times this member saw the leader change to another member.",
           Load(m.leader_changes));
  w.Single("raftkv_snapshots_taken_total", "counter",
           "Snapshots written by this member.",
           Load(m.snapshots_taken));
  w.Single("raftkv_snapshot_failures_total", "counter",
           "Snapshots this member failed to write (its log is kept and grows meanwhile).",
           Load(m.snapshot_failures));
  w.Single("raftkv_storage_errors_total", "counter",
           "Writes of the hard state, the log or the key-value store the disk refused (full, or "
           "an I/O error); each is retried.",
           Load(m.storage_errors) + D(x.store_write_errors));
  w.Single("raftkv_storage_stalled", "gauge",
           "1 while this member waits to retry a write the disk refused: it acknowledges "
           "nothing meanwhile; while the log or hard state waits it also answers no peer and, as "
           "leader, sends no heartbeat.",
           (Load(m.storage_stalled) != 0 || x.store_stalled) ? 1 : 0);
  w.Single("raftkv_snapshots_sent_total", "counter",
           "InstallSnapshot sends this member decided on as leader (a follower needed compacted "
           "entries; a repeat while the transfer to that peer still runs counts again).",
           Load(m.snapshots_sent));
  w.Single("raftkv_snapshots_installed_total", "counter",
           "Snapshots received from a leader and installed by this member.",
           Load(m.snapshots_installed));
}

// The node's histograms.
void RenderHistograms(ExpositionWriter& w, const NodeMetrics& m) {
  w.Family("raftkv_log_fsync_duration_seconds", "histogram",
           "Duration of the log's syncs (fdatasync of the segment, plus the directory's fsync "
           "when files were created or removed); one per group commit.");
  w.HistogramSamples("raftkv_log_fsync_duration_seconds", {}, m.fsync_seconds.Collect());
  w.Family("raftkv_append_entries_batch_entries", "histogram",
           "Entries per AppendEntries carrying entries (heartbeats excluded), sent by this member "
           "as leader or received as follower.");
  w.HistogramSamples("raftkv_append_entries_batch_entries", {{"direction", "sent"}},
                     m.append_entries_sent.Collect());
  w.HistogramSamples("raftkv_append_entries_batch_entries", {{"direction", "received"}},
                     m.append_entries_received.Collect());
}

// The process (the standard names of the Prometheus client libraries).
void RenderProcess(ExpositionWriter& w, const ProcessStats& p) {
  w.Single("process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.",
           p.cpu_seconds);
  w.Single("process_resident_memory_bytes", "gauge",
           "Resident memory size in bytes.",
           D(p.resident_bytes));
  w.Single("process_virtual_memory_bytes", "gauge",
           "Virtual memory size in bytes.",
           D(p.virtual_bytes));
  w.Single("process_open_fds", "gauge",
           "Number of open file descriptors.",
           D(p.open_fds));
  w.Single("process_max_fds", "gauge",
           "Maximum number of open file descriptors.",
           D(p.max_fds));
  w.Single("process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.",
           p.start_time_seconds);
}

}  // namespace

std::string RenderNodeMetrics(const NodeStatus& st, const NodeMetrics& m,
                              double proposals_per_second, const ScrapeExtras& x) {
  ExpositionWriter w;
  RenderBuild(w);
  RenderRaftState(w, st);
  RenderStoreState(w, st, m, x);
  RenderReplication(w, st);
  RenderCounters(w, m, proposals_per_second, x);
  RenderHistograms(w, m);
  if (x.server != nullptr) x.server->Render(&w);  // the gRPC server
  if (x.process) RenderProcess(w, *x.process);
  return w.Take();
}

MetricsEndpoint::MetricsEndpoint(RaftNode* node, const ServerMetrics* rpc,
                                 const std::string& address, int port)
    : node_(node), rpc_(rpc), address_(address), server_([&] {
        HttpServerOptions o;
        o.address = address;
        o.port = port;
        return o;
      }()) {
  server_.Handle("/metrics", [this](const HttpRequest&) {
    HttpResponse r;
    r.content_type = kMetricsContentType;
    ScrapeExtras x;
    x.keys = node_->state_machine().Size();
    x.leases = node_->state_machine().LeaseCount();
    x.saved_answer_bytes = node_->state_machine().SavedAnswerBytes();
    x.backend_bytes = node_->state_machine().StateBytes();
    x.quota_backend_bytes = node_->quota_backend_bytes();
    x.nospace_alarm = node_->state_machine().NoSpaceAlarm();
    x.store_write_errors = node_->state_machine().StoreWriteErrors();
    x.store_stalled = node_->state_machine().StoreStalled();
    const BackendStats store = node_->state_machine().StoreStats();
    x.store_bytes = store.StoredBytes();
    x.store_memtable_memory_bytes = store.memtable_memory_bytes;
    x.watchers = rpc_ != nullptr ? rpc_->Watchers() : 0;
    x.snapshot_bytes = DirectoryBytes(node_->snapshot_dir());
    x.server = rpc_;
    ProcessStats process;
    if (ReadProcessStats(&process)) x.process = process;
    r.body = RenderNodeMetrics(node_->GetStatus(), node_->metrics(), proposal_rate_.PerSecond(), x);
    return r;
  });
  server_.Every(std::chrono::seconds(1), [this] {
    proposal_rate_.Sample(Clock::now(), node_->metrics().proposals.load(std::memory_order_relaxed));
  });
}

Status MetricsEndpoint::Start() {
  // The first sample, so the rate is defined one second after start.
  proposal_rate_.Sample(Clock::now(), node_->metrics().proposals.load(std::memory_order_relaxed));
  Status s = server_.Start();
  if (s.ok()) {
    LOG(INFO) << "metrics: serving http://" << address_ << ":" << server_.port() << "/metrics";
  }
  return s;
}

}  // namespace raftkv
