#include "leader/leader.h"

#include <glog/logging.h>

#include <algorithm>

#include "raft/core/quorum.h"

namespace raftkv::raft {

Leader::Leader(Core* core) : core_(core), config_(core->config), log_(core->log) {
  CHECK(core_->role == Role::kLeader);
  core_->election_elapsed = 0;
  AddFollowers();
  leader_time_ms_ = log_.last_cluster_time_ms();
  Entry noop = NextEntry(ENTRY_NOOP, std::string());
  term_start_index_ = noop.index();
  core_->AppendToLog(std::move(noop));
  LOG(INFO) << "member " << config_.id << " became leader of term " << core_->term << " at index "
            << term_start_index_;
  BroadcastAppend();
}

void Leader::AddFollowers() {
  for (const MemberConfig& m : log_.membership().members()) {
    if (m.id() == config_.id || progress_.count(m.id())) continue;
    Progress pr(log_.last_index() + 1, config_.max_inflight_appends, config_.max_inflight_bytes);
    pr.set_recent_active(true);
    progress_.emplace(m.id(), pr);
    acked_round_[m.id()] = 0;
  }
}

void Leader::OnMembershipChanged() {
  AddFollowers();
  for (auto it = progress_.begin(); it != progress_.end();) {
    if (FindMember(log_.membership(), it->first) == nullptr) {
      acked_round_.erase(it->first);
      if (transfer_target_ == it->first) transfer_target_ = 0;
      it = progress_.erase(it);
    } else {
      ++it;
    }
  }
}

void Leader::StepDown() {
  FailPendingReads();
  core_->BecomeFollower(core_->term, 0);
}

void Leader::FailPendingReads() {
  for (const PendingRead& r : pending_reads_) core_->failed_reads.push_back(r.id);
  pending_reads_.clear();
  read_round_needed_ = false;
}

const Progress* Leader::ProgressOf(uint64_t peer) const {
  auto it = progress_.find(peer);
  return it == progress_.end() ? nullptr : &it->second;
}

void Leader::PrepareReady() {
  if (!leading()) return;
  if (read_round_needed_) {
    read_round_needed_ = false;
    ++read_round_;
    BroadcastHeartbeat();
    AdvanceReadRounds();
  }
  BroadcastAppend();
}

Entry Leader::NextEntry(EntryType type, std::string data) const {
  Entry e;
  e.set_term(core_->term);
  e.set_index(log_.last_index() + 1);
  e.set_type(type);
  e.set_cluster_time_ms(leader_time_ms_);
  e.set_data(std::move(data));
  return e;
}

Status Leader::TransferInProgress() const {
  return Status::FailedPrecondition("leadership transfer to member " +
                                    std::to_string(transfer_target_) +
                                    " in progress; retry shortly");
}

ProposeResult Leader::Propose(std::string data) {
  ProposeResult result;
  if (!leading()) return result;
  if (transfer_target_ != 0) {
    result.error = TransferInProgress();
    return result;
  }
  Entry e = NextEntry(ENTRY_COMMAND, std::move(data));
  result.accepted = true;
  result.index = e.index();
  result.term = core_->term;
  log_.Append(std::move(e));
  // Entries are sent to followers in GetReady(), so that every proposal made
  // between two Ready cycles travels in one AppendEntries (batching).
  return result;
}

ProposeResult Leader::ProposeMembershipChange(const MembershipChange& change) {
  ProposeResult result;
  if (!leading()) return result;
  if (transfer_target_ != 0) {
    result.error = TransferInProgress();
    return result;
  }
  if (log_.membership_index() > log_.commit()) {
    result.error = Status::FailedPrecondition("the configuration change at index " +
                                              std::to_string(log_.membership_index()) +
                                              " is not committed yet; one change at a time");
    return result;
  }
  if (log_.commit() < term_start_index_) {
    // Ongaro, "bug in single-server membership changes" (raft-dev, 2015): a
    // new leader must commit an entry of its term before changing the
    // configuration, or two overlapping changes from different terms can
    // produce disjoint majorities.
    result.error =
        Status::FailedPrecondition("the leader has not committed an entry of its term yet; retry shortly");
    return result;
  }
  MembershipConfig next;
  Status bad = ApplyChange(log_.membership(), change, &next);
  if (bad.ok() && change.type == ChangeType::kAddVoter) bad = CheckStartedQuorumAfterAdd(change.id);
  if (bad.ok() && change.type == ChangeType::kPromote) {
    auto it = progress_.find(change.id);
    const uint64_t match = it == progress_.end() ? 0 : it->second.match();
    // A learner that has not acknowledged an entry is not running (or
    // cannot be reached): as a voter it would count against the quorum.
    if (match == 0 || match + config_.promote_max_lag < log_.last_index()) {
      bad = Status(Status::Code::kFailedPrecondition,
                   "learner " + std::to_string(change.id) + " is at index " + std::to_string(match) + ", " +
                       std::to_string(log_.last_index() - match) + " entries behind the leader's last index " +
                       std::to_string(log_.last_index()) + " (at most " + std::to_string(config_.promote_max_lag) +
                       " allowed); retry when it has caught up",
                   Status::Reason::kLearnerNotReady);
    }
  }
  if (!bad.ok()) {
    result.error = bad;
    return result;
  }
  Entry e = NextEntry(ENTRY_CONFIG, next.SerializeAsString());
  result.accepted = true;
  result.index = e.index();
  result.term = core_->term;
  LOG(INFO) << "member " << config_.id << " proposes " << ChangeTypeName(change.type) << " "
            << change.id << " at index " << e.index() << ": " << DescribeMembership(next);
  // Takes effect now.
  if (core_->AppendToLog(std::move(e))) OnMembershipChanged();
  return result;
}

Status Leader::CheckStartedQuorumAfterAdd(uint64_t id) const {
  // A voter added before it runs counts against the quorum at once: refuse
  // unless the voters heard from lately are a majority of the larger set.
  // As etcd, one voter may take a second (the cluster waits for it to
  // start: there was no fault tolerance to lose).
  const size_t voters = core_->VoterCount();
  if (voters == 1) return Status::OK();
  size_t started = core_->IsVoter(config_.id) ? 1 : 0;
  for (const auto& [peer, pr] : progress_) {
    if (core_->IsVoter(peer) && pr.RecentlyActive()) ++started;
  }
  if (IsMajority(started, voters + 1)) return Status::OK();
  return Status(Status::Code::kFailedPrecondition,
                "adding voter " + std::to_string(id) + " would need " + std::to_string(MajoritySize(voters + 1)) +
                    " of " + std::to_string(voters + 1) + " voters running; " + std::to_string(started) +
                    " answer the leader. Add it as a learner, start it, then promote it",
                Status::Reason::kNotEnoughStarted);
}

Status Leader::TransferLeadership(uint64_t target) {
  if (!leading()) return Status::Unavailable("not leader");
  if (target == config_.id) {
    return Status::FailedPrecondition("member " + std::to_string(target) + " is already the leader");
  }
  if (!core_->IsVoter(target) || progress_.count(target) == 0) {
    return Status::FailedPrecondition("member " + std::to_string(target) + " is not a voter");
  }
  if (transfer_target_ != 0) {
    return Status::FailedPrecondition("a transfer to member " + std::to_string(transfer_target_) +
                                      " is in progress");
  }
  transfer_target_ = target;
  transfer_elapsed_ = 0;
  timeout_now_sent_ = false;
  LOG(INFO) << "member " << config_.id << " transfers leadership to " << target << " (its match "
            << progress_.at(target).match() << ", last index " << log_.last_index() << ")";
  MaybeSendTimeoutNow();
  if (!timeout_now_sent_) {
    while (MaybeSendAppend(target, false)) {
    }
  }
  return Status::OK();
}

void Leader::MaybeSendTimeoutNow() {
  if (transfer_target_ == 0 || timeout_now_sent_) return;
  auto it = progress_.find(transfer_target_);
  if (it == progress_.end() || it->second.match() < log_.last_index()) return;
  timeout_now_sent_ = true;
  SendTimeoutNow(transfer_target_);
}

void Leader::SendTimeoutNow(uint64_t peer) {
  Message m;
  m.type = MessageType::kTimeoutNow;
  m.to = peer;
  m.timeout_now.set_term(core_->term);
  m.timeout_now.set_leader_id(config_.id);
  m.timeout_now.set_to(peer);
  core_->Send(std::move(m));
}

void Leader::MaybeStepDownRemoved() {
  if (!leading() || core_->IsVoter(config_.id) || log_.commit() < log_.membership_index()) return;
  // Hand over at once to the most up-to-date voter rather than letting the
  // cluster wait for an election timeout.
  uint64_t best = 0;
  uint64_t best_match = 0;
  for (const auto& [peer, pr] : progress_) {
    if (core_->IsVoter(peer) && pr.match() >= best_match) {
      best = peer;
      best_match = pr.match();
    }
  }
  LOG(INFO) << "member " << config_.id << " is no longer a voter (configuration at "
            << log_.membership_index() << " committed); steps down"
            << (best != 0 && best_match == log_.last_index()
                    ? ", asking member " + std::to_string(best) + " to take over"
                    : "");
  if (best != 0 && best_match == log_.last_index()) SendTimeoutNow(best);
  StepDown();
}

void Leader::ReadIndex(uint64_t id) {
  pending_reads_.push_back(PendingRead{id, std::max(log_.commit(), term_start_index_), read_round_ + 1});
  read_round_needed_ = true;
}

void Leader::ReportUnreachable(uint64_t peer) {
  if (!leading()) return;
  auto it = progress_.find(peer);
  if (it == progress_.end()) return;
  if (it->second.state() == Progress::State::kReplicate ||
      it->second.state() == Progress::State::kSnapshot) {
    // kSnapshot: the transfer failed (the service reports that as
    // unreachable). Without this the follower would stay paused in
    // kSnapshot for ever; probing again sends the snapshot again if the
    // follower still needs it.
    it->second.BecomeProbe();
  } else {
    it->second.ResumeProbe();
  }
}

void Leader::Tick() {
  leader_time_ms_ += static_cast<uint64_t>(config_.tick_ms);
  ++core_->election_elapsed;
  ++heartbeat_elapsed_;
  if (transfer_target_ != 0 && ++transfer_elapsed_ >= config_.election_ticks) {
    LOG(WARNING) << "member " << config_.id << " gives up transferring leadership to "
                 << transfer_target_ << " after an election timeout";
    transfer_target_ = 0;
  }
  if (core_->election_elapsed >= config_.election_ticks) {
    core_->election_elapsed = 0;
    size_t active = core_->IsVoter(config_.id) ? 1 : 0;  // self
    for (auto& [peer, pr] : progress_) {
      if (pr.recent_active() && core_->IsVoter(peer)) ++active;
      pr.EndActivityWindow();
    }
    if (config_.check_quorum) {
      if (!IsMajority(active, core_->VoterCount())) {
        LOG(WARNING) << "member " << config_.id << " steps down in term " << core_->term
                     << ": no contact with a majority for an election timeout";
        StepDown();
        return;
      }
    }
  }
  if (heartbeat_elapsed_ >= config_.heartbeat_ticks) {
    heartbeat_elapsed_ = 0;
    // An election timeout's worth of heartbeat intervals.
    const int stall_limit = std::max(2, config_.election_ticks / config_.heartbeat_ticks);
    for (auto& [peer, pr] : progress_) {
      if (pr.CheckStalled(stall_limit)) {
        LOG(INFO) << "member " << config_.id << ": replication to " << peer
                  << " stalled at match " << pr.match() << "; probing";
        pr.BecomeProbe();
      }
    }
    BroadcastHeartbeat();
  }
}

void Leader::BroadcastAppend() {
  for (auto& [peer, pr] : progress_) {
    while (MaybeSendAppend(peer, false)) {
    }
  }
}

void Leader::BroadcastHeartbeat() {
  for (auto& [peer, pr] : progress_) {
    if (pr.state() == Progress::State::kProbe) {
      // The probe doubles as the heartbeat, and a lost probe is retried here.
      pr.ResumeProbe();
      MaybeSendAppend(peer, true);
    } else {
      SendHeartbeat(peer);
    }
  }
}

bool Leader::MaybeSendAppend(uint64_t peer, bool allow_empty) {
  if (!leading()) return false;  // e.g. stepped down after its removal committed
  auto found = progress_.find(peer);
  if (found == progress_.end()) return false;
  Progress& pr = found->second;
  if (pr.IsPaused()) return false;
  const uint64_t prev = pr.next() - 1;
  if (prev < log_.snapshot().index) {
    // The entries this follower needs were compacted away.
    SendSnapshot(peer);
    return false;
  }
  if (prev >= log_.last_index() && !allow_empty) return false;
  Message m;
  m.type = MessageType::kAppend;
  m.to = peer;
  AppendEntriesRequest& req = m.append;
  req.set_term(core_->term);
  req.set_leader_id(config_.id);
  req.set_prev_log_index(prev);
  req.set_prev_log_term(log_.TermAt(prev));
  req.set_leader_commit(log_.commit());
  req.set_read_round(read_round_);
  req.set_seq(++append_seq_);
  req.set_to(peer);
  size_t bytes = 0;
  uint64_t last = prev;
  for (uint64_t i = pr.next(); i <= log_.last_index(); ++i) {
    const Entry& e = log_.EntryAt(i);
    const size_t size = e.data().size() + 32;
    if (req.entries_size() > 0 &&
        (static_cast<size_t>(req.entries_size()) >= config_.max_append_entries ||
         bytes + size > config_.max_append_bytes)) {
      break;
    }
    *req.add_entries() = e;
    bytes += size;
    last = i;
  }
  pr.OnSent(last, bytes);
  core_->Send(std::move(m));
  return last > prev;  // whether entries went out (the caller may send more)
}

void Leader::SendSnapshot(uint64_t peer) {
  Progress& pr = progress_.at(peer);
  pr.BecomeSnapshot(log_.snapshot().index);
  Message m;
  m.type = MessageType::kSnapshot;
  m.to = peer;
  InstallSnapshotRequest& req = m.snapshot;
  req.set_term(core_->term);
  req.set_leader_id(config_.id);
  req.set_last_index(log_.snapshot().index);
  req.set_last_term(log_.snapshot().term);
  *req.mutable_config() = log_.snapshot().config;
  req.set_to(peer);
  req.set_cluster_time_ms(log_.snapshot().cluster_time_ms);
  LOG(INFO) << "member " << config_.id << " sends snapshot " << log_.snapshot().index << "/"
            << log_.snapshot().term << " to " << peer << " (its next index " << pr.next()
            << " is compacted)";
  core_->Send(std::move(m));
}

void Leader::HandleSnapshotResponse(const Message& m) {
  auto it = progress_.find(m.from);
  if (it == progress_.end()) return;
  Progress& pr = it->second;
  const InstallSnapshotResponse& resp = m.snapshot_resp;
  pr.set_recent_active(true);
  if (pr.state() != Progress::State::kSnapshot) return;  // stale
  if (resp.success() && resp.match_index() <= log_.last_index()) {
    pr.OnSnapshotInstalled(resp.match_index());
    pr.set_match_known_at_seq(append_seq_);
    MaybeAdvanceCommit();
  } else {
    LOG(WARNING) << "member " << config_.id << ": " << m.from << " refused snapshot "
                 << pr.pending_snapshot();
    pr.BecomeProbe();
  }
  while (MaybeSendAppend(m.from, false)) {
  }
}

void Leader::SendHeartbeat(uint64_t peer) {
  const Progress& pr = progress_.at(peer);
  Message m;
  m.type = MessageType::kAppend;
  m.to = peer;
  AppendEntriesRequest& req = m.append;
  req.set_term(core_->term);
  req.set_leader_id(config_.id);
  // The follower is known to hold the log up to match: the check succeeds and
  // the commit index sent never exceeds what the follower holds.
  // (Below the snapshot the term of match is unknown here: prev 0 always
  // matches, and the follower answers with how far it really is.)
  const uint64_t prev = pr.match() >= log_.snapshot().index ? pr.match() : 0;
  req.set_prev_log_index(prev);
  req.set_prev_log_term(log_.TermAt(prev));
  req.set_leader_commit(std::min(log_.commit(), prev));
  req.set_read_round(read_round_);
  req.set_seq(++append_seq_);
  req.set_to(peer);
  core_->Send(std::move(m));
}

void Leader::HandleAppendResponse(const Message& m) {
  const AppendEntriesResponse& resp = m.append_resp;
  auto it = progress_.find(m.from);
  if (it == progress_.end()) return;
  if (resp.success() && resp.match_index() > log_.last_index()) {
    // A leader's log only grows while it leads, so no correct follower
    // matches beyond it. Believing it would make match (and next = match + 1,
    // which wraps at 2^64) point outside the log.
    LOG(ERROR) << "member " << config_.id << " ignores " << m.DebugString()
               << ": match index beyond its last index " << log_.last_index();
    return;
  }
  Progress& pr = it->second;
  pr.set_recent_active(true);

  uint64_t& acked = acked_round_[m.from];
  if (resp.read_round() > acked) {
    acked = resp.read_round();
    AdvanceReadRounds();
  }

  if (pr.state() == Progress::State::kSnapshot) {
    // Appends answered while the snapshot streams (heartbeats, or replies to
    // older messages). If the follower already holds what the snapshot
    // covers (its reply to the transfer was lost), stop waiting for it.
    if (resp.success()) {
      pr.OnSuccess(resp.match_index());
      pr.set_match_known_at_seq(append_seq_);
    }
    if (pr.match() >= pr.pending_snapshot()) {
      pr.OnSnapshotInstalled(pr.match());
      MaybeAdvanceCommit();
    } else {
      return;
    }
  } else if (resp.success()) {
    const bool advanced = pr.OnSuccess(resp.match_index());
    pr.set_match_known_at_seq(append_seq_);
    if (pr.state() == Progress::State::kProbe && resp.match_index() + 1 >= pr.next()) {
      pr.BecomeReplicate();
    } else if (pr.state() == Progress::State::kProbe) {
      pr.ResumeProbe();
    }
    if (advanced) MaybeAdvanceCommit();
  } else if (resp.last_log_index() < pr.match() && resp.seq() > pr.match_known_at_seq()) {
    // The follower's log is shorter than what it acknowledged as durable: it
    // lost entries on a restart (see Progress::OnRegressed). Its rejections
    // of prev = match would otherwise be taken for stale answers (or clamp
    // the probe to match + 1) forever, and it would never catch up with this
    // leader. Only a rejection of a message sent after the leader learnt
    // that match says so: an older one (a second probe, or an append the
    // follower took before the one it was sent after) was overtaken, and
    // believing it would forget the match of a follower that has it all.
    LOG(WARNING) << "member " << config_.id << ": follower " << m.from << " holds entries only up to "
                 << resp.last_log_index() << ", below its acknowledged match " << pr.match()
                 << "; replicating again from " << resp.last_log_index() + 1;
    pr.OnRegressed(resp.last_log_index());
  } else {
    // Fast back-off (Raft thesis 5.3): skip the follower's whole conflicting
    // term, or jump to the end of its shorter log.
    uint64_t hint = resp.conflict_index();
    if (resp.conflict_term() > 0) {
      for (uint64_t i = std::min(resp.rejected_index(), log_.last_index()); i > 0; --i) {
        const uint64_t t = log_.TermAt(i);
        if (t == resp.conflict_term()) {
          hint = i + 1;
          break;
        }
        if (t < resp.conflict_term()) break;
      }
    }
    if (hint == 0) hint = 1;
    if (!pr.OnReject(resp.rejected_index(), hint)) {
      if (pr.state() == Progress::State::kProbe) pr.ResumeProbe();
    } else {
      VLOG(1) << "member " << config_.id << " backs off follower " << m.from << " to next "
              << pr.next();
    }
  }
  if (m.from == transfer_target_) MaybeSendTimeoutNow();
  while (MaybeSendAppend(m.from, false)) {
  }
}

bool Leader::MaybeAdvanceCommit() {
  std::vector<uint64_t> matches;
  if (core_->IsVoter(config_.id)) matches.push_back(log_.durable_index());
  for (const auto& [peer, pr] : progress_) {
    if (core_->IsVoter(peer)) matches.push_back(pr.match());
  }
  const uint64_t quorum_match = MajorityValue(std::move(matches), core_->VoterCount());
  // Only entries of the current term are committed by counting replicas
  // (Raft 5.4.2); earlier entries commit with them.
  if (quorum_match > log_.commit() && log_.TermAt(quorum_match) == core_->term) {
    log_.CommitTo(quorum_match);
    MaybeStepDownRemoved();
    return true;
  }
  return false;
}

void Leader::AdvanceReadRounds() {
  if (pending_reads_.empty()) return;
  std::vector<uint64_t> rounds;
  if (core_->IsVoter(config_.id)) rounds.push_back(read_round_);  // self
  for (const auto& [peer, round] : acked_round_) {
    if (core_->IsVoter(peer)) rounds.push_back(round);
  }
  if (!IsMajority(rounds.size(), core_->VoterCount())) return;
  const uint64_t confirmed = MajorityValue(std::move(rounds), core_->VoterCount());
  while (!pending_reads_.empty() && pending_reads_.front().round <= confirmed) {
    core_->ready_reads.push_back(ReadState{pending_reads_.front().id, pending_reads_.front().index});
    pending_reads_.pop_front();
  }
}

}  // namespace raftkv::raft
