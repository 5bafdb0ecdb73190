// RaftNode: one member of the cluster. It owns the consensus core, the log
// store, the hard-state file and the KV state machine, and runs these threads:
//
//  - the I/O loop ("raft-io"): repeatedly takes the core's Ready, sends the
//    leader's AppendEntries, persists entries and hard state with one fsync
//    (group commit: everything proposed since the previous fsync), sends the
//    responses and votes that required durability, and hands the committed
//    entries to the apply thread;
//  - the apply thread: applies committed entries to the state machine (it
//    may wait for a snapshot capture; the I/O loop goes on meanwhile) and
//    completes the client calls they answer, and every other completion the
//    I/O loop decides (reads, failures): no client call is completed on the
//    thread that fsyncs;
//  - the ticker: advances the core's logical clock every tick_ms and expires
//    client calls whose deadline passed;
//  - a snapshot thread, while a snapshot is being taken: captures the state
//    machine, writes the file, and hands the result back to the I/O loop,
//    which compacts the core's log and the log files.
//
// gRPC threads call Propose/Read/StepRequest/StepResponse; these only touch
// the core under `mu_` and wake the I/O loop, never block on disk or network.
//
// Lock order: snapshot_mu_ (the snapshot store) before mu_ before the state
// machine's internal lock. Callbacks are always invoked without mu_ held.
//
// Storage on disk (<data_dir>): LOCK, hardstate, log/ (SegmentedLog), snap/
// (SnapshotStore). Restart = the newest intact snapshot + the log entries
// after it; see Open() and doc/architecture.md "Snapshots and log compaction".
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <grpcpp/support/status.h>

#include "raft/raft.h"
#include "service/cluster_config.h"
#include "service/metrics.h"
#include "storage/file_util.h"
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
  // The consensus core's settings: timing (tick_ms is also the ticker's
  // period), flow control, promote_max_lag. Its id, bootstrap, voters and
  // seed are filled in by the node from the fields here.
  raft::Config core;
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
  // A one-way request from a peer (kTimeoutNow): the core produces no
  // response, so there is nothing to wait for.
  void StepOneWay(const raft::Message& request);
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
  // Counters and histograms (the /metrics endpoint); safe from any thread.
  const NodeMetrics& metrics() const { return metrics_; }
  const KvStateMachine& state_machine() const { return *state_machine_; }
  uint64_t id() const { return options_.id; }
  const ClusterConfig& cluster() const { return options_.cluster; }
  // Fills the leader fields of a FAILED_PRECONDITION outcome.
  Outcome NotLeader() const;

 private:
  // What Open() recovered, handed to the constructor.
  struct Recovered {
    std::unique_ptr<SegmentedLog> log;
    std::unique_ptr<HardStateFile> hard_state_file;
    std::unique_ptr<SnapshotStore> snapshots;
    std::unique_ptr<KvStateMachine> state_machine;  // restored from `base` (if any)
    HardState hard_state;
    raft::SnapshotRef base;       // the snapshot loaded (index 0: none)
    std::vector<Entry> entries;   // the log after base.index
  };
  // The result of taking a snapshot, handed from the snapshot thread to the
  // I/O loop.
  struct SnapshotResult {
    Status status;
    SnapshotInfo info;
    bool written = false;  // false: nothing new was written (status says why, or it existed)
    double capture_ms = 0;
    double write_ms = 0;
  };
  using SnapshotCallback = std::function<void(Status, SnapshotInfo)>;

  RaftNode(const NodeOptions& options, Recovered recovered);
  void IoLoop();
  void TickLoop();
  // The I/O loop's handling of one Ready (everything but taking it).
  void ProcessReady(raft::Ready& rd, std::vector<std::function<void()>>* completions);
  // Ready::snapshot: restore the state machine from the installed file and
  // reset the log to start after it.
  void InstallSnapshot(const raft::SnapshotRef& snap, std::vector<std::function<void()>>* completions);
  // Starts a snapshot on the snapshot thread if one is due or requested and
  // none is running (I/O loop).
  void MaybeStartSnapshot();
  // The snapshot thread's body.
  void TakeSnapshotInBackground();
  // I/O loop, after the core was compacted to a finished snapshot (under
  // mu_, between two Readys): logs it, prunes old files and compacts the log
  // files.
  void FinishSnapshot(SnapshotResult result);
  // Deletes snapshot files beyond snapshots_kept and removes the log
  // segments wholly below the oldest kept snapshot (I/O loop). With `wait`
  // false it gives up if the snapshot store is busy (a snapshot being
  // written): the next snapshot prunes.
  void PruneAndCompactLog(bool wait);
  Outcome NotLeaderLocked() const;  // requires mu_
  std::string AddressOfLocked(uint64_t id) const;  // requires mu_
  // The apply thread's body: applies the committed entries the I/O loop
  // hands over, completes the calls they answer, and runs the completions
  // the I/O loop hands over, so the thread that fsyncs never applies and
  // never completes a call.
  void ApplyLoop();
  // Applies `entries` (consecutive, committed) to the state machine, waiting
  // if a snapshot capture holds it, and collects the completions of the
  // writes and reads they answer (apply thread).
  void ApplyEntries(const std::deque<Entry>& entries,
                    std::vector<std::function<void()>>* completions);
  // I/O loop: hands committed entries and completions to the apply thread.
  void HandToApply(std::vector<Entry> entries, std::vector<std::function<void()>>* completions);
  // I/O loop: waits until the apply thread has applied everything handed to
  // it (before a snapshot from the leader replaces the state machine).
  void WaitApplied();
  void ReleaseReads(std::vector<std::function<void()>>* completions);  // requires mu_
  void ExpireDeadlines(std::vector<std::function<void()>>* completions);  // requires mu_
  // Completes leadership transfers that succeeded, were given up or expired.
  void CheckTransfers(std::vector<std::function<void()>>* completions);  // requires mu_

  const NodeOptions options_;
  NodeMetrics metrics_;  // before log_: it observes the log's syncs
  std::unique_ptr<SegmentedLog> log_;                // used by the I/O loop only
  std::unique_ptr<HardStateFile> hard_state_file_;  // used by the I/O loop only
  // Written by the I/O loop only (Apply, Restore); read by any thread.
  std::unique_ptr<KvStateMachine> state_machine_;
  PeerSender* sender_ = nullptr;

  // The snapshot store is shared by the I/O loop (prune), the snapshot
  // thread (write), the InstallSnapshot receiver and the leader's senders
  // (open a file): every call goes through snapshot_mu_. Lock order:
  // snapshot_mu_ before mu_.
  mutable std::mutex snapshot_mu_;
  const std::string snapshot_dir_;            // <data_dir>/snap
  std::unique_ptr<SnapshotStore> snapshots_;  // guarded by snapshot_mu_

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
  // Proposals (and membership changes) waiting for their entry to be
  // applied, by log index. Guarded by mu_.
  std::map<uint64_t, PendingWrite> pending_writes_;
  // ---- the apply thread ----
  // Work handed from the I/O loop to the apply thread, guarded by apply_mu_
  // (taken alone: never while holding mu_, and the apply thread takes mu_
  // only after releasing it). apply_cv_ is notified when work is queued,
  // when a batch is done (applying_ becomes false) and on stop.
  std::mutex apply_mu_;
  std::condition_variable apply_cv_;
  std::deque<Entry> apply_entries_;  // committed, in index order
  std::vector<std::function<void()>> apply_completions_;
  bool applying_ = false;    // the apply thread holds a batch taken from the queue
  bool apply_stop_ = false;  // Stop(): run what completions are queued, then exit
  std::thread apply_thread_;
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

  // Leadership transfers waiting for their outcome. Guarded by mu_.
  struct PendingTransfer {
    uint64_t target;
    uint64_t term;  // the leader's term when it started
    Clock::time_point deadline;
    OutcomeCallback done;
  };
  std::vector<PendingTransfer> pending_transfers_;

  // ---- snapshots (guarded by mu_) ----
  uint64_t snapshot_index_ = 0;  // newest snapshot file this node has (0: none)
  uint64_t snapshot_term_ = 0;
  bool snapshot_running_ = false;    // the snapshot thread is busy
  bool snapshot_requested_ = false;  // TakeSnapshot() asked for one
  std::vector<SnapshotCallback> snapshot_waiters_;
  std::optional<SnapshotResult> snapshot_result_;  // from the snapshot thread
  // After a failed snapshot, automatic ones wait until then (no retry storm).
  Clock::time_point snapshot_retry_after_{};
  std::thread snapshot_thread_;  // started and joined by the I/O loop (and Stop)
  // Log bytes right after the last compaction (I/O loop only): the size
  // trigger waits for snapshot_log_bytes / 2 of growth beyond it, so a log
  // that cannot shrink (segments are removed whole) does not cause a
  // snapshot per entry.
  uint64_t log_bytes_after_compaction_ = 0;
  uint64_t last_leader_seen_ = 0;  // I/O loop only: counts metrics_.leader_changes

  std::thread io_thread_;
  std::thread tick_thread_;
  file::FileLock lock_;  // on <data_dir>/LOCK: one server per data directory
};

}  // namespace raftkv
