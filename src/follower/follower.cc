// The follower side of replication: the log-matching check, truncation of a
// conflicting suffix, and following the leader's commit index.
#include <glog/logging.h>

#include <algorithm>

#include "raft/raft.h"

namespace raftkv::raft {

void Raft::HandleAppendEntries(const Message& m) {
  if (m.append.prev_log_index() < snapshot_.index) {
    // The request starts inside this member's snapshot, whose entries are
    // committed and so match the leader's (Leader Completeness). Drop the
    // covered entries and treat it as starting at the snapshot.
    Message trimmed;
    trimmed.type = m.type;
    trimmed.from = m.from;
    trimmed.to = m.to;
    trimmed.rpc_id = m.rpc_id;
    const AppendEntriesRequest& req = m.append;
    AppendEntriesRequest& out = trimmed.append;
    out.set_term(req.term());
    out.set_leader_id(req.leader_id());
    out.set_prev_log_index(snapshot_.index);
    out.set_prev_log_term(snapshot_.term);
    out.set_leader_commit(req.leader_commit());
    out.set_read_round(req.read_round());
    out.set_to(req.to());
    for (const Entry& e : req.entries()) {
      if (e.index() > snapshot_.index) *out.add_entries() = e;
      // Its entry at the snapshot index must have the snapshot's term; one
      // that does not comes from a faulty sender: keep the claim, so the
      // log-matching check below refuses it instead of appending entries
      // of a foreign history after the snapshot.
      if (e.index() == snapshot_.index && e.term() != snapshot_.term) {
        out.set_prev_log_term(e.term());
      }
    }
    HandleAppendEntries(trimmed);
    return;
  }
  const AppendEntriesRequest& req = m.append;
  leader_id_ = m.from;
  election_elapsed_ = 0;

  Message out;
  out.type = MessageType::kAppendResp;
  out.to = m.from;
  out.rpc_id = m.rpc_id;
  AppendEntriesResponse& resp = out.append_resp;
  resp.set_term(term_);
  resp.set_from(config_.id);
  resp.set_read_round(req.read_round());

  const uint64_t prev = req.prev_log_index();
  // The first entry of the request that is not already in the log, if any.
  int skip = 0;
  while (skip < req.entries_size()) {
    const Entry& e = req.entries(skip);
    if (e.index() > last_index() || TermAt(e.index()) != e.term()) break;
    ++skip;
  }
  // A leader's log holds every committed entry (Leader Completeness), so no
  // correct AppendEntries contradicts this member's committed prefix: the
  // sender is faulty. Refuse it (rather than crash on the truncation CHECK)
  // and point the sender past our commit index.
  const bool contradicts_commit =
      (prev > 0 && prev <= commit_ && prev <= last_index() && TermAt(prev) != req.prev_log_term()) ||
      (skip < req.entries_size() && req.entries(skip).index() <= commit_);
  if (contradicts_commit) {
    LOG(ERROR) << "member " << config_.id << " refuses " << m.DebugString()
               << ": it contradicts committed entries (commit index " << commit_ << ")";
    resp.set_success(false);
    resp.set_rejected_index(prev);
    resp.set_conflict_term(0);
    resp.set_conflict_index(commit_ + 1);
  } else if (prev > last_index()) {
    resp.set_success(false);
    resp.set_rejected_index(prev);
    resp.set_conflict_term(0);
    resp.set_conflict_index(last_index() + 1);
  } else if (prev > 0 && TermAt(prev) != req.prev_log_term()) {
    const uint64_t conflict_term = TermAt(prev);
    uint64_t first = prev;
    while (first > commit_ + 1 && TermAt(first - 1) == conflict_term) --first;
    resp.set_success(false);
    resp.set_rejected_index(prev);
    resp.set_conflict_term(conflict_term);
    resp.set_conflict_index(first);
  } else {
    // Skip entries already present; truncate and append from the first
    // conflicting or new one.
    if (skip < req.entries_size()) {
      std::vector<Entry> fresh(req.entries().begin() + skip, req.entries().end());
      AppendToLog(std::move(fresh));
    }
    const uint64_t last_new = prev + static_cast<uint64_t>(req.entries_size());
    const uint64_t new_commit = std::min(req.leader_commit(), last_new);
    if (new_commit > commit_) commit_ = new_commit;
    resp.set_success(true);
    resp.set_match_index(last_new);
  }
  resp.set_last_log_index(last_index());
  Send(std::move(out));
}

}  // namespace raftkv::raft

namespace raftkv::raft {

void Raft::HandleInstallSnapshot(const Message& m) {
  const InstallSnapshotRequest& req = m.snapshot;
  leader_id_ = m.from;
  election_elapsed_ = 0;
  Message out;
  out.type = MessageType::kSnapshotResp;
  out.to = m.from;
  out.rpc_id = m.rpc_id;
  InstallSnapshotResponse& resp = out.snapshot_resp;
  resp.set_term(term_);
  resp.set_from(config_.id);
  resp.set_success(true);
  const uint64_t index = req.last_index();
  if (index <= commit_) {
    // Nothing new: this member already has (and will apply) all of it.
    resp.set_match_index(commit_);
  } else if (TermAt(index) == req.last_term()) {
    // The log already holds the snapshot's last entry: keep the log (its
    // suffix may be ahead), just learn that it is committed.
    LOG(INFO) << "member " << config_.id << " already holds snapshot " << index << "/"
              << req.last_term() << " in its log";
    commit_ = index;
    resp.set_match_index(index);
  } else {
    LOG(INFO) << "member " << config_.id << " installs snapshot " << index << "/" << req.last_term()
              << " from " << m.from << " (its log " << first_index() << ".." << last_index()
              << ", commit " << commit_ << ", is discarded)";
    const bool had_configs = !configs_.empty();
    log_.clear();
    configs_.clear();
    snapshot_.index = index;
    snapshot_.term = req.last_term();
    snapshot_.config = req.config();
    snapshot_.cluster_time_ms = req.cluster_time_ms();
    commit_ = index;
    applied_sent_ = index;
    unstable_from_ = index + 1;
    durable_index_ = index;
    pending_snapshot_ = snapshot_;
    (void)had_configs;
    OnMembershipChanged();
    resp.set_match_index(index);
  }
  resp.set_last_log_index(last_index());
  Send(std::move(out));
}

}  // namespace raftkv::raft
