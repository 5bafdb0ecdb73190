// RaftNode: one member of the cluster -- the consensus core and the stages
// a write goes through, each in its own file:
//
//  - recovery.h: what the data directory holds at start (log, hard state,
//    newest intact snapshot, state machine);
//  - this file: the entry points gRPC threads call (they step the core under
//    mu_ and wake the I/O loop, never block on disk or network), the I/O
//    loop ("raft-io": takes the core's Ready, sends the leader's
//    AppendEntries before its write, persists entries and hard state with
//    one fsync for everything proposed since the last one, then sends what
//    needed durability and hands the committed entries to the apply thread)
//    and the ticker (the core's logical clock, deadlines);
//  - pending_calls.h: the calls waiting for an answer and what decides it;
//  - apply_thread.h: applies committed entries and completes client calls,
//    so the thread that fsyncs does neither;
//  - snapshot_manager.h: snapshots (taken on a background thread from a
//    copy-on-write image, installed from the leader) and compaction.
//
// Lock order: the snapshot store's lock before mu_ before the snapshot
// manager's and the state machine's own locks; the apply queue's lock is
// taken alone. Completions run without any lock held.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>


#include "common/mutex.h"
#include "raft/invariants.h"
#include "raft/raft.h"
#include "node/apply_thread.h"
#include "node/cluster_config.h"
#include "node/metrics.h"
#include "node/node_options.h"
#include "node/pending_calls.h"
#include "node/recovery.h"
#include "node/snapshot_manager.h"
#include "storage/file_util.h"
#include "storage/hard_state_file.h"
#include "kv/kv_state_machine.h"
#include "storage/log_store.h"
#include "storage/snapshot_store.h"

namespace raftkv {

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
  int64_t revision = 0;  // the store's, in the applied state
  // Configuration in effect (members in id order), its entry's index (0:
  // bootstrap) and whether that is committed.
  std::vector<MemberInfo> members;
  uint64_t config_index = 0;
  bool config_committed = false;
  uint64_t snapshot_index = 0;  // newest snapshot (0: none)
  uint64_t snapshot_term = 0;
  uint64_t first_log_index = 1;  // in memory
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
  void Start(PeerSender* sender) EXCLUDES(mu_);
  // Stops both threads and fails every waiting call with UNAVAILABLE.
  void Stop() EXCLUDES(mu_);
  // Where the apply thread runs the completions of the calls it answers
  // (ApplyThread::SetDispatcher): the gRPC server hands them to its
  // completion queues; null runs them on the apply thread.
  void SetCompletionDispatcher(ApplyThread::DispatchFn dispatch) { apply_.SetDispatcher(std::move(dispatch)); }
  // Called (without locks) after each pass of the apply thread and after a
  // snapshot replaced the state: the watchers' hub is told the store moved.
  // Set before Start(), or while the node is stopped.
  void SetApplyObserver(std::function<void()> observer) { apply_observer_ = std::move(observer); }
  // A member is leaderless once it has neither led nor heard from a leader
  // for kLeaderlessElectionTimeouts election timeouts: cut off from the
  // majority, removed from the cluster, or in a cluster without a quorum.
  // Its applied state may be frozen for good, so the watchers' hub ends its
  // streams (clients resume elsewhere). Called (without locks, from the
  // ticker) on each change with the leaderless time so far; set before Start().
  static constexpr int kLeaderlessElectionTimeouts = 3;
  void SetLeaderlessObserver(std::function<void(bool leaderless, int64_t ms)> observer) {
    leaderless_observer_ = std::move(observer);
  }

  // Replicates `command` (a serialized Command). `done` runs once: OK after
  // the entry is committed and applied; FAILED_PRECONDITION if not leader;
  // UNAVAILABLE if leadership was lost and the entry was overwritten;
  // DEADLINE_EXCEEDED at `deadline` (outcome unknown).
  void Propose(std::string command, Clock::time_point deadline, OutcomeCallback done)
      EXCLUDES(mu_);
  // Linearizable read barrier (ReadIndex). `done` runs with OK once this node,
  // confirmed leader by a quorum, has applied the read index: the caller then
  // reads the state machine.
  void ReadIndex(Clock::time_point deadline, OutcomeCallback done) EXCLUDES(mu_);

  // A request from a peer; `reply` receives the core's response after the
  // state it reflects is durable, or nullptr if the node stops first.
  using ReplyCallback = PendingCalls::ReplyCallback;
  void StepRequest(raft::Message request, ReplyCallback reply) EXCLUDES(mu_);
  void StepResponse(const raft::Message& response) EXCLUDES(mu_);
  // A one-way request from a peer (kTimeoutNow): the core produces no
  // response, so there is nothing to wait for.
  void StepOneWay(const raft::Message& request) EXCLUDES(mu_);
  void ReportUnreachable(uint64_t peer) EXCLUDES(mu_);

  // Takes a snapshot now (any role), unless one is being taken: then `done`
  // gets that one's result. Runs `done` from a background thread.
  void TakeSnapshot(std::function<void(Status, SnapshotInfo)> done);
  // Leader only: a single-server membership change. `done`: OK with the
  // configuration entry's index once it is committed; FAILED_PRECONDITION /
  // UNAVAILABLE when not leader (as Propose); FAILED_PRECONDITION with the
  // core's reason when refused (invalid, another change pending, learner
  // not caught up); DEADLINE_EXCEEDED at `deadline`.
  void ChangeMembership(const raft::MembershipChange& change, Clock::time_point deadline,
                        OutcomeCallback done) EXCLUDES(mu_);
  // Leader only: transfers leadership to `target`. `done`: OK (leader_id =
  // target) once this node learns that `target` leads a newer term;
  // FAILED_PRECONDITION when refused or given up; DEADLINE_EXCEEDED.
  void TransferLeadership(uint64_t target, Clock::time_point deadline, OutcomeCallback done)
      EXCLUDES(mu_);

  // InstallSnapshot, follower side: receives a snapshot of `format` into
  // the snapshot directory (the service then steps the metadata with
  // StepRequest()).
  Status BeginReceiveSnapshot(uint64_t last_index, uint64_t last_term, SnapshotFormat format,
                              std::unique_ptr<SnapshotSink>* out);
  // InstallSnapshot, leader side: opens the snapshot (last_index, last_term),
  // a checkpoint or a file, for streaming (NotFound if it was pruned: the
  // core will ask again).
  Status OpenSnapshotSource(uint64_t last_index, uint64_t last_term,
                            std::unique_ptr<SnapshotSource>* out);
  // A backup: the snapshot (last_index, last_term) as a snapshot file (a
  // checkpoint is written out as one first).
  Status OpenSnapshotFile(uint64_t last_index, uint64_t last_term,
                          std::unique_ptr<SnapshotFileSource>* out);
  // Address of `id` in the configuration in effect, or "" if not a member.
  std::string AddressOf(uint64_t id) const EXCLUDES(mu_);
  // The leader this member last knew of (itself when leading; 0: none), as
  // of the I/O loop's last pass: a lock-free hint for forwarding, which
  // falls back to the refusal when it is stale.
  uint64_t KnownLeader() const { return known_leader_.load(std::memory_order_relaxed); }
  // The term as of the I/O loop's last pass (lock-free, for answers' headers).
  uint64_t KnownTerm() const { return known_term_.load(std::memory_order_relaxed); }

  NodeStatus GetStatus() const EXCLUDES(mu_);
  // The voter other than this one, replicating, with the highest match
  // index: where this leader hands leadership over; 0 when there is none (or
  // this member does not lead).
  uint64_t MostUpToDateVoter() const EXCLUDES(mu_);
  // The configuration in effect (the newest one in the log, committed or not).
  MembershipConfig Membership() const EXCLUDES(mu_);
  // Counters and histograms (the /metrics endpoint); safe from any thread.
  const NodeMetrics& metrics() const { return metrics_; }
  // The directory of the snapshot files (the metrics add up their sizes).
  const std::string& snapshot_dir() const { return snapshots_.dir(); }
  const KvStateMachine& state_machine() const { return *state_machine_; }
  // The backend quota (etcd's --quota-backend-bytes), checked by the
  // handlers before they propose `command`: OK, or RESOURCE_EXHAUSTED with
  // Status::Reason::kNoSpace when applying it would take the state past
  // options.quota_backend_bytes. Then this member also raises its NOSPACE
  // alarm (an ALARM entry; one proposal at a time) unless it is raised:
  // every member refuses the writes that add data until an operator clears
  // it (Maintenance.Alarm). Commands that add nothing always pass. As etcd,
  // a write under the quota is proposed even while an alarm is raised: the
  // state machine refuses it then (kv_state_machine.h, Alarms).
  Status CheckQuota(const Command& command);
  int64_t quota_backend_bytes() const { return options_.quota_backend_bytes; }
  uint64_t id() const { return options_.id; }
  // The cluster's id (storage/bootstrap_file.h: chosen by its founders),
  // stamped on peer messages and etcd's response headers; 0 while a joining
  // member has not heard from a leader yet.
  uint64_t cluster_id() const { return cluster_id_.load(std::memory_order_acquire); }
  // A peer message from `from` carries `id`, its sender's cluster id (0:
  // the sender does not know it). Refused (FailedPrecondition, saying both
  // ids) when both are known and differ: a member of another cluster, or of
  // an earlier one on the same addresses. A member that does not know its
  // id yet adopts a leader's (`adopt`): recorded durably in the bootstrap
  // file before the message is stepped.
  Status CheckClusterId(uint64_t id, uint64_t from, bool adopt) EXCLUDES(cluster_id_mu_);
  const ClusterConfig& cluster() const { return options_.cluster; }
  // Fills the leader fields of a FAILED_PRECONDITION outcome.
  Outcome NotLeader() const EXCLUDES(mu_);

 private:
  RaftNode(const NodeOptions& options, RecoveredState recovered);
  void IoLoop() EXCLUDES(mu_);
  void TickLoop() EXCLUDES(mu_);
  // On the ticker: a leader whose key-value store has refused writes for an
  // election timeout hands leadership to its most up-to-date replicating
  // voter, and tries again less and less often while the stall lasts.
  void MaybeHandOverStalledLeadership(Clock::time_point now) EXCLUDES(mu_);
  // The core starts no election while the state machine's store is stalled.
  void HoldCampaignsWhileStalledLocked() REQUIRES(mu_);
  uint64_t MostUpToDateVoterLocked() const REQUIRES(mu_);
  // When each stage of one pass of the I/O loop ended (unset: not reached),
  // and what it sent and wrote; a pass longer than half the shortest
  // election timeout is logged with them (at most every 5 s) and counted.
  struct CycleTimes {
    Clock::time_point start, snapshot_done, installed, sent, persisted, answered;
    size_t messages_sent = 0;
    uint64_t entry_bytes_sent = 0;
    size_t entries_persisted = 0;
  };
  void ReportSlowCycle(const CycleTimes& times, Clock::time_point end) EXCLUDES(mu_);
  // The I/O loop's handling of one Ready (everything but taking it).
  void ProcessReady(raft::Ready& rd, Completions* completions, CycleTimes* times) EXCLUDES(mu_);
  // Ready::snapshot: the state machine and the log restart from the
  // leader's snapshot (I/O loop). A log restart the disk refuses is retried
  // (UntilWritten); false when the node stops first.
  bool InstallSnapshot(const raft::SnapshotRef& snap, Completions* completions) EXCLUDES(mu_);
  // ProcessReady's step 2: the hard state, then the entries with one fsync.
  // A write the disk refuses (full; an error the log undid) is retried with
  // backoff until it succeeds: meanwhile this member acknowledges nothing,
  // answers no peer and, as leader, sends no heartbeat, so the others elect
  // another leader. False when the node stops first (the Ready is dropped:
  // nothing of it was acknowledged).
  bool PersistReady(const raft::Ready& rd) EXCLUDES(mu_);
  // Runs `write` until it succeeds (true) or the node stops (false), waiting
  // 10 ms to 1 s between attempts; `write` names what it writes in *what. A
  // failure the log cannot undo (a failed fdatasync: SegmentedLog::failed)
  // is fatal: recovery from the disk is the only safe path. Meanwhile the
  // member is stalled (metrics, one log line at the first failure and one at
  // the recovery).
  bool UntilWritten(const std::function<Status(const char** what)>& write) EXCLUDES(mu_);
  // The apply thread's work: applies `entries` (consecutive, committed) and
  // collects the completions of the writes and reads they answer.
  void ApplyEntries(const std::deque<Entry>& entries, Completions* completions) EXCLUDES(mu_);
  Outcome NotLeaderLocked() const REQUIRES(mu_);
  // Debug builds: the core's invariants (raft/invariants.h) after every
  // Advance; a violation is fatal.
  void CheckInvariantsLocked() REQUIRES(mu_);
  std::string AddressOfLocked(uint64_t id) const REQUIRES(mu_);
  // Wakes the I/O loop for work that is not the core's (a snapshot).
  void WakeIoLoop() EXCLUDES(mu_);

  const NodeOptions options_;
  NodeMetrics metrics_;  // before log_: it observes the log's syncs
  file::FileLock lock_;  // on <data_dir>/LOCK: one server per data directory
  std::unique_ptr<SegmentedLog> log_;                // used by the I/O loop only
  std::unique_ptr<HardStateFile> hard_state_file_;  // used by the I/O loop only
  // The stores of a persistent engine (null in memory): outlives the state
  // machine, which creates stores through it.
  std::unique_ptr<KvBackendFactory> kv_stores_;
  // Applied to by the apply thread, restored by the I/O loop while the
  // apply thread is idle; read by any thread.
  std::unique_ptr<KvStateMachine> state_machine_;
  PeerSender* sender_ = nullptr;

  mutable Mutex mu_;
  CondVar wake_;         // the I/O loop waits here for a Ready
  CondVar stop_signal_;  // the ticker sleeps here; signalled by Stop()
  bool stopping_ GUARDED_BY(mu_) = false;
  raft::Raft raft_ GUARDED_BY(mu_);
  raft::MemberInvariants invariants_ GUARDED_BY(mu_);  // debug builds only
  PendingCalls calls_ GUARDED_BY(mu_);
  // The state machine has its own copy.
  uint64_t applied_index_ GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> cluster_id_{0};  // changed once at most: 0 -> adopted
  std::atomic<bool> raising_nospace_{false};  // CheckQuota: an ALARM entry is proposed
  Mutex cluster_id_mu_;                  // serializes the adoption
  const MembershipConfig bootstrap_config_;  // rewritten with the adopted id
  std::atomic<uint64_t> known_leader_{0};  // written by the I/O loop
  std::atomic<uint64_t> known_term_{0};    // written by the I/O loop
  uint64_t last_leader_seen_ = 0;  // I/O loop only: counts metrics_.leader_changes
  Clock::time_point last_slow_cycle_log_;  // I/O loop only (ReportSlowCycle)
  uint64_t slow_cycles_muted_ = 0;         // I/O loop only

  SnapshotManager snapshots_;
  std::function<void()> apply_observer_;
  std::function<void(bool, int64_t)> leaderless_observer_;
  bool leaderless_ = false;  // ticker only
  Clock::time_point store_stalled_since_{};  // ticker only; epoch: not stalled
  Clock::time_point last_stall_handover_{};  // ticker only
  int stall_handovers_ = 0;  // ticker only: tried since the store stalled
  ApplyThread apply_;
  std::thread io_thread_;
  std::thread tick_thread_;
};

}  // namespace raftkv
