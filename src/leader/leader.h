// The leader's machinery: proposals and membership changes, replication to
// each follower with batching and pipelining (a Progress per follower),
// commit by counting durable replicas of current-term entries (quorum.h),
// heartbeats and CheckQuorum, ReadIndex heartbeat rounds, and leadership
// transfer.
//
// One Leader exists while its member leads a term: the Raft node creates it
// on winning an election and discards it when the member steps down. It
// steps down by itself (Core::BecomeFollower) when it loses contact with a
// majority or its removal commits; the node notices the role change after
// the call and discards it then.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "leader/progress.h"
#include "raft/core/core.h"
#include "raft/core/membership.h"
#include "raft/core/message.h"
#include "raft/core/types.h"

namespace raftkv::raft {

class Leader {
 public:
  // The member just won an election (core->role is kLeader): appends the
  // no-op entry of its term and starts replicating to every member.
  explicit Leader(Core* core);

  // Appends a COMMAND entry with `data`. Refused (with `error`) while a
  // leadership transfer is in progress.
  ProposeResult Propose(std::string data);
  // See Raft::ProposeMembershipChange.
  ProposeResult ProposeMembershipChange(const MembershipChange& change);
  // OK when voter `id` may be added now (see the definition).
  Status CheckStartedQuorumAfterAdd(uint64_t id) const;
  // See Raft::TransferLeadership.
  Status TransferLeadership(uint64_t target);
  // Registers a linearizable read; it is confirmed by the next heartbeat
  // round a majority acknowledges.
  void ReadIndex(uint64_t id);
  void ReportUnreachable(uint64_t peer);

  void Tick();
  void HandleAppendResponse(const Message& m);
  void HandleSnapshotResponse(const Message& m);
  // The configuration in effect changed: start or stop replicating to members.
  void OnMembershipChanged();
  // The leader's own log grew durable (Advance): maybe commit.
  void OnPersisted() { MaybeAdvanceCommit(); }
  // Before a Ready is collected: starts the read round reads wait for and
  // sends the entries proposed since the last Ready in one AppendEntries per
  // follower (batching).
  void PrepareReady();
  // Whether PrepareReady has work (a read round to start).
  bool HasReady() const { return read_round_needed_; }
  // The member steps down: its unconfirmed reads fail.
  void FailPendingReads();

  const Progress* ProgressOf(uint64_t peer) const;
  uint64_t transfer_target() const { return transfer_target_; }

 private:
  bool leading() const { return core_->role == Role::kLeader; }
  // The entry that would follow the log's last one: this leader's term and
  // cluster time, `type` and `data`.
  Entry NextEntry(EntryType type, std::string data) const;
  // Why a proposal is refused while a leadership transfer is under way.
  Status TransferInProgress() const;
  void AddFollowers();
  void BroadcastAppend();
  void BroadcastHeartbeat();
  // Sends entries to `peer` if flow control allows; returns true if sent.
  bool MaybeSendAppend(uint64_t peer, bool allow_empty);
  void SendHeartbeat(uint64_t peer);
  void SendSnapshot(uint64_t peer);
  void MaybeSendTimeoutNow();
  void SendTimeoutNow(uint64_t peer);
  // A leader no longer in the configuration steps down once that commits.
  void MaybeStepDownRemoved();
  bool MaybeAdvanceCommit();
  void AdvanceReadRounds();
  void StepDown();

  Core* core_;
  const Config& config_;
  RaftLog& log_;
  std::map<uint64_t, Progress> progress_;  // every member (voter or learner) except self
  int heartbeat_elapsed_ = 0;
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
  uint64_t append_seq_ = 0;          // AppendEntriesRequest.seq of the last one sent
  bool read_round_needed_ = false;   // a read is waiting for a new round
  // Highest round acknowledged by each peer.
  std::map<uint64_t, uint64_t> acked_round_;
};

}  // namespace raftkv::raft
