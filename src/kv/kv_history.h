// A key's record, a change (event), and the window of the store's recent
// changes. The changes themselves are rows of the MVCC store (mvcc_store.h):
// one event per key changed, in revision order, for watches and reads at a
// past revision. KvHistory is the window that bounds them: the revisions
// kept and what their events cost, trimmed to a number of revisions and of
// bytes; whole revisions are dropped from the front, never the newest one.
// Local to a member (not replicated): a snapshot carries its newest
// revisions (KvStateMachine::SetSnapshotHistory), so after a restart or an
// installed snapshot it starts that far before the snapshot.
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
  // The change's place within mod_revision (etcd's sub-revision), where the
  // store keeps this version (kv/mvcc_keys.h); 0 when it does not say.
  uint32_t mod_sub = 0;
};

struct KvEvent {
  int64_t revision = 0;
  bool is_delete = false;
  std::string key;
  KvRecord kv;  // PUT: the record after; DELETE: only mod_revision (= revision)
  bool has_prev = false;
  KvRecord prev;  // the record before, when has_prev
  size_t Bytes() const { return Cost(key.size(), kv.value.size(), prev.value.size()); }
  // What an event of a key, a value and a previous value of these sizes
  // costs the history window.
  static size_t Cost(size_t key_bytes, size_t value_bytes, size_t prev_value_bytes) {
    return sizeof(KvEvent) + key_bytes + value_bytes + prev_value_bytes;
  }
};

// Whether `key` is in [start, end) with etcd's conventions: end empty = the
// key `start` alone; end "\0" = every key >= start.
bool InKeyRange(const std::string& key, const std::string& start, const std::string& end);

class KvHistory {
 public:
  KvHistory(size_t max_revisions, size_t max_bytes)
      : max_revisions_(max_revisions), max_bytes_(max_bytes) {}

  void SetLimits(size_t max_revisions, size_t max_bytes);
  // Forgets every revision: the history now starts after `compacted`.
  void Reset(int64_t compacted);
  // An explicit compaction at `revision` (etcd's Compact): drops every
  // revision before it (a watch may still start at it) and refuses reads
  // before it.
  void CompactThrough(int64_t revision);
  // The revision of the last explicit compaction (0: none), as a snapshot
  // carries it.
  int64_t compact_revision() const { return compact_revision_; }
  void SetCompactRevision(int64_t revision) { compact_revision_ = revision; }
  // Adds one revision (above every one kept) whose events cost `bytes`
  // (KvEvent::Bytes), then trims to the window.
  void AppendRevision(int64_t revision, size_t bytes);

  // Every event with a revision above compacted() is kept.
  int64_t compacted() const { return compacted_; }
  // The oldest revision a read may be served at.
  int64_t read_floor() const { return compacted_ > compact_revision_ ? compacted_ : compact_revision_; }
  // The revisions kept and their events' bytes.
  size_t size() const { return revisions_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  struct Revision {
    int64_t revision;
    size_t bytes;
  };
  void Trim();

  std::deque<Revision> revisions_;
  size_t bytes_ = 0;
  int64_t compacted_ = 0;
  int64_t compact_revision_ = 0;
  size_t max_revisions_;
  size_t max_bytes_;
};

}  // namespace raftkv
