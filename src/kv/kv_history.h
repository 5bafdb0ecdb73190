// The store's recent changes: one event per key changed, in revision order,
// for watches and reads at a past revision. Bounded by a window of
// revisions and of bytes; whole revisions are dropped from the front, never
// the newest one. Local to a member (not replicated): a snapshot carries its
// newest revisions (KvStateMachine::SetSnapshotHistory), so after a restart
// or an installed snapshot it starts that far before the snapshot.
// Not thread-safe: the state machine guards it with its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace raftkv {

// A key's stored state.
struct KvRecord {
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct KvEvent {
  int64_t revision = 0;
  bool is_delete = false;
  std::string key;
  KvRecord kv;  // PUT: the record after; DELETE: only mod_revision (= revision)
  bool has_prev = false;
  KvRecord prev;  // the record before, when has_prev
  size_t Bytes() const { return sizeof(KvEvent) + key.size() + kv.value.size() + prev.value.size(); }
};

// Whether `key` is in [start, end) with etcd's conventions: end empty = the
// key `start` alone; end "\0" = every key >= start.
bool InKeyRange(const std::string& key, const std::string& start, const std::string& end);

class KvHistory {
 public:
  KvHistory(size_t max_revisions, size_t max_bytes)
      : max_revisions_(max_revisions), max_bytes_(max_bytes) {}

  void SetLimits(size_t max_revisions, size_t max_bytes);
  // Drops every event: the history now starts after `compacted`.
  void Reset(int64_t compacted);
  // An explicit compaction at `revision` (etcd's Compact): drops every event
  // before it (a watch may still start at it) and refuses reads before it.
  void CompactThrough(int64_t revision);
  // The revision of the last explicit compaction (0: none), as a snapshot
  // carries it.
  int64_t compact_revision() const { return compact_revision_; }
  void SetCompactRevision(int64_t revision) { compact_revision_ = revision; }
  // Appends the events of one revision (all with the same revision, above
  // every event kept), then trims to the window.
  void AppendRevision(std::deque<KvEvent>* events);

  // Every event with a revision above compacted() is kept.
  int64_t compacted() const { return compacted_; }
  // The oldest revision a read may be served at.
  int64_t read_floor() const { return compacted_ > compact_revision_ ? compacted_ : compact_revision_; }
  size_t size() const { return events_.size(); }
  size_t bytes() const { return bytes_; }
  const KvEvent& at(size_t i) const { return events_[i]; }
  // Index of the first event with revision >= `revision` (size() if none).
  size_t LowerBound(int64_t revision) const;

 private:
  void Trim();

  std::deque<KvEvent> events_;
  size_t bytes_ = 0;
  int64_t compacted_ = 0;
  int64_t compact_revision_ = 0;
  size_t max_revisions_;
  size_t max_bytes_;
};

}  // namespace raftkv
