// The state every role of a consensus member reads and changes: its term
// and vote, who it believes leads, its log, the election timer, and the
// outbox of messages and read results the next Ready hands out. The leader
// (src/leader/) and follower (src/follower/) units act on a Core; the Raft
// node (src/raft/raft.h) owns it and decides which role runs.
//
// No I/O, threads or clocks; not thread-safe (the service calls the node
// under one mutex).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "raft/core/log.h"
#include "raft/core/membership.h"
#include "raft/core/message.h"
#include "raft/core/types.h"
#include "raft/core/hard_state.h"

namespace raftkv::raft {

struct Core {
  // `hard_state` and the log (`base` and the entries after it) are what
  // storage recovered.
  Core(const Config& config, const HardState& hard_state, const SnapshotRef& base,
       std::vector<Entry> entries);

  uint64_t id() const { return config.id; }
  bool IsVoter(uint64_t member) const;
  std::vector<uint64_t> voters() const { return VoterIds(log.membership()); }
  size_t VoterCount() const { return voters().size(); }
  HardState hard_state() const { return HardState{term, vote}; }

  // Queues `m` (from this member) for the next Ready.
  void Send(Message m);
  // The response of `type` (kAppendResp, kSnapshotResp or kVoteResp) to
  // `request`: from this member to the request's sender, on the request's
  // rpc_id, its proto carrying this member's term and id. The caller fills
  // the outcome and queues it with Send.
  Message ReplyTo(const Message& request, MessageType type) const;
  // Answers AppendEntries `m` with a rejection carrying this member's term
  // and last index (no read_round, no conflict hints).
  void RejectAppend(const Message& m);
  // Answers InstallSnapshot `m` with a refusal carrying this member's term.
  void RejectSnapshot(const Message& m);
  // Refuses vote request `m` in this member's term.
  void RejectVote(const Message& m);
  void ResetElectionTimer();
  // The role-independent part of stepping down: adopts `new_term` (forgetting
  // the vote when it is newer) and `leader` (0: unknown), role follower, a
  // fresh election timeout. The node discards the state of the role left.
  void BecomeFollower(uint64_t new_term, uint64_t leader);
  // The configuration in effect changed: tell the service in the next Ready
  // and drop queued requests to servers no longer members.
  void OnMembershipChanged();
  // Appends to the log (see RaftLog::Append); reports a configuration change.
  // Returns whether the configuration changed (the leader then updates its
  // followers).
  bool AppendToLog(std::vector<Entry> entries);
  bool AppendToLog(Entry entry);

  const Config config;
  // What this member does now: follower (the start, and after any step
  // down), pre-candidate / candidate (its election timer fired), leader
  // (won a vote of `term`). Never leader in a term other than the one it won.
  Role role = Role::kFollower;
  // The latest term this member has seen; only grows (by its own election,
  // or adopted from a newer leader's or candidate's message, stepping down to
  // follower). Saved (hard state) before any message of the term is sent.
  uint64_t term = 0;
  // The member this one voted for in `term` (0: none; itself as candidate);
  // at most one per term, forgotten when the term grows. Saved (hard state)
  // before the vote is answered, so a restart cannot vote twice in a term.
  uint64_t vote = 0;
  // Who this member believes leads `term` (0: unknown; itself when leading):
  // set by the leader's AppendEntries or snapshot, or by winning; 0 again
  // when an election starts or leadership is lost. In memory only.
  uint64_t leader_id = 0;
  // The hard state as of the last Ready (what storage holds once that Ready
  // is persisted): a Ready carries the hard state when it differs.
  HardState persisted_hard_state;
  // The log: the entries after the snapshot base, and the commit index;
  // its configuration in effect is the newest one in it, committed or not.
  RaftLog log;
  bool config_changed = false;  // report in the next Ready

  // Election timer, in ticks (a leader counts its CheckQuorum period in it).
  int election_elapsed = 0;
  int randomized_election_timeout = 0;
  // Ticks since this member last led or heard from a leader (AppendEntries,
  // heartbeat or snapshot); not reset by elections. A removed or cut-off
  // member counts up without end.
  int64_t ticks_since_leader = 0;
  std::mt19937_64 rng;

  // ---- output for the next Ready ----
  std::vector<Message> msgs;
  std::vector<ReadState> ready_reads;
  std::vector<uint64_t> failed_reads;
};

}  // namespace raftkv::raft
