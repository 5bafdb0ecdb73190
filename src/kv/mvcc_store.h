// The multi-version key-value data in an ordered byte store
// (storage/kv_backend.h), in the layout of kv/mvcc_keys.h: every version of
// every key, newest first, and the history of changes by revision. This is
// the part of the state machine that an on-disk engine keeps out of memory
// (doc/on-disk-store.md, section 2):
//
//  * MvccReader reads one BackendView: a key or a range of keys as of any
//    revision kept, and the events (changes with the record before) of a
//    range of keys from a revision on.
//  * MvccWriter is one entry's writes at one revision, over the reader of the
//    state before it: its own reads see its writes (a transaction's later
//    operations see its earlier puts), and Finish() turns them into the rows
//    of one BackendBatch, written with one KvBackend::Write().
//  * PlanCompaction() deletes what a compaction at revision C makes
//    unreadable: the versions no read at or after C and no event at or after
//    C can reach, and the history before C.
//
// Rows (mvcc_keys.h): a version of `key` written at (revision, sub), sub
// being the change's place within its revision, is
//   VersionKey(key, revision, sub) -> flags(1) create_revision(8) version(8)
//                                     lease(8) value
// (fixed64 little-endian, storage/coding.h; flags bit 0: a deletion, whose
// other fields are zero; mod_revision is the key's revision), and its event
//   HistoryKey(revision, sub) -> flags(1) [prev_revision(8) prev_sub(4)] key
// (flags bit 0: a deletion; bit 1: the version this change replaced is at
// (prev_revision, prev_sub), which follow; bit 2: it replaced no live
// version. Layout 1 rows have neither bit: compaction looks the old
// versions up.)
// The revisions and counters a state machine keeps beside (the current
// revision, the compaction floor, the number of live keys) are the caller's:
// a reader answers about whatever revision it is asked.
//
// Thread safety: a reader is immutable (any thread); a writer is used by one
// thread.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kv/kv_history.h"
#include "storage/kv_backend.h"

namespace raftkv {
namespace mvcc {

// A revision above every revision: a read "now".
constexpr int64_t kLatest = std::numeric_limits<int64_t>::max();

// The value of a version row (above). Decode fails (false) on a value of the
// wrong size or with unknown flags; without `with_value` it leaves r->value
// empty (the rest of the record is decoded).
std::string EncodeVersion(const KvRecord& r, bool deleted);
bool DecodeVersion(std::string_view in, KvRecord* r, bool* deleted, bool with_value = true);
// Where the live version that a change replaced is kept, as its history
// row says.
struct PrevVersion {
  bool known = false;   // false: a layout 1 row, which does not say
  bool exists = false;  // a live version was replaced (a put or a deletion of it)
  int64_t revision = 0;
  uint32_t sub = 0;
  // The version `record` (of the key, as read) is: its row's place.
  static PrevVersion Of(const KvRecord* record);
};
// The value of a history row.
std::string EncodeEvent(std::string_view key, bool deleted, const PrevVersion& prev);
bool DecodeEvent(std::string_view in, std::string* key, bool* deleted, PrevVersion* prev = nullptr);

}  // namespace mvcc

// Visits a key and its record; false stops the walk.
using KvVisitor = std::function<bool(const std::string& key, const KvRecord& record)>;

// Whether a scan's records carry their values: kNoValues leaves each
// record's value empty (the rest is filled in), for walks that count keys or
// read only their revisions, which then copy no value.
enum class ScanValues { kWith, kNoValues };

// The current records of a state, for the code that reads them whatever
// holds them: a reader's view as of one revision (MvccAt), or an entry being
// applied, its own writes included (MvccWriter).
class KvSource {
 public:
  virtual ~KvSource() = default;
  virtual Status Find(const std::string& key, std::optional<KvRecord>* out) const = 0;
  // The keys of [key, end) (MvccReader::Scan).
  virtual Status Scan(const std::string& key, const std::string& end, const KvVisitor& visit,
                      ScanValues values) const = 0;
};

class MvccReader {
 public:
  explicit MvccReader(std::shared_ptr<const BackendView> view) : view_(std::move(view)) {}

  // The record of `key` as of `revision` (its newest version at or below
  // it); nullopt when the key did not exist then.
  Status Find(std::string_view key, int64_t revision, std::optional<KvRecord>* out) const;
  // Visits, in key order, the keys of [key, end) (etcd's conventions, as
  // InKeyRange: end empty is `key` alone, end "\0" every key from `key` on)
  // that existed at `revision`, with their records then (their values
  // left empty with kNoValues).
  Status Scan(const std::string& key, const std::string& end, int64_t revision, const KvVisitor& visit,
              ScanValues values = ScanValues::kWith) const;
  // The events of keys in [key, end) with revisions from `from` on, in
  // revision order, whole revisions only, stopping after the revision that
  // takes the events' bytes (KvEvent::Bytes) to `max_bytes` or past it.
  // *next is the revision the next read starts at (the revision after the
  // last one read, or `from` when there was none).
  Status ReadEvents(const std::string& key, const std::string& end, int64_t from, size_t max_bytes,
                    std::vector<KvEvent>* out, int64_t* next) const;

  const std::shared_ptr<const BackendView>& view() const { return view_; }

 private:
  const std::shared_ptr<const BackendView> view_;
};

// A reader's state as of `revision`.
class MvccAt final : public KvSource {
 public:
  MvccAt(const MvccReader* reader, int64_t revision) : reader_(reader), revision_(revision) {}
  Status Find(const std::string& key, std::optional<KvRecord>* out) const override {
    return reader_->Find(key, revision_, out);
  }
  Status Scan(const std::string& key, const std::string& end, const KvVisitor& visit,
              ScanValues values) const override {
    return reader_->Scan(key, end, revision_, visit, values);
  }

 private:
  const MvccReader* const reader_;
  const int64_t revision_;
};

// One entry's writes at revision `revision` (the store's revision + 1),
// over `base`, the state before the entry.
class MvccWriter final : public KvSource {
 public:
  MvccWriter(const MvccReader* base, int64_t revision) : base_(base), revision_(revision) {}

  int64_t revision() const { return revision_; }
  // The number of changes so far (each is an event of this revision).
  uint32_t changes() const { return sub_; }

  // The current record of `key`, this entry's writes included.
  Status Find(const std::string& key, std::optional<KvRecord>* out) const override;
  // The current keys of [key, end) (MvccReader::Scan), this entry's writes
  // included (with their values whatever `values` says).
  Status Scan(const std::string& key, const std::string& end, const KvVisitor& visit,
              ScanValues values) const override;

  // Writes `record` as the key's new version (its mod_revision is set to
  // revision()); `prev` is the key's current record as Find() gave it
  // (null when there is none): its history row names that version, which a
  // compaction past this change deletes without looking it up.
  void Put(const std::string& key, KvRecord record, const KvRecord* prev);
  // Writes a deletion of `key`, whose current record Find() gave as `prev`.
  void Delete(const std::string& key, const KvRecord& prev);

  // Appends the rows of every change to `batch`.
  void Finish(BackendBatch* batch);

 private:
  const MvccReader* const base_;
  const int64_t revision_;
  uint32_t sub_ = 0;
  std::map<std::string, std::optional<KvRecord>> overlay_;  // nullopt: deleted here
  BackendBatch rows_;
};

// Adds to `batch` the deletions that a compaction at `revision` allows,
// over the history rows of revisions [from, revision) (from: where an
// earlier compaction stopped; 0 the first time): for each key changed
// there, every version older than its newest one below `revision` (that one
// too if it is a deletion), and then those history rows. A row that names
// the version its change replaced deletes that one (and itself, a
// deletion's) without a read: every older one went with an earlier row. A
// layout 1 row's key is looked up. Stops at a
// revision boundary once `max_keys` keys are planned (0: no bound) and sets
// *done to the revision it stopped before (== `revision` when finished):
// the next call starts there. Compacting twice is harmless.
Status PlanCompaction(const BackendView& view, int64_t from, int64_t revision, size_t max_keys,
                      BackendBatch* batch, int64_t* done);

}  // namespace raftkv
