// A consensus member: the Raft node that the service drives.
//
// A deterministic state machine in the style of etcd's raft: no I/O, no
// threads, no clocks. Its inputs are Tick() (logical time), Step(message),
// Propose(data) and ReadIndex(id); its output is a Ready that lists what the
// caller must persist, send and apply. A simulated network can therefore
// drive whole clusters in tests, and the same code runs in raftkv-server.
//
// The caller's loop (see node/node.h):
//   Ready rd = raft.GetReady();
//   send the rd.messages for which rd.SendBeforePersist() is true
//   persist rd.hard_state (if set) and rd.entries   (fsync)
//   send the other messages (responses, votes: only after persisting)
//   raft.Advance(rd);                 // the core may now count its own log
//   apply rd.committed, answer rd.reads once applied >= read index
//
// The node owns the state every role shares (raft::Core: term, vote, log,
// outbox), runs elections, dispatches each message to the role that handles
// it -- the Leader (src/leader/) while it leads, the Follower
// (src/follower/) for the leader's requests -- and collects the Ready.
// Dependencies point down only: consensus -> leader, follower -> raft core
// -> storage.
//
// This class does no internal locking; the service calls it under one mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "follower/follower.h"
#include "leader/leader.h"
#include "leader/progress.h"
#include "raft/core/core.h"
#include "raft/core/membership.h"
#include "raft/core/message.h"
#include "raft/core/types.h"
#include "proto/internal.h"
#include "raft/core/hard_state.h"

namespace raftkv::raft {

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
  // for kPromote when the learner has acknowledged nothing or its match
  // index is more than Config::promote_max_lag behind the last index, for
  // kAddVoter when the voters heard from lately would not be a majority of
  // the larger set (unless there is one voter). A leader that removes
  // itself keeps leading (without counting itself) until the entry commits,
  // then steps down (after sending TimeoutNow to the most up-to-date voter).
  ProposeResult ProposeMembershipChange(const MembershipChange& change);
  // Leader only: leadership transfer (Raft thesis 3.10). Stops accepting
  // proposals, brings `target` up to date, then sends it kTimeoutNow. Given
  // up after an election timeout (proposals are accepted again). OK when
  // started; Unavailable when not leader; FailedPrecondition saying why not
  // (target not a voter, or itself, or another transfer in progress).
  Status TransferLeadership(uint64_t target);
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
  // While held, this member starts no election when its timeout elapses and
  // ignores TimeoutNow; it still votes, and a leader keeps leading. The
  // service holds campaigns while its state machine cannot apply what it
  // would commit (a store that refuses writes): as leader it would
  // acknowledge nothing. Released, a member that heard from no leader
  // meanwhile campaigns at its next tick.
  void HoldCampaigns(bool hold) { hold_campaigns_ = hold; }
  bool campaigns_held() const { return hold_campaigns_; }

  bool HasReady() const;
  // Collects the pending output. Call Advance() with the same Ready after the
  // entries and hard state are durable.
  Ready GetReady();
  void Advance(const Ready& rd);

  // ---- observers ----
  uint64_t id() const { return core_->id(); }
  Role role() const { return core_->role; }
  uint64_t term() const { return core_->term; }
  uint64_t vote() const { return core_->vote; }
  uint64_t leader_id() const { return core_->leader_id; }
  // Ticks since this member last led or heard from a leader (a follower of
  // a live leader: below the heartbeat interval; removed or cut off: grows).
  int64_t ticks_since_leader() const { return core_->ticks_since_leader; }
  uint64_t commit_index() const { return core_->log.commit(); }
  uint64_t last_index() const { return core_->log.last_index(); }
  uint64_t last_term() const { return core_->log.last_term(); }
  uint64_t durable_index() const { return core_->log.durable_index(); }
  // The snapshot the in-memory log starts after (index 0: none).
  const SnapshotRef& snapshot() const { return core_->log.snapshot(); }
  uint64_t first_index() const { return core_->log.first_index(); }
  // The configuration in effect (the latest in the log, committed or not)
  // and the index of its entry (0: bootstrap, or the snapshot's index when
  // it came from the snapshot).
  const MembershipConfig& membership() const { return core_->log.membership(); }
  uint64_t membership_index() const { return core_->log.membership_index(); }
  // The configuration in effect at `index` (snapshot().index <= index <=
  // last_index()).
  MembershipConfig MembershipAt(uint64_t index) const { return core_->log.MembershipAt(index); }
  std::vector<uint64_t> voters() const { return core_->voters(); }
  bool IsVoter(uint64_t member) const { return core_->IsVoter(member); }
  // Leader only: the target of a leadership transfer in progress (0: none).
  uint64_t transfer_target() const { return leader_ ? leader_->transfer_target() : 0; }
  // Term of the entry at `index` (0 for index 0 or beyond the log; the
  // snapshot's term at snapshot().index; 0 below it: compacted).
  uint64_t TermAt(uint64_t index) const { return core_->log.TermAt(index); }
  // The entry at index (first_index() <= index <= last_index()).
  const Entry& EntryAt(uint64_t index) const { return core_->log.EntryAt(index); }
  // Leader only: replication progress of `peer` (nullptr otherwise).
  const Progress* ProgressOf(uint64_t peer) const { return leader_ ? leader_->ProgressOf(peer) : nullptr; }

  // Movable (the core lives on the heap, where the roles point to it).
  Raft(Raft&&) = default;
  Raft(const Raft&) = delete;
  Raft& operator=(const Raft&) = delete;

 private:
  // ---- elections ----
  void BecomePreCandidate();
  void BecomeCandidate();
  void BecomeLeader();
  void StartElection(bool pre_vote);
  void HandleVoteRequest(const Message& m);
  void HandleVoteResponse(const Message& m);
  void HandleTimeoutNow(const Message& m);
  // Steps down to follower of `term` under `leader` (0: unknown).
  void BecomeFollower(uint64_t term, uint64_t leader);
  // After every input: when the member no longer leads (the leader stepped
  // down by itself, or a newer term was seen), its Leader is discarded.
  void SyncRole();

  std::unique_ptr<Core> core_;
  Follower follower_;
  std::optional<Leader> leader_;  // while leading

  // ---- candidate state ----
  std::set<uint64_t> votes_granted_;
  std::set<uint64_t> votes_rejected_;
  // This campaign was started by a TimeoutNow: its vote requests say so.
  bool campaign_transfer_ = false;
  bool hold_campaigns_ = false;  // HoldCampaigns
};

}  // namespace raftkv::raft
