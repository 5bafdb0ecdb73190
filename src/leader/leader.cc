// The leader role of the consensus core: proposals, replication with
// batching and pipelining (one Progress per follower), commit by counting
// durable replicas of current-term entries, heartbeats, CheckQuorum and
// ReadIndex heartbeat rounds.
#include <glog/logging.h>

#include <algorithm>

#include "raft/raft.h"

namespace raftkv::raft {

void Raft::BecomeLeader() {
  CHECK(role_ == Role::kCandidate);
  role_ = Role::kLeader;
  campaign_transfer_ = false;
  transfer_target_ = 0;
  leader_id_ = config_.id;
  votes_granted_.clear();
  votes_rejected_.clear();
  progress_.clear();
  acked_round_.clear();
  pending_reads_.clear();
  read_round_ = 0;
  read_round_needed_ = false;
  heartbeat_elapsed_ = 0;
  election_elapsed_ = 0;
  for (const MemberConfig& member : membership().members()) {
    if (member.id() == config_.id) continue;
    Progress pr(last_index() + 1, config_.max_inflight_appends);
    pr.set_recent_active(true);
    progress_.emplace(member.id(), pr);
    acked_round_[member.id()] = 0;
  }
  leader_time_ms_ = log_.empty() ? snapshot_.cluster_time_ms : log_.back().cluster_time_ms();
  Entry noop;
  noop.set_term(term_);
  noop.set_cluster_time_ms(leader_time_ms_);
  noop.set_index(last_index() + 1);
  noop.set_type(ENTRY_NOOP);
  term_start_index_ = noop.index();
  std::vector<Entry> entries;
  entries.push_back(std::move(noop));
  AppendToLog(std::move(entries));
  LOG(INFO) << "member " << config_.id << " became leader of term " << term_ << " at index "
            << term_start_index_;
  BroadcastAppend();
}

ProposeResult Raft::Propose(std::string data) {
  ProposeResult result;
  if (role_ != Role::kLeader) return result;
  if (transfer_target_ != 0) {
    result.error = "leadership transfer to member " + std::to_string(transfer_target_) +
                   " in progress; retry shortly";
    return result;
  }
  Entry e;
  e.set_term(term_);
  e.set_index(last_index() + 1);
  e.set_type(ENTRY_COMMAND);
  e.set_cluster_time_ms(leader_time_ms_);
  e.set_data(std::move(data));
  result.accepted = true;
  result.index = e.index();
  result.term = term_;
  log_.push_back(std::move(e));
  // Entries are sent to followers in GetReady(), so that every proposal made
  // between two Ready cycles travels in one AppendEntries (batching).
  return result;
}

ProposeResult Raft::ProposeMembershipChange(const MembershipChange& change) {
  ProposeResult result;
  if (role_ != Role::kLeader) return result;
  if (transfer_target_ != 0) {
    result.error = "leadership transfer to member " + std::to_string(transfer_target_) +
                   " in progress; retry shortly";
    return result;
  }
  if (membership_index() > commit_) {
    result.error = "the configuration change at index " + std::to_string(membership_index()) +
                   " is not committed yet; one change at a time";
    return result;
  }
  if (commit_ < term_start_index_) {
    // Ongaro, "bug in single-server membership changes" (raft-dev, 2015): a
    // new leader must commit an entry of its term before changing the
    // configuration, or two overlapping changes from different terms can
    // produce disjoint majorities.
    result.error = "the leader has not committed an entry of its term yet; retry shortly";
    return result;
  }
  MembershipConfig next;
  std::string bad = ApplyChange(membership(), change, &next);
  if (bad.empty() && change.type == ChangeType::kPromote) {
    auto it = progress_.find(change.id);
    const uint64_t match = it == progress_.end() ? 0 : it->second.match();
    if (match + config_.promote_max_lag < last_index()) {
      bad = "learner " + std::to_string(change.id) + " is at index " + std::to_string(match) +
            ", " + std::to_string(last_index() - match) +
            " entries behind the leader's last index " + std::to_string(last_index()) +
            " (at most " + std::to_string(config_.promote_max_lag) +
            " allowed); retry when it has caught up";
    }
  }
  if (!bad.empty()) {
    result.error = bad;
    return result;
  }
  Entry e;
  e.set_term(term_);
  e.set_index(last_index() + 1);
  e.set_type(ENTRY_CONFIG);
  e.set_cluster_time_ms(leader_time_ms_);
  e.set_data(next.SerializeAsString());
  result.accepted = true;
  result.index = e.index();
  result.term = term_;
  LOG(INFO) << "member " << config_.id << " proposes " << ChangeTypeName(change.type) << " "
            << change.id << " at index " << e.index() << ": " << DescribeMembership(next);
  std::vector<Entry> entries;
  entries.push_back(std::move(e));
  AppendToLog(std::move(entries));  // takes effect now (OnMembershipChanged)
  return result;
}

std::string Raft::TransferLeadership(uint64_t target) {
  if (role_ != Role::kLeader) return "not leader";
  if (target == config_.id) return "member " + std::to_string(target) + " is already the leader";
  if (!IsVoter(target) || progress_.count(target) == 0) {
    return "member " + std::to_string(target) + " is not a voter";
  }
  if (transfer_target_ != 0) {
    return "a transfer to member " + std::to_string(transfer_target_) + " is in progress";
  }
  transfer_target_ = target;
  transfer_elapsed_ = 0;
  timeout_now_sent_ = false;
  LOG(INFO) << "member " << config_.id << " transfers leadership to " << target << " (its match "
            << progress_.at(target).match() << ", last index " << last_index() << ")";
  MaybeSendTimeoutNow();
  if (!timeout_now_sent_) {
    while (MaybeSendAppend(target, false)) {
    }
  }
  return "";
}

void Raft::MaybeSendTimeoutNow() {
  if (transfer_target_ == 0 || timeout_now_sent_) return;
  auto it = progress_.find(transfer_target_);
  if (it == progress_.end() || it->second.match() < last_index()) return;
  timeout_now_sent_ = true;
  SendTimeoutNow(transfer_target_);
}

void Raft::SendTimeoutNow(uint64_t peer) {
  Message m;
  m.type = MessageType::kTimeoutNow;
  m.to = peer;
  m.timeout_now.set_term(term_);
  m.timeout_now.set_leader_id(config_.id);
  m.timeout_now.set_to(peer);
  Send(std::move(m));
}

void Raft::MaybeStepDownRemoved() {
  if (role_ != Role::kLeader || IsVoter(config_.id) || commit_ < membership_index()) return;
  // Hand over at once to the most up-to-date voter rather than letting the
  // cluster wait for an election timeout.
  uint64_t best = 0;
  uint64_t best_match = 0;
  for (const auto& [peer, pr] : progress_) {
    if (IsVoter(peer) && pr.match() >= best_match) {
      best = peer;
      best_match = pr.match();
    }
  }
  LOG(INFO) << "member " << config_.id << " is no longer a voter (configuration at "
            << membership_index() << " committed); steps down"
            << (best != 0 && best_match == last_index()
                    ? ", asking member " + std::to_string(best) + " to take over"
                    : "");
  if (best != 0 && best_match == last_index()) SendTimeoutNow(best);
  BecomeFollower(term_, 0);
}

bool Raft::ReadIndex(uint64_t id) {
  if (role_ != Role::kLeader) return false;
  pending_reads_.push_back(PendingRead{id, std::max(commit_, term_start_index_), read_round_ + 1});
  read_round_needed_ = true;
  return true;
}

void Raft::ReportUnreachable(uint64_t peer) {
  if (role_ != Role::kLeader) return;
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

void Raft::LeaderTick() {
  leader_time_ms_ += static_cast<uint64_t>(config_.tick_ms);
  ++election_elapsed_;
  ++heartbeat_elapsed_;
  if (transfer_target_ != 0 && ++transfer_elapsed_ >= config_.election_ticks) {
    LOG(WARNING) << "member " << config_.id << " gives up transferring leadership to "
                 << transfer_target_ << " after an election timeout";
    transfer_target_ = 0;
  }
  if (election_elapsed_ >= config_.election_ticks) {
    election_elapsed_ = 0;
    if (config_.check_quorum) {
      size_t active = IsVoter(config_.id) ? 1 : 0;  // self
      for (auto& [peer, pr] : progress_) {
        if (pr.recent_active() && IsVoter(peer)) ++active;
        pr.set_recent_active(false);
      }
      if (!IsMajority(active, VoterCount())) {
        LOG(WARNING) << "member " << config_.id << " steps down in term " << term_
                     << ": no contact with a majority for an election timeout";
        BecomeFollower(term_, 0);
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

void Raft::BroadcastAppend() {
  for (auto& [peer, pr] : progress_) {
    while (MaybeSendAppend(peer, false)) {
    }
  }
}

void Raft::BroadcastHeartbeat() {
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

bool Raft::MaybeSendAppend(uint64_t peer, bool allow_empty) {
  if (role_ != Role::kLeader) return false;  // e.g. stepped down after its removal committed
  auto found = progress_.find(peer);
  if (found == progress_.end()) return false;
  Progress& pr = found->second;
  if (pr.IsPaused()) return false;
  const uint64_t prev = pr.next() - 1;
  if (prev < snapshot_.index) {
    // The entries this follower needs were compacted away.
    SendSnapshot(peer);
    return false;
  }
  if (prev >= last_index() && !allow_empty) return false;
  Message m;
  m.type = MessageType::kAppend;
  m.to = peer;
  AppendEntriesRequest& req = m.append;
  req.set_term(term_);
  req.set_leader_id(config_.id);
  req.set_prev_log_index(prev);
  req.set_prev_log_term(TermAt(prev));
  req.set_leader_commit(commit_);
  req.set_read_round(read_round_);
  req.set_to(peer);
  size_t bytes = 0;
  uint64_t last = prev;
  for (uint64_t i = pr.next(); i <= last_index(); ++i) {
    const Entry& e = EntryAt(i);
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
  pr.OnSent(last);
  Send(std::move(m));
  return last > prev;  // whether entries went out (the caller may send more)
}

void Raft::SendSnapshot(uint64_t peer) {
  Progress& pr = progress_.at(peer);
  pr.BecomeSnapshot(snapshot_.index);
  Message m;
  m.type = MessageType::kSnapshot;
  m.to = peer;
  InstallSnapshotRequest& req = m.snapshot;
  req.set_term(term_);
  req.set_leader_id(config_.id);
  req.set_last_index(snapshot_.index);
  req.set_last_term(snapshot_.term);
  *req.mutable_config() = snapshot_.config;
  req.set_to(peer);
  req.set_cluster_time_ms(snapshot_.cluster_time_ms);
  LOG(INFO) << "member " << config_.id << " sends snapshot " << snapshot_.index << "/"
            << snapshot_.term << " to " << peer << " (its next index " << pr.next()
            << " is compacted)";
  Send(std::move(m));
}

void Raft::HandleSnapshotResponse(const Message& m) {
  auto it = progress_.find(m.from);
  if (it == progress_.end()) return;
  Progress& pr = it->second;
  const InstallSnapshotResponse& resp = m.snapshot_resp;
  pr.set_recent_active(true);
  if (pr.state() != Progress::State::kSnapshot) return;  // stale
  if (resp.success() && resp.match_index() <= last_index()) {
    pr.OnSnapshotInstalled(resp.match_index());
    MaybeAdvanceCommit();
  } else {
    LOG(WARNING) << "member " << config_.id << ": " << m.from << " refused snapshot "
                 << pr.pending_snapshot();
    pr.BecomeProbe();
  }
  while (MaybeSendAppend(m.from, false)) {
  }
}

void Raft::SendHeartbeat(uint64_t peer) {
  const Progress& pr = progress_.at(peer);
  Message m;
  m.type = MessageType::kAppend;
  m.to = peer;
  AppendEntriesRequest& req = m.append;
  req.set_term(term_);
  req.set_leader_id(config_.id);
  // The follower is known to hold the log up to match: the check succeeds and
  // the commit index sent never exceeds what the follower holds.
  // (Below the snapshot the term of match is unknown here: prev 0 always
  // matches, and the follower answers with how far it really is.)
  const uint64_t prev = pr.match() >= snapshot_.index ? pr.match() : 0;
  req.set_prev_log_index(prev);
  req.set_prev_log_term(TermAt(prev));
  req.set_leader_commit(std::min(commit_, prev));
  req.set_read_round(read_round_);
  req.set_to(peer);
  Send(std::move(m));
}

void Raft::HandleAppendResponse(const Message& m) {
  const AppendEntriesResponse& resp = m.append_resp;
  auto it = progress_.find(m.from);
  if (it == progress_.end()) return;
  if (resp.success() && resp.match_index() > last_index()) {
    // A leader's log only grows while it leads, so no correct follower
    // matches beyond it. Believing it would make match (and next = match + 1,
    // which wraps at 2^64) point outside the log.
    LOG(ERROR) << "member " << config_.id << " ignores " << m.DebugString()
               << ": match index beyond its last index " << last_index();
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
    if (resp.success()) pr.OnSuccess(resp.match_index());
    if (pr.match() >= pr.pending_snapshot()) {
      pr.OnSnapshotInstalled(pr.match());
      MaybeAdvanceCommit();
    } else {
      return;
    }
  } else if (resp.success()) {
    const bool advanced = pr.OnSuccess(resp.match_index());
    if (pr.state() == Progress::State::kProbe && resp.match_index() + 1 >= pr.next()) {
      pr.BecomeReplicate();
    } else if (pr.state() == Progress::State::kProbe) {
      pr.ResumeProbe();
    }
    if (advanced) MaybeAdvanceCommit();
  } else if (resp.last_log_index() < pr.match()) {
    // The follower's log is shorter than what it acknowledged as durable: it
    // lost entries on a restart (see Progress::OnRegressed). Its rejections
    // of prev = match would otherwise be taken for stale answers (or clamp
    // the probe to match + 1) forever, and it would never catch up with this
    // leader. (A truly stale rejection lands here too; the cost is one
    // probe.)
    LOG(WARNING) << "member " << config_.id << ": follower " << m.from << " holds entries only up to "
                 << resp.last_log_index() << ", below its acknowledged match " << pr.match()
                 << "; replicating again from " << resp.last_log_index() + 1;
    pr.OnRegressed(resp.last_log_index());
  } else {
    // Fast back-off (Raft thesis 5.3): skip the follower's whole conflicting
    // term, or jump to the end of its shorter log.
    uint64_t hint = resp.conflict_index();
    if (resp.conflict_term() > 0) {
      for (uint64_t i = std::min(resp.rejected_index(), last_index()); i > 0; --i) {
        const uint64_t t = TermAt(i);
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

bool Raft::MaybeAdvanceCommit() {
  std::vector<uint64_t> matches;
  if (IsVoter(config_.id)) matches.push_back(durable_index_);
  for (const auto& [peer, pr] : progress_) {
    if (IsVoter(peer)) matches.push_back(pr.match());
  }
  const uint64_t quorum_match = MajorityValue(std::move(matches), VoterCount());
  // Only entries of the current term are committed by counting replicas
  // (Raft 5.4.2); earlier entries commit with them.
  if (quorum_match > commit_ && TermAt(quorum_match) == term_) {
    commit_ = quorum_match;
    MaybeStepDownRemoved();
    return true;
  }
  return false;
}

void Raft::AdvanceReadRounds() {
  if (pending_reads_.empty()) return;
  std::vector<uint64_t> rounds;
  if (IsVoter(config_.id)) rounds.push_back(read_round_);  // self
  for (const auto& [peer, round] : acked_round_) {
    if (IsVoter(peer)) rounds.push_back(round);
  }
  if (!IsMajority(rounds.size(), VoterCount())) return;
  const uint64_t confirmed = MajorityValue(std::move(rounds), VoterCount());
  while (!pending_reads_.empty() && pending_reads_.front().round <= confirmed) {
    ready_reads_.push_back(ReadState{pending_reads_.front().id, pending_reads_.front().index});
    pending_reads_.pop_front();
  }
}

}  // namespace raftkv::raft
