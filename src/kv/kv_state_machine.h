// The replicated state machine: an ordered map from key to value with each
// key's revisions, the leases, and the client sessions that make writes
// exactly-once, changed only by applying committed log entries in index
// order. Its keys and history are rows of a byte store (mvcc_store.h): in
// memory (rebuilt from the newest snapshot and the log on restart), or
// persistent (reopened with Open(), then the log after its applied index).
//
// Revisions (etcd's v3 semantics): every entry that changes at least one key
// advances the store's revision by one (a batch, a transaction, a lease
// revocation is one revision); each key keeps create_revision, mod_revision
// and version. The changes are kept in a KvHistory (kv_history.h) for
// watches and reads at a past revision.
//
// Leases (lease_table.h): LEASE_GRANT creates one (id and TTL), a PUT may
// attach its key to one, LEASE_REVOKE deletes the lease and its keys at one
// revision. When a lease expires is the leader's business
// (node/lease_keeper.h): here a lease only exists or not.
//
// Sessions (session_table.h): a command carrying client_id != 0 is applied
// at most once per (client_id, sequence); duplicates get the saved answer.
//
// Bounds: nothing one entry does may cost a replica memory or time out of
// proportion to the entry. A TXN or DELETE_RANGE answer (range results,
// previous key-values) is estimated before anything changes and refused
// whole (RESOURCE_EXHAUSTED) past the entry's Command.max_result_bytes; the
// reads of such a transaction visit at most that many bytes of keys and
// values (each key counted at least kVisitCost). Saved answers are bounded
// per session and in all (session_table.h). Every bound an entry is applied
// under is stamped in the entry by the leader, so replicas with different
// flags still apply it alike.
//
// Snapshots: Snapshot() captures a consistent point-in-time image (the map,
// every session with its saved results and expiry, cluster time, applied
// index and term) into a SnapshotWriter; Restore() replaces the whole state
// with one read from a snapshot file. See Snapshot() for the locking
// trade-off and snapshot_format.h for the file layout.
//
// The code, by job:
//   kv_state_machine.cc  applies committed entries (MVCC writes, sessions)
//   kv_reads.cc          the reads (Range, ReadTxn, ReadEvents, answer estimates)
//   kv_snapshot.cc       the snapshot codec (Snapshot, Restore)
//   kv_state_rows.h      a persistent store's rows besides the keys (Open)
//   lease_table.h        the leases
//   session_table.h      the sessions
//
// Thread safety: Apply() runs on the node's apply thread; Restore() on the
// I/O loop at start and when a leader's snapshot is installed, while the
// apply thread is idle (the node drains it first), so the two never
// overlap. Every const method may be called concurrently from any thread;
// the lock (mu_) is checked by the compiler (GUARDED_BY, common/mutex.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "proto/internal.h"
#include "kv/apply_result.h"
#include "kv/kv_history.h"
#include "kv/mvcc_store.h"
#include "storage/checkpoint_store.h"
#include "storage/kv_backend.h"
#include "storage/overlay_view.h"
#include "kv/lease_table.h"
#include "kv/session_table.h"
#include "storage/snapshot_store.h"

namespace raftkv {

class SnapshotWriter;
namespace state_rows {
struct Loaded;
}

// A key's record as the wire's KeyValue (value left empty when keys_only).
void ToKeyValue(const std::string& key, const KvRecord& r, bool keys_only, KeyValue* out);

class KvStateMachine : public SnapshotTarget {
 public:
  // An empty state in memory (MemoryBackend).
  KvStateMachine();
  ~KvStateMachine() override;

  // A state machine on `backend`, resumed from the state it holds (an empty
  // store: an empty state). On a persistent() store every Apply() writes,
  // in the entry's one batch, the rows of what it changed besides the keys
  // (sessions, leases, alarms, the membership of a CONFIG entry: see
  // kv_state_rows.h) and `m state`, so that after a crash the store opens at
  // the last entry it flushed, and the log replays the rest. Corruption when
  // a row is malformed.
  static Status Open(std::unique_ptr<KvBackend> backend, std::unique_ptr<KvStateMachine>* out);

  static constexpr size_t kMaxSavedResultsPerSession = SessionTable::kMaxSavedResultsPerSession;
  // What a key visited by a transaction's read costs its answer budget at
  // least, whether or not the answer carries it (count_only, past limit).
  static constexpr size_t kVisitCost = 32;
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
  ApplyResult Apply(const Entry& entry) EXCLUDES(mu_);
  // Applies `entries` in order, as Apply() each, into *results (one per
  // entry). Consecutive entries share an apply pass: their rows are gathered
  // and written with one store Write() (kMaxPassEntries, kMaxPassBytes), the
  // lock held over the pass, so a reader sees the state before or after it.
  //
  // A store that refuses a write (IOError: RocksDB after a flush failed on
  // a full disk) holds the pass, and the lock, until it takes it: the
  // write is retried every 10 ms to 1 s, the store resumed first
  // (KvBackend::Resume); StoreStalled() is true meanwhile. Returns false,
  // the remaining entries unapplied, only when StopRetrying() ended such a
  // wait: the state in memory is then ahead of the store, so the state
  // machine applies and writes nothing more (a restart applies those
  // entries again from the log). Any other error of the store is fatal.
  bool ApplyAll(const std::deque<Entry>& entries, std::vector<ApplyResult>* results)
      EXCLUDES(mu_);
  // Ends a wait for the store (above) and every later one; for shutdown.
  void StopRetrying() EXCLUDES(stop_mu_);
  // True while an apply waits for the store to take its write.
  bool StoreStalled() const { return store_stalled_.load(std::memory_order_relaxed); }
  // Writes the store refused (each retried).
  uint64_t StoreWriteErrors() const { return store_write_errors_.load(std::memory_order_relaxed); }
  static constexpr size_t kMaxPassEntries = 64;
  static constexpr size_t kMaxPassBytes = 1 << 20;

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
  void Snapshot(SnapshotWriter* out) const EXCLUDES(mu_);
  // Snapshot() in two steps: the image, taken under the shared lock (O(1):
  // a view of the store and a copy of the sessions), with *meta as above;
  // then its records, encoded without the lock (into a writer that spills
  // to the file as it goes: SnapshotStore::WriteStreamed).
  struct SnapshotImage;
  std::shared_ptr<const SnapshotImage> CaptureSnapshot(SnapshotMeta* meta) const EXCLUDES(mu_);
  static void EncodeSnapshot(const SnapshotImage& image, SnapshotWriter* out);

  // Replaces the whole state (map, sessions with saved results and expiry,
  // cluster time, applied index and term) by the snapshot `in` reads. The
  // new state is built aside and swapped in only after the reader verified
  // the whole file, so on any error (Status::Corruption naming the file and
  // offset) this state machine is unchanged. Does not compare the
  // snapshot's index with the current one: the caller decides whether
  // installing it is progress. `in` must be freshly opened.
  //
  // A persistent() store needs SetBackendFactory(): the state is written
  // into a new store (factory->Create), then swapped in, flushed and made
  // current (factory->Commit). An error after the swap (the flush or the
  // commit failed) leaves the new state in memory and the old store the one
  // a restart opens: the caller must stop (a restart restores the file again).
  Status Restore(SnapshotReader* in) override;
  // Where Restore() creates the new store of a persistent() engine; must
  // outlive this state machine.
  void SetBackendFactory(KvBackendFactory* factory) EXCLUDES(mu_);
  // Makes every entry applied so far durable in the store (a persistent
  // store's Flush; nothing to do in memory), and removes the stores a
  // restore replaced that nothing reads any more. The log may be compacted
  // only up to an index the store has made durable.
  Status FlushStore() EXCLUDES(mu_);

  // Checkpoint snapshots (storage/checkpoint_store.h), for a persistent()
  // store whose factory keeps them. TakeCheckpoint: a checkpoint of the
  // store into `store`, at the entry the store holds when it is taken (the
  // apply thread goes on); `config_at(index, &config)` gives the
  // configuration at that entry, or false when the member has moved past
  // it (a newer snapshot installed meanwhile: Aborted, nothing kept).
  Status TakeCheckpoint(CheckpointStore* store, const std::string& engine,
                        const std::function<bool(uint64_t index, std::string* config)>& config_at,
                        CheckpointInfo* out) EXCLUDES(mu_);
  // A received checkpoint holds a sound store at (index, term): every
  // block's checksum, and `m state`.
  Status VerifyCheckpoint(const std::string& dir, uint64_t index, uint64_t term) EXCLUDES(mu_);
  // Replaces the whole state with the checkpoint in `dir` (the apply thread
  // idle): a new store is made of its files and becomes the current one
  // (the commit point), then the old one is removed once nothing reads it.
  // An error before the commit leaves this state machine unchanged; after
  // it, the caller must stop (a restart opens the new store).
  Status InstallCheckpoint(const std::string& dir, uint64_t index, uint64_t term) EXCLUDES(mu_);
  // Writes the checkpoint in `dir` (at meta's position, with its
  // configuration) into `into` as a snapshot file, for a backup: read from
  // the checkpoint, encoded as it is written.
  Status ExportCheckpoint(const std::string& dir, const SnapshotMeta& meta, SnapshotStore* into,
                          SnapshotFileInfo* written) EXCLUDES(mu_);

  std::optional<std::string> Get(const std::string& key) const EXCLUDES(mu_);
  // The key's record; *revision (if not null) gets the store's revision the
  // record was read at (never below the record's mod_revision).
  std::optional<KvRecord> GetRecord(const std::string& key, int64_t* revision = nullptr) const
      EXCLUDES(mu_);
  // The keys of req's range at req.revision() (0: now), with limit,
  // keys_only, count_only, the revision filters and the order asked;
  // resp->header().revision() is the store's revision. OutOfRange for a
  // revision compacted away or in the future; ResourceExhausted once the
  // key-values would exceed `max_bytes` (0: no bound). In key order `limit`
  // bounds the keys copied as the range is walked; sorted by another target
  // the whole range is walked first, holding a pointer per key that may be
  // answered (at most 2 * limit of them, and at most max_bytes / kVisitCost:
  // RangeBuilder in kv_reads.cc).
  Status Range(const RangeRequest& req, RangeResponse* resp, size_t max_bytes = 0) const
      EXCLUDES(mu_);
  // A transaction without writes (only ranges and transactions without
  // writes), evaluated on the current state as Apply() would;
  // ResourceExhausted past `max_bytes` in all.
  Status ReadTxn(const TxnRequest& req, TxnResponse* resp, size_t max_bytes = 0) const
      EXCLUDES(mu_);
  // What applying the write transaction `req` now would answer, estimated
  // from above as Apply() does before it changes anything:
  // ResourceExhausted when over `max_bytes` (the leader's check before it
  // proposes; Apply() decides again at the entry).
  Status CheckTxnAnswer(const TxnRequest& req, size_t max_bytes) const;
  // The same for a DeleteRange of [key, end) answering with the previous
  // key-values.
  Status CheckDeleteAnswer(const std::string& key, const std::string& end, size_t max_bytes) const;

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

  // Revision(), LeaseGeneration(), AppliedIndex(), AppliedTerm(), Size(),
  // SessionCount() and SavedAnswerBytes() read values published after each
  // apply: they never wait for the lock, so a long apply cannot hold up
  // their callers (the node's status, on the Raft path).
  int64_t Revision() const;
  // Every revision above this one is in the history.
  int64_t CompactedRevision() const;
  // The revision of the last Compact (0: none); reads before it are refused.
  int64_t CompactRevision() const;
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
  // Every lease with the entry that granted it, in id order.
  std::vector<LeaseInfo> LeaseInfos() const;
  size_t LeaseCount() const;
  // Changes whenever a lease is granted or revoked or a snapshot restored.
  uint64_t LeaseGeneration() const;

  uint64_t AppliedIndex() const;
  // The serialized MembershipConfig of the last CONFIG entry applied, or of
  // the snapshot restored; empty when neither had one.
  std::string AppliedConfig() const EXCLUDES(mu_);
  // Term of the last applied entry (0 before any).
  uint64_t AppliedTerm() const;
  size_t Size() const;
  size_t SessionCount() const;
  size_t SavedAnswerBytes() const;

  // What the state holds, in bytes, for the backend quota (etcd's dbSize):
  // every key and value with kKeyOverhead each, the history kept, the saved
  // answers and the leases. Published after each apply, as Size().
  static constexpr size_t kKeyOverhead = 64;
  size_t StateBytes() const;

  // What the store's engine holds, in bytes: every version and history row
  // kept (BackendStats: live and memtable bytes).
  size_t StoredBytes() const EXCLUDES(mu_);
  // The store engine's own figures (KvBackend::Stats).
  BackendStats StoreStats() const EXCLUDES(mu_);

  // The store deletes what the history window drops once it has dropped this
  // many revisions more (or at once, after an explicit compaction).
  static constexpr int64_t kSweepRevisions = 64;
  // Whether the store is on disk (RocksDB), not in memory.
  bool persistent() const { return persistent_; }
  // etcd's Defragment: the store rewritten so that what deletions and
  // compactions removed frees its space (KvBackend::CompactAll), while
  // entries go on being applied. Minutes on a large RocksDB store.
  Status CompactStore() const EXCLUDES(mu_);

  // Alarms (etcd's Maintenance.Alarm), raised and cleared by ALARM entries:
  // replicated, so every member refuses the same writes. While a NOSPACE
  // alarm is raised, the commands that add data (kv_requests.h, QuotaCost)
  // are refused whole, RESOURCE_EXHAUSTED with Status::Reason::kNoSpace.
  // At most kMaxAlarms are kept (members x types: a further one is refused).
  static constexpr uint32_t kAlarmNoSpace = 1;  // etcd's AlarmType NOSPACE
  static constexpr size_t kMaxAlarms = 1024;
  struct Alarm {
    uint64_t member;
    uint32_t type;
  };
  // In (member, type) order.
  std::vector<Alarm> Alarms() const EXCLUDES(mu_);
  bool NoSpaceAlarm() const;

  // Tests only: runs inside every Apply() with the lock held exclusively
  // (to hold an apply for as long as a test needs).
  void SetApplyHookForTest(std::function<void(const Entry&)> hook) {
    WriterLock lock(&mu_);
    apply_hook_ = std::move(hook);
  }

 private:
  // The state after the last apply, read without the lock: a long read does
  // not hold up Apply(), and every part of one read sees the same state.
  struct ReadPoint {
    MvccReader reader;
    int64_t revision;
    int64_t read_floor;  // the oldest revision a read may be served at
    int64_t compacted;   // every event above it is kept
  };
  ReadPoint Point() const EXCLUDES(mu_);
  // Range at req.revision() (0: p's), refused outside the revisions kept.
  static Status RangeAt(const ReadPoint& p, const RangeRequest& req, RangeResponse* resp,
                        size_t max_bytes);
  static Status ReadTxnAt(const ReadPoint& p, const TxnRequest& req, TxnResponse* resp,
                          size_t max_bytes, size_t* used);
  // A read of the store that cannot fail but for a broken store (the memory
  // engine's cannot): fatal, since nothing built on it could be trusted.
  static void CheckRead(const Status& s);

  // The changes of the entry being applied, at the writer's revision.
  struct Changes {
    MvccWriter* writer;
    size_t bytes = 0;  // of its events (KvEvent::Bytes), for the history window
  };
  explicit KvStateMachine(std::unique_ptr<KvBackend> backend);
  // Open(), once the rows are read: takes them over and rebuilds the
  // history window from the history rows.
  // `replace`, when set, becomes the store (the view is one of it).
  Status Resume(const std::shared_ptr<const BackendView>& view, state_rows::Loaded* loaded,
                std::shared_ptr<KvBackend> replace = nullptr) EXCLUDES(mu_);
  // Applies a data command (no session logic), adding its keys and values
  // to *batch: ApplyOps, then the rows.
  void ApplyToMap(Command& command, ApplyResult* result, BackendBatch* batch) REQUIRES(mu_);
  void ApplyOps(Command& command, ApplyResult* result, Changes* changes) REQUIRES(mu_);
  // The writes of ApplyToMap. Return whether the key existed; fill *prev
  // with its record before when not null.
  bool PutKey(std::string key, std::string value, int64_t lease, Changes* changes, KeyValue* prev)
      REQUIRES(mu_);
  bool DeleteKey(const std::string& key, Changes* changes, KeyValue* prev) REQUIRES(mu_);
  int64_t DeleteRangeKeys(const std::string& key, const std::string& end, Changes* changes,
                          google::protobuf::RepeatedPtrField<KeyValue>* prevs) REQUIRES(mu_);
  void ApplyPut(Command& command, ApplyResult* result, Changes* changes) REQUIRES(mu_);
  void ApplyTxn(Command& command, ApplyResult* result, Changes* changes) REQUIRES(mu_);
  // The operations of a transaction's list that `path` chose, nested
  // transactions included (*at: the next decision of `path`).
  void ApplyTxnOps(TxnRequest& txn, const std::vector<bool>& path, size_t* at, TxnResponse* resp,
                   Changes* changes) REQUIRES(mu_);
  // Why a put (of `key` with `lease`, keeping the key's value or lease when
  // asked) cannot be applied on `src` now, or OK: the lease does not exist,
  // or the key whose value or lease it keeps does not.
  Status CheckPutLocked(const KvSource& src, const std::string& key, int64_t lease,
                        bool ignore_value, bool ignore_lease) const REQUIRES_SHARED(mu_);
  // Adds to *batch the entry's rows (changes: null for none) and, once the
  // history window has dropped kSweepRevisions revisions past swept_ (at
  // once with `sweep_now` or after an explicit compaction), the deletions
  // those revisions allow, planned on `before`, the state before the entry.
  void CollectLocked(Changes* changes, const BackendView& before, BackendBatch* batch,
                     bool sweep_now = false) REQUIRES(mu_);
  // Writes `batch`, waiting while the store refuses it with an IOError
  // (ApplyAll); fatal on any other error, as a state that cannot be written
  // cannot be applied alike. Nothing once abandoned_.
  void WriteLocked(const BackendBatch& batch) REQUIRES(mu_);
  void UntilWrittenLocked(const BackendBatch& batch, Status error) REQUIRES(mu_);
  // Waits `d`; false when StopRetrying() was called.
  bool WaitUnlessStopping(std::chrono::milliseconds d) EXCLUDES(stop_mu_);
  // Deletes every revision the window dropped that is still stored; with
  // `all_rows`, a persistent store also gets every state row.
  void DropTrimmedLocked(bool all_rows = false) REQUIRES(mu_);
  // Publishes the counters read without the lock.
  void PublishLocked() REQUIRES(mu_);
  void ApplyLeaseRevoke(int64_t id, ApplyResult* result, Changes* changes) REQUIRES(mu_);
  void ApplyCompact(int64_t revision, ApplyResult* result) REQUIRES(mu_);
  void ApplyAlarm(const Command& command, ApplyResult* result) REQUIRES(mu_);
  bool NoSpaceLocked() const REQUIRES_SHARED(mu_);

  // Decodes `entry`'s command outside the lock; false if it has none to run.
  static bool Decode(const Entry& entry, Command* command, ApplyResult* result);
  // The rest of Apply().
  void ApplyLocked(const Entry& entry, Command& command, bool have_command,
                   ApplyResult* result, BackendBatch* batch) REQUIRES(mu_);
  // A persistent store's rows of what the entry changed besides the keys,
  // and `m state` (kv_state_rows.h).
  void AddStateRowsLocked(BackendBatch* batch) REQUIRES(mu_);
  // An apply pass: Begin takes a view of the store to gather the pass's
  // rows over; Add lays an entry's rows over it (or, for one holding a range
  // deletion, writes the pass so far and them); End writes what is left,
  // with the state rows, and publishes.
  void BeginPassLocked() REQUIRES(mu_);
  // One entry of the pass: the apply hook, ApplyLocked, its batch added.
  void ApplyInPassLocked(const Entry& entry, Command& command, bool have_command, ApplyResult* result)
      REQUIRES(mu_);
  void AddToPassLocked(BackendBatch&& batch) REQUIRES(mu_);
  void EndPassLocked() REQUIRES(mu_);
  // Writes the pass's rows and `extra` after them, and the state rows.
  void WritePassLocked(BackendBatch&& extra) REQUIRES(mu_);

  // Restore(), step by step: the state read so far, one record of each kind
  // checked and added to it (without the lock), then the swap (under it).
  struct RestoreState;
  static Status RestoreRecord(SnapshotRecordType type, std::string_view msg, RestoreState* st);
  static Status RestoreSession(std::string_view msg, RestoreState* st);
  static Status RestoreSessionResult(std::string_view msg, RestoreState* st);
  static Status RestoreStore(std::string_view msg, RestoreState* st);
  static Status RestoreHistory(std::string_view msg, RestoreState* st);
  static Status RestoreKv(std::string_view msg, RestoreState* st);
  void SwapInRestored(const SnapshotMeta& meta, RestoreState* st) EXCLUDES(mu_);

  mutable SharedMutex mu_;
  // Whether the store keeps the state across restarts (the rows of
  // AddStateRowsLocked are written only then).
  const bool persistent_;
  // Opened on a read-only store (ExportCheckpoint): nothing is written, the
  // rows a window trim would delete included. Set before it is shared.
  bool read_only_ = false;
  // The versions and history of every key (mvcc_store.h). No view of it is
  // kept between applies: a write changes in place what no view shares.
  std::shared_ptr<KvBackend> backend_ GUARDED_BY(mu_);
  KvBackendFactory* factory_ GUARDED_BY(mu_) = nullptr;  // persistent stores only
  size_t live_keys_ GUARDED_BY(mu_) = 0;
  int64_t revision_ GUARDED_BY(mu_) = 0;
  // The store holds no history row (nor a version only those rows' changes
  // replaced) at or below swept_; -1: not known, every row is looked at.
  // The window's compaction lags by up to kSweepRevisions revisions: one
  // look into the history per sweep, not per entry. Reads never see the
  // difference, as they stop at the window's floor.
  int64_t swept_ GUARDED_BY(mu_) = -1;
  bool sweep_now_ GUARDED_BY(mu_) = false;  // an explicit compaction: sweep it at once
  KvHistory history_ GUARDED_BY(mu_) = KvHistory(kDefaultHistoryRevisions, kDefaultHistoryBytes);
  size_t snapshot_history_revisions_ GUARDED_BY(mu_) = kDefaultSnapshotHistoryRevisions;
  LeaseTable leases_ GUARDED_BY(mu_);
  uint64_t applied_index_ GUARDED_BY(mu_) = 0;
  uint64_t applied_term_ GUARDED_BY(mu_) = 0;
  uint64_t cluster_time_ms_ GUARDED_BY(mu_) = 0;  // of the last entry
  SessionTable sessions_ GUARDED_BY(mu_);
  size_t data_bytes_ GUARDED_BY(mu_) = 0;  // keys and values, kKeyOverhead each
  std::string applied_config_ GUARDED_BY(mu_);
  // An ALARM entry changed the alarms: their rows are to be rewritten.
  bool alarms_changed_ GUARDED_BY(mu_) = false;
  // A CONFIG entry was applied: its row is to be written.
  bool config_changed_ GUARDED_BY(mu_) = false;
  std::set<std::pair<uint64_t, uint32_t>> alarms_ GUARDED_BY(mu_);  // (member, type)
  std::function<void(const Entry&)> apply_hook_ GUARDED_BY(mu_);  // tests only
  // A wait for the store was stopped with a pass unwritten: the state in
  // memory is ahead of the store; nothing is applied or written any more.
  bool abandoned_ GUARDED_BY(mu_) = false;
  Mutex stop_mu_ ACQUIRED_AFTER(mu_);
  CondVar stop_signal_;
  bool stop_retrying_ GUARDED_BY(stop_mu_) = false;
  std::atomic<bool> store_stalled_{false};
  std::atomic<uint64_t> store_write_errors_{0};
  // During an apply pass: the rows of its entries so far, over the store
  // (what the next entry reads). Null between passes.
  std::shared_ptr<OverlayView> pass_ GUARDED_BY(mu_);

  // Published by PublishLocked() after every change, read without mu_.
  std::atomic<int64_t> published_revision_{0};
  std::atomic<uint64_t> published_lease_generation_{0};
  std::atomic<uint64_t> published_applied_index_{0};
  std::atomic<uint64_t> published_applied_term_{0};
  std::atomic<size_t> published_size_{0};
  std::atomic<size_t> published_sessions_{0};
  std::atomic<size_t> published_saved_bytes_{0};
  std::atomic<size_t> published_state_bytes_{0};
  std::atomic<bool> published_nospace_{false};
};

}  // namespace raftkv
