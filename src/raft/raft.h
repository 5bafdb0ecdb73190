// The Raft consensus core.
//
// A deterministic state machine in the style of etcd's raft: no I/O, no
// threads, no clocks. Its inputs are Tick() (logical time), Step(message),
// Propose(data) and ReadIndex(id); its output is a Ready that lists what the
// caller must persist, send and apply. A simulated network can therefore
// drive whole clusters in tests, and the same code runs in raftkv-server.
//
// The caller's loop (see service/node.h):
//   Ready rd = raft.GetReady();
//   send the rd.messages for which rd.SendBeforePersist() is true
//   persist rd.hard_state (if set) and rd.entries   (fsync)
//   send the other messages (responses, votes: only after persisting)
//   raft.Advance(rd);                 // the core may now count its own log
//   apply rd.committed, answer rd.reads once applied >= read index
//
// This class does no internal locking; the service calls it under one mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "leader/progress.h"
#include "raft/membership.h"
#include "raft/message.h"
#include "raft/quorum.h"
#include "raftkv.pb.h"
#include "storage/hard_state.h"

namespace raftkv::raft {

enum class Role { kFollower, kPreCandidate, kCandidate, kLeader };
const char* RoleName(Role role);

// The core's configuration. These defaults are the server's (raftkv-server's
// flags and NodeOptions::core take them from here).
struct Config {
  uint64_t id = 0;                 // this member's id (> 0)
  // The bootstrap configuration: in effect at log index 0, until the first
  // ENTRY_CONFIG in the log (or a snapshot's configuration) replaces it. If
  // `bootstrap` has no members, `voters` (addresses empty) is used. A member
  // that is not in it (a joining server) starts without a vote and waits for
  // a leader to replicate a configuration that includes it.
  MembershipConfig bootstrap;
  std::vector<uint64_t> voters;
  // Election timeout is drawn uniformly from [election_ticks, 2*election_ticks).
  int election_ticks = 10;
  // Ticks between a leader's heartbeats (< election_ticks).
  int heartbeat_ticks = 2;
  bool pre_vote = true;
  // A leader that has not heard from a majority within an election timeout
  // steps down (needed so that PreVote cannot be blocked by a stale leader).
  bool check_quorum = true;
  // Replication flow control per follower.
  size_t max_inflight_appends = 64;
  size_t max_append_entries = 4096;
  size_t max_append_bytes = 1 << 20;
  uint64_t seed = 1;  // for the randomized election timeout
  // A learner is promoted only when its match index is within this many
  // entries of the leader's last index.
  uint64_t promote_max_lag = 1000;
  // The length of a tick in milliseconds (the service ticks the core that
  // often). Cluster time: a leader stamps every entry it creates with
  // Entry.cluster_time_ms = (its last entry's time when elected) + tick_ms *
  // (ticks since). 0 (tests of the core only) leaves every entry at time 0.
  int tick_ms = 50;
};

// A linearizable read that may be served once the state machine has applied
// `index`.
struct ReadState {
  uint64_t id = 0;
  uint64_t index = 0;
};

// A snapshot the core is based on: the log holds entries after `index`.
struct SnapshotRef {
  uint64_t index = 0;
  uint64_t term = 0;
  MembershipConfig config;  // configuration at `index`
  uint64_t cluster_time_ms = 0;  // Entry::cluster_time_ms of entry `index`
};

struct Ready {
  // Follower: a snapshot from the leader replaces this member's state. The
  // file snap-<index>-<term> is already installed in the snapshot store (the
  // service did that before stepping the kSnapshot message). Before anything
  // else in this Ready, the caller restores its state machine from that file
  // and resets its LogStore to hold nothing up to snapshot->index (entries
  // start at index + 1), durably.
  std::optional<SnapshotRef> snapshot;
  // Set when the configuration in effect changed (an ENTRY_CONFIG appended or
  // truncated away, or a snapshot installed): the service updates the peer
  // addresses it dials. Never removes addresses the messages of this Ready
  // still need.
  std::optional<MembershipConfig> config;
  // Set when term or vote changed since the last Ready: persist it before
  // sending any message in `messages`.
  std::optional<HardState> hard_state;
  // Entries to write to the LogStore. If entries.front().index is <= the
  // store's last index, the store truncates its suffix from there first.
  std::vector<Entry> entries;
  std::vector<Message> messages;
  // Newly committed entries, in order, to apply to the state machine.
  std::vector<Entry> committed;
  std::vector<ReadState> reads;
  // Reads that can never be served by this node (it lost leadership before
  // confirming them): fail them with UNAVAILABLE.
  std::vector<uint64_t> failed_reads;

  bool empty() const {
    return !snapshot && !config && !hard_state && entries.empty() && messages.empty() && committed.empty() &&
           reads.empty() && failed_reads.empty();
  }

  // True for the messages of this Ready that may be sent before its entries
  // and hard state are durable: a leader's AppendEntries (Raft thesis
  // 10.2.1: a leader writes to its disk in parallel with replicating), and
  // only when this Ready does not change the hard state. The rule behind it:
  // no message may carry a term (or a vote, or an acknowledgement) before
  // that state is durable. A leader elected inside one step (a single voter
  // counts its own vote) would otherwise send entries of a term it forgets
  // if it crashes now, win that term again after the restart and write
  // other entries at the same indexes and term. Every other message
  // (responses, vote requests) reflects state that must be durable first.
  bool SendBeforePersist(const Message& m) const {
    return m.type == MessageType::kAppend && !hard_state.has_value();
  }
};

struct ProposeResult {
  bool accepted = false;  // false: not leader, or `error` says why
  uint64_t index = 0;
  uint64_t term = 0;
  // When refused although leader (leadership transfer in progress, invalid
  // or concurrent membership change): why. Empty when not leader.
  std::string error;
};

class Raft {
 public:
  // `hard_state` and `log` are what storage recovered (log: every entry from
  // index 1, contiguous).
  Raft(const Config& config, const HardState& hard_state, std::vector<Entry> log);
  // Restart from a snapshot: the state machine was restored to `base` (its
  // index is committed and applied), `log` holds the entries from
  // base.index + 1 on (contiguous; may be empty). base.index == 0 is the
  // constructor above.
  Raft(const Config& config, const HardState& hard_state, const SnapshotRef& base,
       std::vector<Entry> log);

  // Advances logical time by one tick: election timeouts and heartbeats.
  void Tick();
  // Handles a message from a peer. Every request (kAppend, kVote) produces
  // exactly one response message with the request's rpc_id, whatever the
  // terms involved, unless it is not addressed to this member.
  void Step(const Message& m);
  // Leader only: appends a COMMAND entry with `data`. Refused (with `error`)
  // while a leadership transfer is in progress.
  ProposeResult Propose(std::string data);
  // Leader only: appends an ENTRY_CONFIG with the configuration `change`
  // produces. Refused (accepted false, `error` set) while an earlier
  // configuration entry is uncommitted, before an entry of this term is
  // committed, during a leadership transfer, when the change is invalid, and
  // for kPromote when the learner's match index is more than
  // Config::promote_max_lag behind the last index. A leader that removes
  // itself keeps leading (without counting itself) until the entry commits,
  // then steps down (after sending TimeoutNow to the most up-to-date voter).
  ProposeResult ProposeMembershipChange(const MembershipChange& change);
  // Leader only: leadership transfer (Raft thesis 3.10). Stops accepting
  // proposals, brings `target` up to date, then sends it kTimeoutNow. Given
  // up after an election timeout (proposals are accepted again). Returns ""
  // when started, otherwise why not (not leader, target not a voter or self).
  std::string TransferLeadership(uint64_t target);
  // The state machine has a durable snapshot covering the log up to `index`
  // (<= the last index handed out in Ready::committed): entries up to it are
  // dropped from memory, and followers that need them get the snapshot
  // (kSnapshot messages name snap-<index>-<term>). Returns false (nothing
  // done) if index is not above the current snapshot or not yet applied.
  bool Compact(uint64_t index);
  // Leader only: registers a linearizable read with caller-chosen `id`. It
  // appears in Ready::reads once a majority has confirmed this node is still
  // leader after the call. Returns false when not leader.
  bool ReadIndex(uint64_t id);
  // The transport could not reach `peer`: a pipelined follower falls back to
  // probing from its last known match.
  void ReportUnreachable(uint64_t peer);

  bool HasReady() const;
  // Collects the pending output. Call Advance() with the same Ready after the
  // entries and hard state are durable.
  Ready GetReady();
  void Advance(const Ready& rd);

  // ---- observers ----
  uint64_t id() const { return config_.id; }
  Role role() const { return role_; }
  uint64_t term() const { return term_; }
  uint64_t vote() const { return vote_; }
  uint64_t leader_id() const { return leader_id_; }
  uint64_t commit_index() const { return commit_; }
  uint64_t last_index() const { return snapshot_.index + log_.size(); }
  uint64_t last_term() const { return log_.empty() ? snapshot_.term : log_.back().term(); }
  uint64_t durable_index() const { return durable_index_; }
  // The snapshot the in-memory log starts after (index 0: none).
  const SnapshotRef& snapshot() const { return snapshot_; }
  uint64_t first_index() const { return snapshot_.index + 1; }
  // The configuration in effect (the latest in the log, committed or not)
  // and the index of its entry (0: bootstrap, or the snapshot's index when
  // it came from the snapshot).
  const MembershipConfig& membership() const;
  uint64_t membership_index() const;
  // The configuration in effect at `index` (snapshot().index <= index <=
  // last_index()).
  MembershipConfig MembershipAt(uint64_t index) const;
  std::vector<uint64_t> voters() const { return VoterIds(membership()); }
  bool IsVoter(uint64_t id) const;
  // Leader only: the target of a leadership transfer in progress (0: none).
  uint64_t transfer_target() const { return transfer_target_; }
  // Term of the entry at `index` (0 for index 0 or beyond the log; the
  // snapshot's term at snapshot().index; 0 below it: compacted).
  uint64_t TermAt(uint64_t index) const;
  // The entry at index (first_index() <= index <= last_index()).
  const Entry& EntryAt(uint64_t index) const { return log_[index - first_index()]; }
  // Leader only: replication progress of `peer` (nullptr otherwise).
  const Progress* ProgressOf(uint64_t peer) const;

 private:
  // ---- common (raft/raft.cc) ----
  void BecomeFollower(uint64_t term, uint64_t leader);
  void BecomePreCandidate();
  void BecomeCandidate();
  void BecomeLeader();
  void StartElection(bool pre_vote);
  void HandleVoteRequest(const Message& m);
  void HandleVoteResponse(const Message& m);
  void Send(Message m);
  // Answers AppendEntries `m` with a rejection carrying this member's term
  // and last index (no read_round, no conflict hints).
  void RejectAppend(const Message& m);
  void ResetElectionTimer();
  size_t VoterCount() const { return voters().size(); }
  bool LogUpToDate(uint64_t last_index, uint64_t last_term) const;
  void AppendToLog(std::vector<Entry> entries);  // may truncate a suffix
  void FailPendingReads();
  // Records the ENTRY_CONFIG entries of `entries` (just appended) in configs_.
  void TrackConfigs(const std::vector<Entry>& entries, size_t from);
  // The configuration in effect changed: tell the service, and as leader
  // start or stop replicating to members.
  void OnMembershipChanged();
  void HandleTimeoutNow(const Message& m);
  void RejectSnapshot(const Message& m);

  // ---- leader role (leader/leader.cc) ----
  void LeaderTick();
  void BroadcastAppend();
  void BroadcastHeartbeat();
  // Sends entries to `peer` if flow control allows; returns true if sent.
  bool MaybeSendAppend(uint64_t peer, bool allow_empty);
  void SendHeartbeat(uint64_t peer);
  void SendSnapshot(uint64_t peer);
  void HandleSnapshotResponse(const Message& m);
  void MaybeSendTimeoutNow();
  void SendTimeoutNow(uint64_t peer);
  // A leader no longer in the configuration steps down once that commits.
  void MaybeStepDownRemoved();
  void HandleAppendResponse(const Message& m);
  bool MaybeAdvanceCommit();
  void AdvanceReadRounds();

  // ---- follower role (follower/follower.cc) ----
  void HandleAppendEntries(const Message& m);
  void HandleInstallSnapshot(const Message& m);

  Config config_;
  Role role_ = Role::kFollower;
  uint64_t term_ = 0;
  uint64_t vote_ = 0;
  uint64_t leader_id_ = 0;
  HardState persisted_hard_state_;

  // The log after the snapshot: entry i at log_[i - snapshot_.index - 1].
  // snapshot_.config is the configuration in effect at snapshot_.index (the
  // bootstrap configuration when there is no snapshot).
  SnapshotRef snapshot_;
  std::vector<Entry> log_;
  // The ENTRY_CONFIG entries in log_, by index (ascending). The last one, or
  // snapshot_.config when there is none, is the configuration in effect.
  std::vector<std::pair<uint64_t, MembershipConfig>> configs_;
  bool config_changed_ = false;  // report in the next Ready
  // Follower: a snapshot accepted from the leader, for the next Ready.
  std::optional<SnapshotRef> pending_snapshot_;
  uint64_t commit_ = 0;
  uint64_t applied_sent_ = 0;    // last index handed out in Ready::committed
  // Entries with index >= unstable_from_ have not been handed to storage yet.
  uint64_t unstable_from_ = 1;
  // Highest index known durable in the local LogStore (after Advance).
  uint64_t durable_index_ = 0;

  // ---- timers, in ticks ----
  int election_elapsed_ = 0;
  int randomized_election_timeout_ = 0;
  int heartbeat_elapsed_ = 0;
  std::mt19937_64 rng_;

  // ---- candidate state ----
  std::set<uint64_t> votes_granted_;
  std::set<uint64_t> votes_rejected_;
  // This campaign was started by a TimeoutNow: its vote requests say so.
  bool campaign_transfer_ = false;

  // ---- leader state ----
  std::map<uint64_t, Progress> progress_;  // every member (voter or learner) except self
  // Leadership transfer in progress (0: none), ticks since it started, and
  // whether TimeoutNow went out.
  uint64_t transfer_target_ = 0;
  int transfer_elapsed_ = 0;
  bool timeout_now_sent_ = false;
  // Cluster time stamped on this leader's entries (see Config::tick_ms).
  uint64_t leader_time_ms_ = 0;
  // Index of the no-op entry this leader appended when elected. Every entry
  // committed by earlier leaders lies below it, so it bounds read indexes.
  uint64_t term_start_index_ = 0;
  // ReadIndex: reads wait for a heartbeat round confirmed by a quorum.
  struct PendingRead {
    uint64_t id;
    uint64_t index;   // commit index when the read arrived
    uint64_t round;   // the heartbeat round that must be acknowledged
  };
  std::deque<PendingRead> pending_reads_;
  uint64_t read_round_ = 0;          // last round started
  bool read_round_needed_ = false;   // a read is waiting for a new round
  // Highest round acknowledged by each peer (leader state).
  std::map<uint64_t, uint64_t> acked_round_;

  // ---- output buffers ----
  std::vector<Message> msgs_;
  std::vector<ReadState> ready_reads_;
  std::vector<uint64_t> failed_reads_;
};

}  // namespace raftkv::raft
