// The consensus core's view of the log: the snapshot it starts after, the
// entries in memory, the configurations they carry, and the indexes that
// say how far each entry has gone (handed to storage, durable, committed,
// handed out to apply). Leader and follower append to it; the Raft node
// reads its output for each Ready.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "raft/core/membership.h"
#include "raft/core/types.h"
#include "proto/internal.h"

namespace raftkv::raft {

class RaftLog {
 public:
  // `base` is the snapshot the state machine was restored to (index 0: none;
  // its config is then the bootstrap configuration), `entries` every entry
  // from base.index + 1 on, contiguous. `member` names this member in logs.
  // `applied` (<= the last entry): what the state machine applied already,
  // so committed and not handed out again.
  RaftLog(uint64_t member, const SnapshotRef& base, std::vector<Entry> entries, uint64_t applied = 0);

  uint64_t first_index() const { return snapshot_.index + 1; }
  uint64_t last_index() const { return snapshot_.index + entries_.size(); }
  uint64_t last_term() const { return entries_.empty() ? snapshot_.term : entries_.back().term(); }
  // Term of the entry at `index` (0 for index 0 or beyond the log; the
  // snapshot's term at snapshot().index; 0 below it: compacted).
  uint64_t TermAt(uint64_t index) const;
  // The entry at index (first_index() <= index <= last_index()).
  const Entry& EntryAt(uint64_t index) const { return entries_[index - first_index()]; }
  // The snapshot the in-memory log starts after (index 0: none).
  const SnapshotRef& snapshot() const { return snapshot_; }
  // The cluster time of the last entry (or of the snapshot's).
  uint64_t last_cluster_time_ms() const {
    return entries_.empty() ? snapshot_.cluster_time_ms : entries_.back().cluster_time_ms();
  }
  // Whether a log ending with (last_index, last_term) is at least as up to
  // date as this one (Raft 5.4.1).
  bool IsUpToDate(uint64_t last_index, uint64_t last_term) const {
    return last_term > this->last_term() ||
           (last_term == this->last_term() && last_index >= this->last_index());
  }

  // The configuration in effect (the latest in the log, committed or not)
  // and the index of its entry (0: bootstrap, or the snapshot's index when
  // it came from the snapshot).
  const MembershipConfig& membership() const {
    return configs_.empty() ? snapshot_.config : configs_.back().second;
  }
  uint64_t membership_index() const { return configs_.empty() ? snapshot_.index : configs_.back().first; }
  // The configuration in effect at `index` (snapshot().index <= index <=
  // last_index()).
  MembershipConfig MembershipAt(uint64_t index) const;

  // ---- appending ----
  // Appends `entries` (contiguous, starting in first_index()..last_index()+1);
  // a conflicting suffix from entries.front().index() on is truncated first
  // (never a committed entry). Returns true when the configuration in effect
  // changed (an ENTRY_CONFIG appended or truncated away).
  bool Append(std::vector<Entry> entries);
  // Appends one entry at last_index() + 1 (the leader's proposals). Returns
  // true when it is a configuration entry that took effect.
  bool Append(Entry entry);
  // Replaces everything with the leader's snapshot `base` (committed, and
  // durable once the Ready that carries it is handled).
  void ResetToSnapshot(const SnapshotRef& base);
  // The state machine holds a durable snapshot up to `index`: entries up to
  // it leave memory. False (nothing done) unless snapshot().index < index <=
  // the last index handed out to apply and below the unstable entries.
  bool Compact(uint64_t index);

  // ---- progress of the entries ----
  uint64_t commit() const { return commit_; }
  // Raises the commit index (never lowers it; at most last_index()).
  void CommitTo(uint64_t index);
  // The highest index durable in the local LogStore.
  uint64_t durable_index() const { return durable_index_; }
  // The last index handed out to apply.
  uint64_t applied_sent() const { return applied_sent_; }

  // Entries not yet handed to storage; TakeUnstable hands them out.
  bool HasUnstable() const { return unstable_from_ <= last_index(); }
  std::vector<Entry> TakeUnstable();
  // Committed entries not yet handed out to apply; TakeCommitted hands them out.
  bool HasCommittedToApply() const { return commit_ > applied_sent_; }
  std::vector<Entry> TakeCommitted();
  // The entries handed out by TakeUnstable are durable (unless a conflicting
  // suffix replaced them since).
  void OnPersisted(const std::vector<Entry>& entries);

 private:
  // Records the ENTRY_CONFIG entries of entries_ from position `from` on.
  void TrackConfigs(size_t from);

  uint64_t member_;
  // The log after the snapshot: entry i at entries_[i - snapshot_.index - 1].
  // snapshot_.config is the configuration in effect at snapshot_.index (the
  // bootstrap configuration when there is no snapshot).
  SnapshotRef snapshot_;
  std::vector<Entry> entries_;
  // The ENTRY_CONFIG entries in entries_, by index (ascending). The last one,
  // or snapshot_.config when there is none, is the configuration in effect.
  std::vector<std::pair<uint64_t, MembershipConfig>> configs_;
  uint64_t commit_ = 0;
  uint64_t applied_sent_ = 0;  // last index handed out by TakeCommitted
  // Entries with index >= unstable_from_ have not been handed to storage yet.
  uint64_t unstable_from_ = 1;
  // Highest index known durable in the local LogStore.
  uint64_t durable_index_ = 0;
};

}  // namespace raftkv::raft
