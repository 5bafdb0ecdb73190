// Role transitions, elections (PreVote, RequestVote), term handling and the
// Ready/Advance cycle. Leader-only logic is in leader/leader.cc and the
// follower's AppendEntries handling in follower/follower.cc.
#include "raft/raft.h"

#include <glog/logging.h>

#include <algorithm>

namespace raftkv::raft {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kFollower: return "follower";
    case Role::kPreCandidate: return "precandidate";
    case Role::kCandidate: return "candidate";
    case Role::kLeader: return "leader";
  }
  return "?";
}

Raft::Raft(const Config& config, const HardState& hard_state, std::vector<Entry> log)
    : Raft(config, hard_state, SnapshotRef{}, std::move(log)) {}

Raft::Raft(const Config& config, const HardState& hard_state, const SnapshotRef& base,
           std::vector<Entry> log)
    : config_(config),
      term_(hard_state.term),
      vote_(hard_state.vote),
      persisted_hard_state_(hard_state),
      snapshot_(base),
      log_(std::move(log)),
      rng_(config.seed * 0x9E3779B97F4A7C15ull + config.id) {
  CHECK_GT(config_.id, 0u) << "member id must be positive";
  CHECK_GE(config_.election_ticks, 1);
  CHECK_GE(config_.heartbeat_ticks, 1);
  if (snapshot_.index == 0) {
    snapshot_.term = 0;
    snapshot_.config =
        config_.bootstrap.members_size() > 0 ? config_.bootstrap : VotersConfig(config_.voters);
  }
  const std::string bad = CheckMembership(snapshot_.config);
  CHECK(bad.empty()) << "invalid initial configuration: " << bad;
  for (size_t i = 0; i < log_.size(); ++i) {
    CHECK_EQ(log_[i].index(), snapshot_.index + i + 1) << "recovered log is not contiguous";
    const uint64_t previous = i == 0 ? snapshot_.term : log_[i - 1].term();
    CHECK(log_[i].term() >= previous) << "log terms decrease at " << log_[i].index();
  }
  CHECK_GE(term_, last_term()) << "hard state term is behind the log";
  TrackConfigs(log_, 0);
  config_changed_ = true;  // the first Ready tells the service the configuration
  commit_ = snapshot_.index;
  applied_sent_ = snapshot_.index;
  unstable_from_ = last_index() + 1;
  durable_index_ = last_index();
  BecomeFollower(term_, 0);
}

uint64_t Raft::TermAt(uint64_t index) const {
  if (index == snapshot_.index) return snapshot_.term;
  if (index < snapshot_.index || index > last_index()) return 0;
  return log_[index - snapshot_.index - 1].term();
}

bool Raft::IsVoter(uint64_t id) const {
  const MemberConfig* m = FindMember(membership(), id);
  return m != nullptr && m->voter();
}

const MembershipConfig& Raft::membership() const {
  return configs_.empty() ? snapshot_.config : configs_.back().second;
}

uint64_t Raft::membership_index() const {
  return configs_.empty() ? snapshot_.index : configs_.back().first;
}

MembershipConfig Raft::MembershipAt(uint64_t index) const {
  for (auto it = configs_.rbegin(); it != configs_.rend(); ++it) {
    if (it->first <= index) return it->second;
  }
  return snapshot_.config;
}

void Raft::TrackConfigs(const std::vector<Entry>& entries, size_t from) {
  for (size_t i = from; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.type() != ENTRY_CONFIG) continue;
    MembershipConfig config;
    std::string bad;
    if (!config.ParseFromString(e.data())) {
      bad = "does not parse";
    } else {
      bad = CheckMembership(config);
    }
    if (!bad.empty()) {
      // Every member sees the same entry, so every member ignores it alike.
      LOG(ERROR) << "member " << config_.id << " ignores configuration entry " << e.index()
                 << ": " << bad;
      continue;
    }
    configs_.emplace_back(e.index(), std::move(config));
  }
}

bool Raft::Compact(uint64_t index) {
  if (index <= snapshot_.index || index > applied_sent_ || index >= unstable_from_) return false;
  SnapshotRef next;
  next.index = index;
  next.term = TermAt(index);
  next.config = MembershipAt(index);
  next.cluster_time_ms = EntryAt(index).cluster_time_ms();
  log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(index - snapshot_.index));
  while (!configs_.empty() && configs_.front().first <= index) configs_.erase(configs_.begin());
  snapshot_ = std::move(next);
  VLOG(1) << "member " << config_.id << " compacted its log up to " << index;
  return true;
}

bool Raft::LogUpToDate(uint64_t last_index, uint64_t last_term) const {
  return last_term > this->last_term() ||
         (last_term == this->last_term() && last_index >= this->last_index());
}

const Progress* Raft::ProgressOf(uint64_t peer) const {
  if (role_ != Role::kLeader) return nullptr;
  auto it = progress_.find(peer);
  return it == progress_.end() ? nullptr : &it->second;
}

void Raft::ResetElectionTimer() {
  election_elapsed_ = 0;
  randomized_election_timeout_ =
      config_.election_ticks + static_cast<int>(rng_() % static_cast<uint64_t>(config_.election_ticks));
}

void Raft::Send(Message m) {
  m.from = config_.id;
  msgs_.push_back(std::move(m));
}

void Raft::FailPendingReads() {
  for (const PendingRead& r : pending_reads_) failed_reads_.push_back(r.id);
  pending_reads_.clear();
  read_round_needed_ = false;
}

void Raft::BecomeFollower(uint64_t term, uint64_t leader) {
  if (role_ == Role::kLeader) FailPendingReads();
  if (term > term_) {
    term_ = term;
    vote_ = 0;
  }
  if (role_ != Role::kFollower || leader_id_ != leader) {
    VLOG(1) << "member " << config_.id << " follower in term " << term_ << ", leader " << leader;
  }
  role_ = Role::kFollower;
  leader_id_ = leader;
  transfer_target_ = 0;
  progress_.clear();
  acked_round_.clear();
  votes_granted_.clear();
  votes_rejected_.clear();
  ResetElectionTimer();
}

void Raft::BecomePreCandidate() {
  role_ = Role::kPreCandidate;
  leader_id_ = 0;
  votes_granted_.clear();
  votes_rejected_.clear();
  ResetElectionTimer();
}

void Raft::BecomeCandidate() {
  role_ = Role::kCandidate;
  ++term_;
  vote_ = config_.id;
  leader_id_ = 0;
  votes_granted_.clear();
  votes_rejected_.clear();
  ResetElectionTimer();
}

void Raft::StartElection(bool pre_vote) {
  if (pre_vote) {
    BecomePreCandidate();
  } else {
    BecomeCandidate();
  }
  LOG(INFO) << "member " << config_.id << " starts " << (pre_vote ? "pre-vote" : "election")
            << " for term " << (pre_vote ? term_ + 1 : term_) << " (last log " << last_index()
            << "/" << last_term() << ")";
  votes_granted_.insert(config_.id);
  if (TallyVotes(VoterCount(), votes_granted_.size(), 0) == VoteResult::kWon) {
    if (pre_vote) {
      StartElection(false);
    } else {
      BecomeLeader();
    }
    return;
  }
  for (uint64_t peer : voters()) {
    if (peer == config_.id) continue;
    Message m;
    m.type = MessageType::kVote;
    m.vote.set_transfer(campaign_transfer_);
    m.to = peer;
    m.vote.set_term(pre_vote ? term_ + 1 : term_);
    m.vote.set_candidate_id(config_.id);
    m.vote.set_last_log_index(last_index());
    m.vote.set_last_log_term(last_term());
    m.vote.set_pre_vote(pre_vote);
    m.vote.set_to(peer);
    Send(std::move(m));
  }
}

void Raft::Tick() {
  if (role_ == Role::kLeader) {
    LeaderTick();
    return;
  }
  ++election_elapsed_;
  if (election_elapsed_ >= randomized_election_timeout_ && IsVoter(config_.id)) {
    campaign_transfer_ = false;
    StartElection(config_.pre_vote);
  }
}

void Raft::HandleTimeoutNow(const Message& m) {
  if (role_ == Role::kLeader || !IsVoter(config_.id)) {
    LOG(WARNING) << "member " << config_.id << " ignores " << m.DebugString() << " (it is "
                 << RoleName(role_) << (IsVoter(config_.id) ? "" : ", not a voter") << ")";
    return;
  }
  LOG(INFO) << "member " << config_.id << " was asked by leader " << m.from
            << " to take over; campaigning for term " << term_ + 1;
  // No PreVote: the leader asked for this election, and the voters are told
  // (transfer) so that leader stickiness does not refuse it.
  campaign_transfer_ = true;
  StartElection(false);
}

void Raft::RejectSnapshot(const Message& m) {
  Message resp;
  resp.type = MessageType::kSnapshotResp;
  resp.to = m.from;
  resp.rpc_id = m.rpc_id;
  resp.snapshot_resp.set_term(term_);
  resp.snapshot_resp.set_from(config_.id);
  resp.snapshot_resp.set_success(false);
  resp.snapshot_resp.set_last_log_index(last_index());
  Send(std::move(resp));
}

void Raft::RejectAppend(const Message& m) {
  Message resp;
  resp.type = MessageType::kAppendResp;
  resp.to = m.from;
  resp.rpc_id = m.rpc_id;
  resp.append_resp.set_term(term_);
  resp.append_resp.set_from(config_.id);
  resp.append_resp.set_success(false);
  resp.append_resp.set_rejected_index(m.append.prev_log_index());
  resp.append_resp.set_last_log_index(last_index());
  Send(std::move(resp));
}

void Raft::Step(const Message& m) {
  if (m.to != config_.id) {
    LOG(WARNING) << "member " << config_.id << " dropped misrouted " << m.DebugString();
    return;
  }
  const uint64_t mterm = m.Term();
  if (mterm > term_) {
    if (m.type == MessageType::kVote) {
      // Leader stickiness: a member that heard from a live leader within the
      // minimum election timeout neither grants a vote nor adopts the term.
      const bool in_lease = config_.check_quorum && !m.vote.transfer() && leader_id_ != 0 &&
                            election_elapsed_ < config_.election_ticks;
      if (in_lease) {
        Message resp;
        resp.type = MessageType::kVoteResp;
        resp.to = m.from;
        resp.rpc_id = m.rpc_id;
        resp.vote_resp.set_term(term_);
        resp.vote_resp.set_from(config_.id);
        resp.vote_resp.set_granted(false);
        resp.vote_resp.set_pre_vote(m.vote.pre_vote());
        Send(std::move(resp));
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
  } else if (mterm < term_) {
    // A stale request still gets an answer carrying our term, so the sender
    // learns it is behind; stale responses are dropped.
    if (m.type == MessageType::kAppend) {
      // No read_round: this answer carries our (newer) term, and echoing the
      // old request's round could confirm a ReadIndex round of a later
      // leadership of the sender in this term.
      RejectAppend(m);
    } else if (m.type == MessageType::kSnapshot) {
      RejectSnapshot(m);
    } else if (m.type == MessageType::kVote) {
      Message resp;
      resp.type = MessageType::kVoteResp;
      resp.to = m.from;
      resp.rpc_id = m.rpc_id;
      resp.vote_resp.set_term(term_);
      resp.vote_resp.set_from(config_.id);
      resp.vote_resp.set_granted(false);
      resp.vote_resp.set_pre_vote(m.vote.pre_vote());
      Send(std::move(resp));
    }
    return;
  }

  switch (m.type) {
    case MessageType::kAppend:
      if (role_ == Role::kLeader) {
        // Two leaders in one term would violate election safety: the sender
        // is faulty. Refuse, but answer: the service holds the RPC open
        // until the core replies to it.
        LOG(ERROR) << "member " << config_.id << " is leader of term " << term_
                   << " and received " << m.DebugString();
        RejectAppend(m);
        return;
      }
      if (role_ != Role::kFollower) BecomeFollower(term_, m.from);
      HandleAppendEntries(m);
      break;
    case MessageType::kAppendResp:
      if (role_ == Role::kLeader) HandleAppendResponse(m);
      break;
    case MessageType::kVote:
      HandleVoteRequest(m);
      break;
    case MessageType::kVoteResp:
      HandleVoteResponse(m);
      break;
    case MessageType::kSnapshot:
      if (role_ == Role::kLeader) {
        LOG(ERROR) << "member " << config_.id << " is leader of term " << term_
                   << " and received " << m.DebugString();
        RejectSnapshot(m);
        return;
      }
      if (role_ != Role::kFollower) BecomeFollower(term_, m.from);
      HandleInstallSnapshot(m);
      break;
    case MessageType::kSnapshotResp:
      if (role_ == Role::kLeader) HandleSnapshotResponse(m);
      break;
    case MessageType::kTimeoutNow:
      HandleTimeoutNow(m);
      break;
  }
}

void Raft::HandleVoteRequest(const Message& m) {
  const RequestVoteRequest& req = m.vote;
  const bool can_vote = vote_ == req.candidate_id() || (vote_ == 0 && leader_id_ == 0) ||
                        (req.pre_vote() && req.term() > term_);
  const bool grant = can_vote && LogUpToDate(req.last_log_index(), req.last_log_term());
  if (grant && !req.pre_vote()) {
    vote_ = req.candidate_id();
    ResetElectionTimer();
  }
  Message resp;
  resp.type = MessageType::kVoteResp;
  resp.to = m.from;
  resp.rpc_id = m.rpc_id;
  resp.vote_resp.set_term(grant && req.pre_vote() ? req.term() : term_);
  resp.vote_resp.set_from(config_.id);
  resp.vote_resp.set_granted(grant);
  resp.vote_resp.set_pre_vote(req.pre_vote());
  VLOG(1) << "member " << config_.id << (grant ? " grants " : " denies ")
          << (req.pre_vote() ? "pre-vote" : "vote") << " to " << req.candidate_id() << " for term "
          << req.term();
  Send(std::move(resp));
}

void Raft::HandleVoteResponse(const Message& m) {
  const RequestVoteResponse& resp = m.vote_resp;
  const Role expected = resp.pre_vote() ? Role::kPreCandidate : Role::kCandidate;
  if (role_ != expected) return;
  if (!IsVoter(m.from)) return;  // a learner's vote does not count
  if (resp.granted()) {
    votes_granted_.insert(m.from);
  } else {
    votes_rejected_.insert(m.from);
  }
  switch (TallyVotes(VoterCount(), votes_granted_.size(), votes_rejected_.size())) {
    case VoteResult::kWon:
      if (role_ == Role::kPreCandidate) {
        StartElection(false);
      } else {
        BecomeLeader();
      }
      break;
    case VoteResult::kLost:
      BecomeFollower(term_, 0);
      break;
    case VoteResult::kPending:
      break;
  }
}

void Raft::AppendToLog(std::vector<Entry> entries) {
  if (entries.empty()) return;
  const uint64_t first = entries.front().index();
  CHECK(first > snapshot_.index && first <= last_index() + 1)
      << "append at " << first << " outside " << first_index() << ".." << last_index() + 1;
  bool changed = false;
  if (first <= last_index()) {
    CHECK_GT(first, commit_) << "member " << config_.id << " would truncate committed entry";
    LOG(INFO) << "member " << config_.id << " truncates conflicting log suffix from " << first
              << " (last was " << last_index() << ")";
    log_.resize(first - first_index());
    unstable_from_ = std::min(unstable_from_, first);
    durable_index_ = std::min(durable_index_, first - 1);
    while (!configs_.empty() && configs_.back().first >= first) {
      configs_.pop_back();
      changed = true;
    }
  }
  const size_t old_size = log_.size();
  const size_t old_configs = configs_.size();
  for (Entry& e : entries) log_.push_back(std::move(e));
  TrackConfigs(log_, old_size);
  if (changed || configs_.size() != old_configs) OnMembershipChanged();
}

void Raft::OnMembershipChanged() {
  config_changed_ = true;
  LOG(INFO) << "member " << config_.id << " configuration now " << DescribeMembership(membership())
            << " (entry " << membership_index() << ")";
  // Requests queued for a server that is no longer a member are dropped:
  // the service dials the members of the configuration a Ready reports
  // (responses travel back on the call they answer and are kept).
  msgs_.erase(std::remove_if(msgs_.begin(), msgs_.end(),
                             [this](const Message& m) {
                               return !m.IsResponse() && FindMember(membership(), m.to) == nullptr;
                             }),
              msgs_.end());
  if (role_ != Role::kLeader) return;
  for (const MemberConfig& m : membership().members()) {
    if (m.id() == config_.id || progress_.count(m.id())) continue;
    Progress pr(last_index() + 1, config_.max_inflight_appends);
    pr.set_recent_active(true);
    progress_.emplace(m.id(), pr);
    acked_round_[m.id()] = 0;
  }
  for (auto it = progress_.begin(); it != progress_.end();) {
    if (FindMember(membership(), it->first) == nullptr) {
      acked_round_.erase(it->first);
      if (transfer_target_ == it->first) transfer_target_ = 0;
      it = progress_.erase(it);
    } else {
      ++it;
    }
  }
}

bool Raft::HasReady() const {
  if (pending_snapshot_ || config_changed_) return true;
  if (HardState{term_, vote_} != persisted_hard_state_) return true;
  if (unstable_from_ <= last_index()) return true;
  if (!msgs_.empty() || commit_ > applied_sent_) return true;
  if (!ready_reads_.empty() || !failed_reads_.empty() || read_round_needed_) return true;
  return false;
}

Ready Raft::GetReady() {
  if (role_ == Role::kLeader) {
    if (read_round_needed_) {
      read_round_needed_ = false;
      ++read_round_;
      BroadcastHeartbeat();
      AdvanceReadRounds();
    }
    BroadcastAppend();
  }
  Ready rd;
  if (pending_snapshot_) {
    rd.snapshot = std::move(pending_snapshot_);
    pending_snapshot_.reset();
  }
  if (config_changed_) {
    rd.config = membership();
    config_changed_ = false;
  }
  HardState hs{term_, vote_};
  if (hs != persisted_hard_state_) {
    rd.hard_state = hs;
    persisted_hard_state_ = hs;
  }
  if (unstable_from_ <= last_index()) {
    rd.entries.assign(log_.begin() + static_cast<std::ptrdiff_t>(unstable_from_ - first_index()),
                      log_.end());
    unstable_from_ = last_index() + 1;
  }
  rd.messages = std::move(msgs_);
  msgs_.clear();
  if (commit_ > applied_sent_) {
    rd.committed.assign(log_.begin() + static_cast<std::ptrdiff_t>(applied_sent_ - snapshot_.index),
                        log_.begin() + static_cast<std::ptrdiff_t>(commit_ - snapshot_.index));
    applied_sent_ = commit_;
  }
  rd.reads = std::move(ready_reads_);
  ready_reads_.clear();
  rd.failed_reads = std::move(failed_reads_);
  failed_reads_.clear();
  return rd;
}

void Raft::Advance(const Ready& rd) {
  if (!rd.entries.empty()) {
    const Entry& last = rd.entries.back();
    // The entries may have been replaced by a conflicting suffix after
    // GetReady(); only count them durable if they are still in the log.
    if (TermAt(last.index()) == last.term()) {
      durable_index_ = std::max(durable_index_, last.index());
    } else {
      durable_index_ = std::min(durable_index_, rd.entries.front().index() - 1);
    }
  }
  if (role_ == Role::kLeader) MaybeAdvanceCommit();
}

}  // namespace raftkv::raft
