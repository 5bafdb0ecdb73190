// The leader role of the consensus core: proposals, replication with
// batching and pipelining (one Progress per follower), commit by counting
// durable replicas of current-term entries, heartbeats, CheckQuorum and
// ReadIndex heartbeat rounds.
#include <glog/logging.h>

#include <algorithm>

#include "raft/raft.h"

namespace raftkv::raft {

void Raft::BecomeLeader() {
  CHECK(role_ == Role::kCandidate || config_.voters.size() == 1);
  role_ = Role::kLeader;
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
  for (uint64_t peer : config_.voters) {
    if (peer == config_.id) continue;
    Progress pr(last_index() + 1, config_.max_inflight_appends);
    pr.set_recent_active(true);
    progress_.emplace(peer, pr);
    acked_round_[peer] = 0;
  }
  leader_time_ms_ = log_.empty() ? 0 : log_.back().cluster_time_ms();
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
  if (it->second.state() == Progress::State::kReplicate) {
    it->second.BecomeProbe();
  } else {
    it->second.ResumeProbe();
  }
}

void Raft::LeaderTick() {
  leader_time_ms_ += static_cast<uint64_t>(config_.tick_ms);
  ++election_elapsed_;
  ++heartbeat_elapsed_;
  if (election_elapsed_ >= config_.election_ticks) {
    election_elapsed_ = 0;
    if (config_.check_quorum) {
      size_t active = 1;  // self
      for (auto& [peer, pr] : progress_) {
        if (pr.recent_active()) ++active;
        pr.set_recent_active(false);
      }
      if (active < Quorum()) {
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
  Progress& pr = progress_.at(peer);
  if (pr.IsPaused()) return false;
  const uint64_t prev = pr.next() - 1;
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
  req.set_prev_log_index(pr.match());
  req.set_prev_log_term(TermAt(pr.match()));
  req.set_leader_commit(std::min(commit_, pr.match()));
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

  if (resp.success()) {
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
  while (MaybeSendAppend(m.from, false)) {
  }
}

bool Raft::MaybeAdvanceCommit() {
  std::vector<uint64_t> matches;
  matches.reserve(config_.voters.size());
  matches.push_back(durable_index_);
  for (const auto& [peer, pr] : progress_) matches.push_back(pr.match());
  std::sort(matches.begin(), matches.end(), std::greater<uint64_t>());
  const uint64_t quorum_match = matches[Quorum() - 1];
  // Only entries of the current term are committed by counting replicas
  // (Raft 5.4.2); earlier entries commit with them.
  if (quorum_match > commit_ && TermAt(quorum_match) == term_) {
    commit_ = quorum_match;
    return true;
  }
  return false;
}

void Raft::AdvanceReadRounds() {
  if (pending_reads_.empty()) return;
  std::vector<uint64_t> rounds;
  rounds.push_back(read_round_);  // self
  for (const auto& [peer, round] : acked_round_) rounds.push_back(round);
  std::sort(rounds.begin(), rounds.end(), std::greater<uint64_t>());
  const uint64_t confirmed = rounds[Quorum() - 1];
  while (!pending_reads_.empty() && pending_reads_.front().round <= confirmed) {
    ready_reads_.push_back(ReadState{pending_reads_.front().id, pending_reads_.front().index});
    pending_reads_.pop_front();
  }
}

}  // namespace raftkv::raft
