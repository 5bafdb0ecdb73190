// The replicated state machine: an ordered in-memory map from key to value
// with each key's revisions, the leases, and the client sessions that make
// writes exactly-once, changed only by applying committed log entries in
// index order. Rebuilt from the newest snapshot and the log on restart.
//
// Revisions (etcd's v3 semantics): every entry that changes at least one key
// advances the store's revision by one (a batch, a transaction, a lease
// revocation is one revision); each key keeps create_revision, mod_revision
// and version. The changes are kept in a KvHistory (kv_history.h) for
// watches and reads at a past revision.
//
// Leases: LEASE_GRANT creates one (id and TTL), a PUT may attach its key to
// one, LEASE_REVOKE deletes the lease and its keys at one revision. When a
// lease expires is the leader's business (service/lease_keeper.h): here a
// lease only exists or not.
//
// Sessions (Raft thesis 6.3; LogCabin): an OPEN_SESSION entry creates session
// <its index>. A PUT/DELETE/CAS carrying client_id != 0 is applied at most
// once per (client_id, sequence): the result of the first application is
// saved and returned for any duplicate. first_outstanding lets the session
// drop the results the client already has; a sequence below the highest
// first_outstanding seen is refused (kStaleSequence) because its result is
// gone and re-applying it could apply it twice. A session expires when no
// command of it was applied for its timeout, measured in the leader-stamped
// Entry.cluster_time_ms, so every replica expires it at the same entry. A
// command of an unknown or expired session is not applied (kSessionExpired).
//
// Snapshots: Snapshot() captures a consistent point-in-time image (the map,
// every session with its saved results and expiry, cluster time, applied
// index and term) into a SnapshotWriter; Restore() replaces the whole state
// with one read from a snapshot file. See Snapshot() for the locking
// trade-off and snapshot_format.h for the file layout.
//
// Thread safety: Apply() and Restore() are called by one thread (the node's
// apply loop); Get()/Size()/AppliedIndex()/AppliedTerm()/SessionCount()/
// Snapshot() may be called concurrently from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "proto/internal.h"
#include "storage/cow_btree.h"
#include "storage/kv_history.h"
#include "common/status.h"

namespace raftkv {

class SnapshotReader;
class SnapshotWriter;

struct ApplyResult {
  enum class SessionError { kNone, kSessionExpired, kStaleSequence };

  bool ok = true;            // false if the entry's command could not be decoded
  bool existed = false;      // DELETE: whether the key was present
  bool swapped = false;      // CAS: whether the new value was written
  // BATCH: per op, in order, whether the key was present just before it.
  std::vector<bool> batch_existed;
  // CAS: the key's state just before the operation (found: present; current:
  // its value then, empty when absent).
  bool found = false;
  std::string current;
  std::string error;         // set when !ok or session_error != kNone
  // Sessions. index, term: the log entry in which the command took effect
  // (for a duplicate: the first application's). client_id: OPEN_SESSION's new id.
  SessionError session_error = SessionError::kNone;
  bool duplicate = false;
  uint64_t index = 0;
  uint64_t term = 0;
  uint64_t client_id = 0;
  // The rest: the store's revision after the entry, previous key-values,
  // DeleteRange's count, a transaction's answer, a granted lease, and a
  // refusal (reject_code != 0: a Status::Code; nothing was changed).
  SavedAnswer answer;

  bool rejected() const { return answer.reject_code() != 0; }
  Status Rejection() const;
};

// A key's record as the wire's KeyValue (value left empty when keys_only).
void ToKeyValue(const std::string& key, const KvRecord& r, bool keys_only, KeyValue* out);

class KvStateMachine {
 public:
  // Saved results per session beyond which the oldest is dropped (and its
  // sequence then refused as stale): bounds the memory of a client that never
  // advances first_outstanding.
  static constexpr size_t kMaxSavedResultsPerSession = 100000;
  // Default history window (SetHistoryLimits).
  static constexpr size_t kDefaultHistoryRevisions = 100000;
  static constexpr size_t kDefaultHistoryBytes = 64 << 20;
  static constexpr size_t kDefaultSnapshotHistoryRevisions = 10000;

  // Applies one committed entry. entry.index must be AppliedIndex() + 1 (it
  // is a programming error otherwise: CHECK). NOOP and CONFIG entries (the
  // consensus layer reads the MembershipConfig in a CONFIG entry) only advance
  // the applied index/term and cluster time, with ok = true. A COMMAND whose data does not parse is
  // applied as a no-op with ok = false (every replica does the same, so they
  // stay identical). A CAS writes its value iff (has_expected ? the key is
  // present and equal to expected : the key is absent); the decision depends
  // only on the map, so every replica decides alike.
  ApplyResult Apply(const Entry& entry);

  // Captures the whole state into `out` (records, and out->meta() gets
  // last_index/last_term = the applied index/term and the cluster time;
  // meta().config is left to the caller). The image is consistent: it is
  // taken under the shared lock, so no Apply() runs in between.
  //
  // The lock is held only to take the image: the map is a CowBTree, so the
  // image shares its root (O(1)) and the writes applied afterwards clone the
  // nodes they change; the sessions (small: a client's saved results are
  // dropped once it has them) are copied. Encoding, checksumming and
  // writing the file run without the lock, while Apply() goes on. The price
  // is memory: every node changed during the capture exists twice until the
  // image is dropped (at most the whole map, for a capture overlapping a
  // rewrite of every key).
  void Snapshot(SnapshotWriter* out) const;

  // Replaces the whole state (map, sessions with saved results and expiry,
  // cluster time, applied index and term) by the snapshot `in` reads. The
  // new state is built aside and swapped in only after the reader verified
  // the whole file, so on any error (Status::Corruption naming the file and
  // offset) this state machine is unchanged. Does not compare the
  // snapshot's index with the current one: the caller decides whether
  // installing it is progress. `in` must be freshly opened.
  Status Restore(SnapshotReader* in);

  std::optional<std::string> Get(const std::string& key) const;
  std::optional<KvRecord> GetRecord(const std::string& key) const;
  // The keys of req's range at req.revision() (0: now), with limit,
  // keys_only and count_only; resp->header().revision() is the store's
  // revision. OutOfRange for a revision compacted away or in the future.
  Status Range(const RangeRequest& req, RangeResponse* resp) const;
  // A transaction without writes (only ranges), evaluated on the current
  // state as Apply() would.
  void ReadTxn(const TxnRequest& req, TxnResponse* resp) const;

  // Watches: the events of [key, end) from revision `from` on, whole
  // revisions only, stopping after the revision that takes the batch past
  // `max_bytes` (at least one revision when there is one).
  struct EventBatch {
    std::vector<KvEvent> events;
    int64_t next_revision = 0;  // where the next read starts
    int64_t revision = 0;       // the store's revision at the read
  };
  // OutOfRange when `from` - 1 is below the history window (the events
  // are gone): the message names the oldest revision a watch may start at.
  Status ReadEvents(const std::string& key, const std::string& end, int64_t from,
                    size_t max_bytes, EventBatch* out) const;

  int64_t Revision() const;
  // Every revision above this one is in the history.
  int64_t CompactedRevision() const;
  void SetHistoryLimits(size_t max_revisions, size_t max_bytes);
  // Revisions of the history that Snapshot() writes into the file (at most
  // the window kept), so that a member restarted or caught up from a
  // snapshot still serves watches and past reads from before it. 0: none.
  void SetSnapshotHistory(size_t revisions);
  size_t HistoryBytes() const;

  // Leases: the TTL (seconds) and, with `keys`, the keys of lease `id`;
  // false if there is no such lease.
  bool GetLease(int64_t id, int64_t* ttl, std::vector<std::string>* keys) const;
  // Every lease: (id, ttl).
  std::vector<std::pair<int64_t, int64_t>> Leases() const;
  size_t LeaseCount() const;
  // Changes whenever a lease is granted or revoked or a snapshot restored.
  uint64_t LeaseGeneration() const;

  uint64_t AppliedIndex() const;
  // Term of the last applied entry (0 before any).
  uint64_t AppliedTerm() const;
  size_t Size() const;
  size_t SessionCount() const;

 private:
  struct Session {
    uint64_t timeout_ms = 0;
    uint64_t expires_at_ms = 0;      // cluster time
    uint64_t first_outstanding = 0;  // highest seen
    std::map<uint64_t, ApplyResult> results;  // by sequence
  };
  // The changes of the entry being applied, at revision `rev`.
  struct Changes {
    int64_t rev = 0;
    std::deque<KvEvent> events;
  };
  // Applies a data command to the map (no session logic), moving its keys
  // and values into the map. Requires mu_.
  void ApplyToMap(Command& command, ApplyResult* result);
  // The writes of ApplyToMap. Require mu_ (exclusive). Return whether the
  // key existed; fill *prev with its record before when not null.
  bool PutKey(std::string key, std::string value, int64_t lease, Changes* changes, KeyValue* prev);
  bool DeleteKey(const std::string& key, Changes* changes, KeyValue* prev);
  int64_t DeleteRangeKeys(const std::string& key, const std::string& end, Changes* changes,
                          google::protobuf::RepeatedPtrField<KeyValue>* prevs);
  void ApplyTxn(Command& command, ApplyResult* result, Changes* changes);
  void ApplyLeaseRevoke(int64_t id, ApplyResult* result, Changes* changes);
  bool CompareHolds(const Compare& c) const;  // requires mu_
  // Range over the current map. Requires mu_ (shared).
  void RangeLocked(const RangeRequest& req, RangeResponse* resp) const;
  // Range at a past revision. Requires mu_ (shared).
  Status RangeAtLocked(const RangeRequest& req, RangeResponse* resp) const;
  void DetachLease(const std::string& key, int64_t lease);  // requires mu_
  // Drops sessions whose expiry is before `now_ms`. Requires mu_.
  void ExpireSessions(uint64_t now_ms);
  void Touch(uint64_t id, Session* session, uint64_t now_ms);  // requires mu_

  // Decodes `entry`'s command outside the lock; false if it has none to run.
  static bool Decode(const Entry& entry, Command* command, ApplyResult* result);
  // The rest of Apply(). Requires mu_ (exclusive).
  void ApplyLocked(const Entry& entry, Command& command, bool have_command,
                   ApplyResult* result);

  struct LeaseState {
    int64_t ttl = 0;
    std::set<std::string> keys;
  };

  mutable std::shared_mutex mu_;
  CowBTree<std::string, KvRecord> data_;     // guarded by mu_
  int64_t revision_ = 0;                     // guarded by mu_
  KvHistory history_{kDefaultHistoryRevisions, kDefaultHistoryBytes};  // guarded by mu_
  size_t snapshot_history_revisions_ = kDefaultSnapshotHistoryRevisions;  // guarded by mu_
  std::map<int64_t, LeaseState> leases_;     // guarded by mu_
  uint64_t lease_generation_ = 0;            // guarded by mu_
  uint64_t applied_index_ = 0;               // guarded by mu_
  uint64_t applied_term_ = 0;                // guarded by mu_
  uint64_t cluster_time_ms_ = 0;             // guarded by mu_: of the last entry
  std::map<uint64_t, Session> sessions_;     // guarded by mu_
  std::set<std::pair<uint64_t, uint64_t>> expiry_;  // (expires_at_ms, id), guarded by mu_
};

}  // namespace raftkv
