// RaftNode: one member of the cluster. It owns the consensus core, the log
// store, the hard-state file and the KV state machine, and runs two threads:
//
//  - the I/O loop ("raft-io"): repeatedly takes the core's Ready, sends the
//    leader's AppendEntries, persists entries and hard state with one fsync
//    (group commit: everything proposed since the previous fsync), sends the
//    responses and votes that required durability, applies committed entries
//    and completes waiting client calls;
//  - the ticker: advances the core's logical clock every tick_ms and expires
//    client calls whose deadline passed.
//
// gRPC threads call Propose/Read/StepRequest/StepResponse; these only touch
// the core under `mu_` and wake the I/O loop, never block on disk or network.
//
// Lock order: mu_ before the state machine's internal lock. Callbacks are
// always invoked without mu_ held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <grpcpp/support/status.h>

#include "raft/raft.h"
#include "service/cluster_config.h"
#include "storage/hard_state.h"
#include "storage/kv_state_machine.h"
#include "storage/log_store.h"
#include "storage/snapshot_store.h"

namespace raftkv {

using Clock = std::chrono::steady_clock;

struct NodeOptions {
  uint64_t id = 0;
  ClusterConfig cluster;
  std::string data_dir;
  int tick_ms = 50;
  int election_ticks = 10;
  int heartbeat_ticks = 2;
  size_t max_inflight_appends = 64;
  size_t max_append_entries = 4096;
  size_t max_append_bytes = 1 << 20;
  SegmentedLogOptions log;
  // A member not listed in `cluster` (a new server being added): it starts
  // without a vote, at `self_address`, and waits for the leader to replicate
  // a configuration. Without `join`, an id missing from `cluster` is an error.
  bool join = false;
  std::string self_address;
  // Automatic snapshots: taken when this many entries were applied since the
  // last snapshot (0: never by count), or when the log files hold more than
  // snapshot_log_bytes (0: never by size). raftkvctl snapshot takes one on
  // demand either way.
  uint64_t snapshot_entries = 100000;
  uint64_t snapshot_log_bytes = 512ull << 20;
  // Snapshot files kept (>= 2: the previous one is the fallback when the
  // newest is damaged; the log is kept back to the oldest kept snapshot).
  size_t snapshots_kept = 2;
  uint64_t promote_max_lag = 1000;
};

// The result of a client call handled by the node.
struct Outcome {
  grpc::Status status;
  uint64_t index = 0;  // write: log index applied; read: index the read waited for
  uint64_t term = 0;
  ApplyResult apply;
  // For a failed write: true when the command is known not to have been
  // applied (never proposed, or its index went to another leader's entry), so
  // retrying it cannot apply it twice. False when the outcome is unknown.
  bool not_applied = false;
  // ABORTED because the write's session is unknown or expired.
  bool session_expired = false;
  // For FAILED_PRECONDITION (not leader): the leader, when known.
  uint64_t leader_id = 0;
  std::string leader_address;
};
using OutcomeCallback = std::function<void(Outcome)>;

struct MemberInfo {
  uint64_t id = 0;
  std::string address;
  bool voter = false;
  uint64_t match_index = 0;  // leader only
  std::string state;         // leader only: "self", "probe", "replicate", "snapshot"
};

struct NodeStatus {
  uint64_t id = 0;
  std::string address;
  raft::Role role = raft::Role::kFollower;
  uint64_t term = 0;
  uint64_t commit_index = 0;
  uint64_t applied_index = 0;
  uint64_t leader_id = 0;
  std::string leader_address;
  uint64_t last_log_index = 0;
  uint64_t durable_index = 0;
  std::vector<uint64_t> voters;
  size_t sessions = 0;
  // Configuration in effect (members in id order), its entry's index (0:
  // bootstrap) and whether that is committed.
  std::vector<MemberInfo> members;
  uint64_t config_index = 0;
  bool config_committed = false;
  uint64_t snapshot_index = 0;  // newest snapshot (0: none)
  uint64_t snapshot_term = 0;
  uint64_t first_log_index = 1;  // in memory
};

struct SnapshotInfo {
  uint64_t last_index = 0;
  uint64_t last_term = 0;
  uint64_t bytes = 0;
  std::string path;
};

// How the node sends messages to peers (implemented over gRPC by PeerClient).
class PeerSender {
 public:
  virtual ~PeerSender() = default;
  virtual void Send(raft::Message m) = 0;
  // The configuration in effect changed: dial members at these addresses
  // (members not in it are no longer needed). Called before any message of
  // the Ready that carried the change is sent.
  virtual void UpdateMembers(const MembershipConfig& config) { (void)config; }
};

class RaftNode {
 public:
  // Opens (or creates) the data directory, recovers the hard state and log,
  // and builds the core. Refuses corrupt data with a clear error.
  static Status Open(const NodeOptions& options, std::unique_ptr<RaftNode>* node);
  ~RaftNode();

  // Starts the I/O loop and the ticker; `sender` must outlive Stop().
  void Start(PeerSender* sender);
  // Stops both threads and fails every waiting call with UNAVAILABLE.
  void Stop();

  // Replicates `command` (a serialized Command). `done` runs once: OK after
  // the entry is committed and applied; FAILED_PRECONDITION if not leader;
  // UNAVAILABLE if leadership was lost and the entry was overwritten;
  // DEADLINE_EXCEEDED at `deadline` (outcome unknown).
  void Propose(std::string command, Clock::time_point deadline, OutcomeCallback done);
  // Linearizable read barrier (ReadIndex). `done` runs with OK once this node,
  // confirmed leader by a quorum, has applied the read index: the caller then
  // reads the state machine.
  void ReadBarrier(Clock::time_point deadline, OutcomeCallback done);

  // A request from a peer; `reply` receives the core's response after the
  // state it reflects is durable, or nullptr if the node stops first.
  using ReplyCallback = std::function<void(const raft::Message*)>;
  void StepRequest(raft::Message request, ReplyCallback reply);
  void StepResponse(const raft::Message& response);
  void ReportUnreachable(uint64_t peer);

  // Takes a snapshot now (any role), unless one is being taken: then `done`
  // gets that one's result. Runs `done` from a background thread.
  void TakeSnapshot(std::function<void(Status, SnapshotInfo)> done);
  // Leader only: a single-server membership change. `done`: OK with the
  // configuration entry's index once it is committed; FAILED_PRECONDITION /
  // UNAVAILABLE when not leader (as Propose); FAILED_PRECONDITION with the
  // core's reason when refused (invalid, another change pending, learner
  // not caught up); DEADLINE_EXCEEDED at `deadline`.
  void ChangeMembership(const raft::MembershipChange& change, Clock::time_point deadline,
                        OutcomeCallback done);
  // Leader only: transfers leadership to `target`. `done`: OK (leader_id =
  // target) once this node learns that `target` leads a newer term;
  // FAILED_PRECONDITION when refused or given up; DEADLINE_EXCEEDED.
  void TransferLeadership(uint64_t target, Clock::time_point deadline, OutcomeCallback done);

  // InstallSnapshot, follower side: receives a file into the snapshot store
  // (the service then steps the metadata with StepRequest()).
  Status BeginReceiveSnapshot(uint64_t last_index, uint64_t last_term,
                              std::unique_ptr<SnapshotReceiver>* out);
  // InstallSnapshot, leader side: opens snap-<last_index>-<last_term> for
  // streaming (NotFound if it was pruned: the core will ask again).
  Status OpenSnapshotSource(uint64_t last_index, uint64_t last_term,
                            std::unique_ptr<SnapshotFileSource>* out);
  // Address of `id` in the configuration in effect, or "" if not a member.
  std::string AddressOf(uint64_t id) const;

  NodeStatus GetStatus() const;
  const KvStateMachine& state_machine() const { return state_machine_; }
  uint64_t id() const { return options_.id; }
  const ClusterConfig& cluster() const { return options_.cluster; }
  // Fills the leader fields of a FAILED_PRECONDITION outcome.
  Outcome NotLeader() const;

 private:
  RaftNode(const NodeOptions& options, std::unique_ptr<SegmentedLog> log,
           std::unique_ptr<HardStateFile> hard_state_file, const HardState& hard_state,
           std::vector<Entry> entries);
  void IoLoop();
  void TickLoop();
  Outcome NotLeaderLocked() const;  // requires mu_
  void ApplyCommitted(const std::vector<Entry>& committed,
                      std::vector<std::function<void()>>* completions);
  void ReleaseReads(std::vector<std::function<void()>>* completions);  // requires mu_
  void ExpireDeadlines(std::vector<std::function<void()>>* completions);  // requires mu_

  const NodeOptions options_;
  std::unique_ptr<SegmentedLog> log_;                // used by the I/O loop only
  std::unique_ptr<HardStateFile> hard_state_file_;  // used by the I/O loop only
  KvStateMachine state_machine_;
  PeerSender* sender_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable wake_;  // the I/O loop waits here for a Ready
  std::condition_variable stop_signal_;  // the ticker sleeps here; signalled by Stop()
  bool stopping_ = false;         // guarded by mu_
  raft::Raft core_;               // guarded by mu_

  struct PendingWrite {
    uint64_t term;
    Clock::time_point deadline;
    OutcomeCallback done;
  };
  // Proposals waiting for their entry to be applied, by log index. Guarded by mu_.
  std::map<uint64_t, PendingWrite> pending_writes_;
  struct PendingRead {
    Clock::time_point deadline;
    OutcomeCallback done;
    uint64_t index = 0;  // set once confirmed by a quorum; 0 while waiting
  };
  // Reads by id: waiting for a quorum, then for the apply index. Guarded by mu_.
  std::map<uint64_t, PendingRead> pending_reads_;
  // Confirmed reads waiting for the apply index: read index -> read id.
  std::multimap<uint64_t, uint64_t> confirmed_reads_;  // guarded by mu_
  uint64_t next_read_id_ = 1;  // guarded by mu_
  // Peer requests waiting for their durable response, by rpc id. Guarded by mu_.
  std::unordered_map<uint64_t, ReplyCallback> pending_replies_;
  uint64_t next_rpc_id_ = 1;  // guarded by mu_
  uint64_t applied_index_ = 0;  // guarded by mu_ (the state machine has its own copy)

  std::thread io_thread_;
  std::thread tick_thread_;
  int lock_fd_ = -1;  // flock on <data_dir>/LOCK: one server per data directory
};

}  // namespace raftkv
