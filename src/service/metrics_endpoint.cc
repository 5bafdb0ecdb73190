#include "service/metrics_endpoint.h"

#include <glog/logging.h>

#include <string>

namespace raftkv {

namespace {

double D(uint64_t v) { return static_cast<double>(v); }

double Load(const std::atomic<uint64_t>& v) { return D(v.load(std::memory_order_relaxed)); }

}  // namespace

std::string RenderNodeMetrics(const NodeStatus& st, const NodeMetrics& m,
                              double proposals_per_second) {
  ExpositionWriter w;
  // ---- state (gauges, from GetStatus) ----
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
  w.Single("raftkv_sessions", "gauge",
           "Client sessions in the state machine.",
           D(st.sessions));
  uint64_t voters = 0, learners = 0;
  for (const MemberInfo& mi : st.members) (mi.voter ? voters : learners)++;
  w.Family("raftkv_config_members", "gauge",
           "Members of the configuration in effect, by kind (voter or learner).");
  w.Sample("raftkv_config_members", {{"kind", "voter"}}, D(voters));
  w.Sample("raftkv_config_members", {{"kind", "learner"}}, D(learners));

  // ---- replication (leader only) ----
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
      const uint64_t lag = st.last_log_index > mi.match_index ? st.last_log_index - mi.match_index : 0;
      w.Sample("raftkv_peer_replication_lag_entries", {{"peer", std::to_string(mi.id)}}, D(lag));
    }
  }

  // ---- counters ----
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
  w.Single("raftkv_snapshots_sent_total", "counter",
           "InstallSnapshot sends this member decided on as leader (a follower needed compacted "
           "entries; a repeat while the transfer to that peer still runs counts again).",
           Load(m.snapshots_sent));
  w.Single("raftkv_snapshots_installed_total", "counter",
           "Snapshots received from a leader and installed by this member.",
           Load(m.snapshots_installed));

  // ---- histograms ----
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
  return w.Take();
}

MetricsEndpoint::MetricsEndpoint(RaftNode* node, const std::string& address, int port)
    : node_(node), address_(address), server_([&] {
        HttpServerOptions o;
        o.address = address;
        o.port = port;
        return o;
      }()) {
  server_.Handle("/metrics", [this](const HttpRequest&) {
    HttpResponse r;
    r.content_type = kMetricsContentType;
    r.body = RenderNodeMetrics(node_->GetStatus(), node_->metrics(), proposal_rate_.PerSecond());
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
