#include "follower/follower.h"

#include <glog/logging.h>

#include <algorithm>

namespace raftkv::raft {

void Follower::HandleAppendEntries(const Message& m) {
  if (m.append.prev_log_index() < core_->log.snapshot().index) {
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
    out.set_prev_log_index(core_->log.snapshot().index);
    out.set_prev_log_term(core_->log.snapshot().term);
    out.set_leader_commit(req.leader_commit());
    out.set_read_round(req.read_round());
    out.set_seq(req.seq());
    out.set_to(req.to());
    for (const Entry& e : req.entries()) {
      if (e.index() > core_->log.snapshot().index) *out.add_entries() = e;
      // Its entry at the snapshot index must have the snapshot's term; one
      // that does not comes from a faulty sender: keep the claim, so the
      // log-matching check below refuses it instead of appending entries
      // of a foreign history after the snapshot.
      if (e.index() == core_->log.snapshot().index && e.term() != core_->log.snapshot().term) {
        out.set_prev_log_term(e.term());
      }
    }
    HandleAppendEntries(trimmed);
    return;
  }
  const AppendEntriesRequest& req = m.append;
  core_->leader_id = m.from;
  core_->election_elapsed = 0;
  core_->ticks_since_leader = 0;

  Message out = core_->ReplyTo(m, MessageType::kAppendResp);
  AppendEntriesResponse& resp = out.append_resp;
  resp.set_read_round(req.read_round());
  resp.set_seq(req.seq());

  const uint64_t prev = req.prev_log_index();
  // The first entry of the request that is not already in the log, if any.
  int skip = 0;
  while (skip < req.entries_size()) {
    const Entry& e = req.entries(skip);
    if (e.index() > core_->log.last_index() || core_->log.TermAt(e.index()) != e.term()) break;
    ++skip;
  }
  // A leader's log holds every committed entry (Leader Completeness), so no
  // correct AppendEntries contradicts this member's committed prefix: the
  // sender is faulty. Refuse it (rather than crash on the truncation CHECK)
  // and point the sender past our commit index.
  const bool contradicts_commit =
      (prev > 0 && prev <= core_->log.commit() && prev <= core_->log.last_index() && core_->log.TermAt(prev) != req.prev_log_term()) ||
      (skip < req.entries_size() && req.entries(skip).index() <= core_->log.commit());
  if (contradicts_commit) {
    LOG(ERROR) << "member " << core_->id() << " refuses " << m.DebugString()
               << ": it contradicts committed entries (commit index " << core_->log.commit() << ")";
    resp.set_success(false);
    resp.set_rejected_index(prev);
    resp.set_conflict_term(0);
    resp.set_conflict_index(core_->log.commit() + 1);
  } else if (prev > core_->log.last_index()) {
    resp.set_success(false);
    resp.set_rejected_index(prev);
    resp.set_conflict_term(0);
    resp.set_conflict_index(core_->log.last_index() + 1);
  } else if (prev > 0 && core_->log.TermAt(prev) != req.prev_log_term()) {
    const uint64_t conflict_term = core_->log.TermAt(prev);
    uint64_t first = prev;
    while (first > core_->log.commit() + 1 && core_->log.TermAt(first - 1) == conflict_term) --first;
    resp.set_success(false);
    resp.set_rejected_index(prev);
    resp.set_conflict_term(conflict_term);
    resp.set_conflict_index(first);
  } else {
    // Skip entries already present; truncate and append from the first
    // conflicting or new one.
    if (skip < req.entries_size()) {
      std::vector<Entry> fresh(req.entries().begin() + skip, req.entries().end());
      core_->AppendToLog(std::move(fresh));
    }
    const uint64_t last_new = prev + static_cast<uint64_t>(req.entries_size());
    const uint64_t new_commit = std::min(req.leader_commit(), last_new);
    core_->log.CommitTo(new_commit);
    resp.set_success(true);
    resp.set_match_index(last_new);
  }
  resp.set_last_log_index(core_->log.last_index());
  core_->Send(std::move(out));
}

void Follower::HandleInstallSnapshot(const Message& m) {
  const InstallSnapshotRequest& req = m.snapshot;
  core_->leader_id = m.from;
  core_->election_elapsed = 0;
  core_->ticks_since_leader = 0;
  Message out = core_->ReplyTo(m, MessageType::kSnapshotResp);
  InstallSnapshotResponse& resp = out.snapshot_resp;
  resp.set_success(true);
  const uint64_t index = req.last_index();
  if (index <= core_->log.commit()) {
    // Nothing new: this member already has (and will apply) all of it.
    resp.set_match_index(core_->log.commit());
  } else if (core_->log.TermAt(index) == req.last_term()) {
    // The log already holds the snapshot's last entry: keep the log (its
    // suffix may be ahead), just learn that it is committed.
    LOG(INFO) << "member " << core_->id() << " already holds snapshot " << index << "/"
              << req.last_term() << " in its log";
    core_->log.CommitTo(index);
    resp.set_match_index(index);
  } else {
    LOG(INFO) << "member " << core_->id() << " installs snapshot " << index << "/" << req.last_term()
              << " from " << m.from << " (its log " << core_->log.first_index() << ".." << core_->log.last_index()
              << ", commit " << core_->log.commit() << ", is discarded)";
    SnapshotRef base;
    base.index = index;
    base.term = req.last_term();
    base.config = req.config();
    base.cluster_time_ms = req.cluster_time_ms();
    core_->log.ResetToSnapshot(base);
    installed_ = base;
    core_->OnMembershipChanged();
    resp.set_match_index(index);
  }
  resp.set_last_log_index(core_->log.last_index());
  core_->Send(std::move(out));
}

std::optional<SnapshotRef> Follower::TakeInstalledSnapshot() {
  std::optional<SnapshotRef> out = std::move(installed_);
  installed_.reset();
  return out;
}

}  // namespace raftkv::raft
