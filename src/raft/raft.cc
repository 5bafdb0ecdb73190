// The Raft node: role transitions, elections (PreVote, RequestVote), term
// handling, dispatch to the leader and follower units, and the Ready/Advance
// cycle.
#include "raft/raft.h"

#include <glog/logging.h>

#include <algorithm>

#include "raft/core/quorum.h"

namespace raftkv::raft {

Raft::Raft(const Config& config, const HardState& hard_state, std::vector<Entry> log)
    : Raft(config, hard_state, SnapshotRef{}, std::move(log)) {}

Raft::Raft(const Config& config, const HardState& hard_state, const SnapshotRef& base,
           std::vector<Entry> log)
    : core_(std::make_unique<Core>(config, hard_state, base, std::move(log))), follower_(core_.get()) {
  BecomeFollower(core_->term, 0);
}

void Raft::SyncRole() {
  if (leader_ && core_->role != Role::kLeader) {
    leader_->FailPendingReads();
    leader_.reset();
  }
}

void Raft::BecomeFollower(uint64_t term, uint64_t leader) {
  core_->BecomeFollower(term, leader);
  SyncRole();
  votes_granted_.clear();
  votes_rejected_.clear();
}

void Raft::BecomePreCandidate() {
  core_->role = Role::kPreCandidate;
  core_->leader_id = 0;
  votes_granted_.clear();
  votes_rejected_.clear();
  core_->ResetElectionTimer();
}

void Raft::BecomeCandidate() {
  core_->role = Role::kCandidate;
  ++core_->term;
  core_->vote = core_->id();
  core_->leader_id = 0;
  votes_granted_.clear();
  votes_rejected_.clear();
  core_->ResetElectionTimer();
}

void Raft::BecomeLeader() {
  CHECK(core_->role == Role::kCandidate);
  core_->role = Role::kLeader;
  core_->leader_id = core_->id();
  campaign_transfer_ = false;
  votes_granted_.clear();
  votes_rejected_.clear();
  leader_.emplace(core_.get());
}

void Raft::StartElection(bool pre_vote) {
  if (pre_vote) {
    BecomePreCandidate();
  } else {
    BecomeCandidate();
  }
  const RaftLog& log = core_->log;
  LOG(INFO) << "member " << core_->id() << " starts " << (pre_vote ? "pre-vote" : "election")
            << " for term " << (pre_vote ? core_->term + 1 : core_->term) << " (last log "
            << log.last_index() << "/" << log.last_term() << "; no leader heard for "
            << core_->ticks_since_leader << " ticks)";
  votes_granted_.insert(core_->id());
  if (TallyVotes(core_->VoterCount(), votes_granted_.size(), 0) == VoteResult::kWon) {
    if (pre_vote) {
      StartElection(false);
    } else {
      BecomeLeader();
    }
    return;
  }
  for (uint64_t peer : core_->voters()) {
    if (peer == core_->id()) continue;
    Message m;
    m.type = MessageType::kVote;
    m.vote.set_transfer(campaign_transfer_);
    m.to = peer;
    m.vote.set_term(pre_vote ? core_->term + 1 : core_->term);
    m.vote.set_candidate_id(core_->id());
    m.vote.set_last_log_index(log.last_index());
    m.vote.set_last_log_term(log.last_term());
    m.vote.set_pre_vote(pre_vote);
    m.vote.set_to(peer);
    core_->Send(std::move(m));
  }
}

void Raft::Tick() {
  if (leader_) {
    core_->ticks_since_leader = 0;
    leader_->Tick();
    SyncRole();
    return;
  }
  ++core_->ticks_since_leader;
  ++core_->election_elapsed;
  if (core_->election_elapsed >= core_->randomized_election_timeout && core_->IsVoter(core_->id()) &&
      !hold_campaigns_) {
    campaign_transfer_ = false;
    StartElection(core_->config.pre_vote);
  }
}

void Raft::HandleTimeoutNow(const Message& m) {
  if (core_->role == Role::kLeader || !core_->IsVoter(core_->id()) || hold_campaigns_) {
    LOG(WARNING) << "member " << core_->id() << " ignores " << m.DebugString() << " (it is "
                 << RoleName(core_->role) << (core_->IsVoter(core_->id()) ? "" : ", not a voter")
                 << (hold_campaigns_ ? ", holding its campaigns" : "") << ")";
    return;
  }
  LOG(INFO) << "member " << core_->id() << " was asked by leader " << m.from
            << " to take over; campaigning for term " << core_->term + 1;
  // No PreVote: the leader asked for this election, and the voters are told
  // (transfer) so that leader stickiness does not refuse it.
  campaign_transfer_ = true;
  StartElection(false);
}

void Raft::Step(const Message& m) {
  if (m.to != core_->id()) {
    LOG(WARNING) << "member " << core_->id() << " dropped misrouted " << m.DebugString();
    return;
  }
  const uint64_t mterm = m.Term();
  if (mterm > core_->term) {
    if (m.type == MessageType::kVote) {
      // Leader stickiness: a member that heard from a live leader within the
      // minimum election timeout neither grants a vote nor adopts the term.
      const bool in_lease = core_->config.check_quorum && !m.vote.transfer() && core_->leader_id != 0 &&
                            core_->election_elapsed < core_->config.election_ticks;
      if (in_lease) {
        core_->RejectVote(m);
        return;
      }
    }
    const bool pre_vote_request = m.type == MessageType::kVote && m.vote.pre_vote();
    const bool pre_vote_grant = m.type == MessageType::kVoteResp && m.vote_resp.pre_vote() &&
                                m.vote_resp.granted();
    if (!pre_vote_request && !pre_vote_grant) {
      const bool from_leader = m.type == MessageType::kAppend ||
                               m.type == MessageType::kSnapshot ||
                               m.type == MessageType::kTimeoutNow;
      BecomeFollower(mterm, from_leader ? m.from : 0);
    }
  } else if (mterm < core_->term) {
    // A stale request still gets an answer carrying our term, so the sender
    // learns it is behind; stale responses are dropped.
    if (m.type == MessageType::kAppend) {
      // No read_round: this answer carries our (newer) term, and echoing the
      // old request's round could confirm a ReadIndex round of a later
      // leadership of the sender in this term.
      core_->RejectAppend(m);
    } else if (m.type == MessageType::kSnapshot) {
      core_->RejectSnapshot(m);
    } else if (m.type == MessageType::kVote) {
      core_->RejectVote(m);
    }
    return;
  }

  switch (m.type) {
    case MessageType::kAppend:
      if (leader_) {
        // Two leaders in one term would violate election safety: the sender
        // is faulty. Refuse, but answer: the service holds the RPC open
        // until the core replies to it.
        LOG(ERROR) << "member " << core_->id() << " is leader of term " << core_->term
                   << " and received " << m.DebugString();
        core_->RejectAppend(m);
        return;
      }
      if (core_->role != Role::kFollower) BecomeFollower(core_->term, m.from);
      follower_.HandleAppendEntries(m);
      break;
    case MessageType::kAppendResp:
      if (leader_) leader_->HandleAppendResponse(m);
      break;
    case MessageType::kVote:
      HandleVoteRequest(m);
      break;
    case MessageType::kVoteResp:
      HandleVoteResponse(m);
      break;
    case MessageType::kSnapshot:
      if (leader_) {
        LOG(ERROR) << "member " << core_->id() << " is leader of term " << core_->term
                   << " and received " << m.DebugString();
        core_->RejectSnapshot(m);
        return;
      }
      if (core_->role != Role::kFollower) BecomeFollower(core_->term, m.from);
      follower_.HandleInstallSnapshot(m);
      break;
    case MessageType::kSnapshotResp:
      if (leader_) leader_->HandleSnapshotResponse(m);
      break;
    case MessageType::kTimeoutNow:
      HandleTimeoutNow(m);
      break;
  }
  SyncRole();
}

void Raft::HandleVoteRequest(const Message& m) {
  const RequestVoteRequest& req = m.vote;
  const bool can_vote = core_->vote == req.candidate_id() || (core_->vote == 0 && core_->leader_id == 0) ||
                        (req.pre_vote() && req.term() > core_->term);
  const bool grant = can_vote && core_->log.IsUpToDate(req.last_log_index(), req.last_log_term());
  if (grant && !req.pre_vote()) {
    core_->vote = req.candidate_id();
    core_->ResetElectionTimer();
  }
  Message resp = core_->ReplyTo(m, MessageType::kVoteResp);
  // A granted pre-vote answers in the term the candidate would take.
  if (grant && req.pre_vote()) resp.vote_resp.set_term(req.term());
  resp.vote_resp.set_granted(grant);
  resp.vote_resp.set_pre_vote(req.pre_vote());
  VLOG(1) << "member " << core_->id() << (grant ? " grants " : " denies ")
          << (req.pre_vote() ? "pre-vote" : "vote") << " to " << req.candidate_id() << " for term "
          << req.term();
  core_->Send(std::move(resp));
}

void Raft::HandleVoteResponse(const Message& m) {
  const RequestVoteResponse& resp = m.vote_resp;
  const Role expected = resp.pre_vote() ? Role::kPreCandidate : Role::kCandidate;
  if (core_->role != expected) return;
  if (!core_->IsVoter(m.from)) return;  // a learner's vote does not count
  if (resp.granted()) {
    votes_granted_.insert(m.from);
  } else {
    votes_rejected_.insert(m.from);
  }
  switch (TallyVotes(core_->VoterCount(), votes_granted_.size(), votes_rejected_.size())) {
    case VoteResult::kWon:
      if (core_->role == Role::kPreCandidate) {
        StartElection(false);
      } else {
        BecomeLeader();
      }
      break;
    case VoteResult::kLost:
      BecomeFollower(core_->term, 0);
      break;
    case VoteResult::kPending:
      break;
  }
}

ProposeResult Raft::Propose(std::string data) {
  if (!leader_) return ProposeResult{};
  return leader_->Propose(std::move(data));
}

ProposeResult Raft::ProposeMembershipChange(const MembershipChange& change) {
  if (!leader_) return ProposeResult{};
  return leader_->ProposeMembershipChange(change);
}

Status Raft::TransferLeadership(uint64_t target) {
  if (!leader_) return Status::Unavailable("not leader");
  return leader_->TransferLeadership(target);
}

bool Raft::ReadIndex(uint64_t id) {
  if (!leader_) return false;
  leader_->ReadIndex(id);
  return true;
}

void Raft::ReportUnreachable(uint64_t peer) {
  if (leader_) leader_->ReportUnreachable(peer);
}

bool Raft::Compact(uint64_t index) { return core_->log.Compact(index); }

bool Raft::HasReady() const {
  if (follower_.has_installed_snapshot() || core_->config_changed) return true;
  if (core_->hard_state() != core_->persisted_hard_state) return true;
  if (core_->log.HasUnstable()) return true;
  if (!core_->msgs.empty() || core_->log.HasCommittedToApply()) return true;
  if (!core_->ready_reads.empty() || !core_->failed_reads.empty()) return true;
  return leader_ && leader_->HasReady();
}

Ready Raft::GetReady() {
  if (leader_) leader_->PrepareReady();
  Ready rd;
  rd.snapshot = follower_.TakeInstalledSnapshot();
  if (core_->config_changed) {
    rd.config = core_->log.membership();
    core_->config_changed = false;
  }
  const HardState hs = core_->hard_state();
  if (hs != core_->persisted_hard_state) {
    rd.hard_state = hs;
    core_->persisted_hard_state = hs;
  }
  rd.entries = core_->log.TakeUnstable();
  rd.messages = std::move(core_->msgs);
  core_->msgs.clear();
  rd.committed = core_->log.TakeCommitted();
  rd.reads = std::move(core_->ready_reads);
  core_->ready_reads.clear();
  rd.failed_reads = std::move(core_->failed_reads);
  core_->failed_reads.clear();
  return rd;
}

void Raft::Advance(const Ready& rd) {
  core_->log.OnPersisted(rd.entries);
  if (leader_) {
    leader_->OnPersisted();
    SyncRole();
  }
}

}  // namespace raftkv::raft
