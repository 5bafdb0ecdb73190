#include "kv/mvcc_store.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kv/mvcc_keys.h"
#include "storage/coding.h"

namespace raftkv {
namespace mvcc {
namespace {

constexpr uint8_t kDeletedFlag = 1;
// History rows: where the replaced version is follows, or there was none.
constexpr uint8_t kPrevAtFlag = 2;
constexpr uint8_t kNoPrevFlag = 4;
constexpr size_t kPrevBytes = 8 + 4;
constexpr size_t kVersionHeader = 1 + 3 * 8;

std::string HistoryLimit() { return std::string(1, static_cast<char>(kHistoryPrefix + 1)); }

Status BadRow(const char* what, std::string_view key) {
  return Status::Corruption(std::string("the store holds a malformed ") + what + " (" +
                            std::to_string(key.size()) + "-byte key)");
}

// The version the iterator is at: its user key, revision and record.
Status ReadVersion(const BackendIterator& it, std::string* key, int64_t* revision, KvRecord* r,
                   bool* deleted, bool with_value = true) {
  uint32_t sub = 0;
  if (!ParseVersionKey(it.key(), key, revision, &sub)) return BadRow("version key", it.key());
  if (!DecodeVersion(it.value(), r, deleted, with_value)) return BadRow("version", it.key());
  r->mod_revision = *revision;
  r->mod_sub = sub;
  return Status::OK();
}

// The history row the iterator is at.
Status ReadHistoryRow(const BackendIterator& it, int64_t* revision, uint32_t* sub, std::string* key,
                      bool* deleted, PrevVersion* prev = nullptr) {
  if (!ParseHistoryKey(it.key(), revision, sub) || !DecodeEvent(it.value(), key, deleted, prev)) {
    return BadRow("history row", it.key());
  }
  return Status::OK();
}

// The upper bound of the encoded versions of [key, end) (end not empty), or
// "" when the range is empty.
std::string RangeUpper(const std::string& key, const std::string& end) {
  if (end.size() == 1 && end[0] == '\0') return VersionsLimit();
  if (end <= key) return std::string();
  return KeyBound(end);
}

}  // namespace

std::string EncodeVersion(const KvRecord& r, bool deleted) {
  std::string out;
  out.reserve(kVersionHeader + (deleted ? 0 : r.value.size()));
  out.push_back(static_cast<char>(deleted ? kDeletedFlag : 0));
  coding::PutFixed64(&out, deleted ? 0 : static_cast<uint64_t>(r.create_revision));
  coding::PutFixed64(&out, deleted ? 0 : static_cast<uint64_t>(r.version));
  coding::PutFixed64(&out, deleted ? 0 : static_cast<uint64_t>(r.lease));
  if (!deleted) out.append(r.value);
  return out;
}

bool DecodeVersion(std::string_view in, KvRecord* r, bool* deleted, bool with_value) {
  if (in.size() < kVersionHeader) return false;
  const uint8_t flags = static_cast<uint8_t>(in[0]);
  if ((flags & ~kDeletedFlag) != 0) return false;
  *deleted = (flags & kDeletedFlag) != 0;
  if (*deleted && in.size() != kVersionHeader) return false;
  r->create_revision = static_cast<int64_t>(coding::DecodeFixed64(in.data() + 1));
  r->version = static_cast<int64_t>(coding::DecodeFixed64(in.data() + 9));
  r->lease = static_cast<int64_t>(coding::DecodeFixed64(in.data() + 17));
  if (with_value) {
    r->value.assign(in.substr(kVersionHeader));
  } else {
    r->value.clear();
  }
  return true;
}

PrevVersion PrevVersion::Of(const KvRecord* record) {
  PrevVersion prev;
  prev.known = true;
  if (record != nullptr) {
    prev.exists = true;
    prev.revision = record->mod_revision;
    prev.sub = record->mod_sub;
  }
  return prev;
}

std::string EncodeEvent(std::string_view key, bool deleted, const PrevVersion& prev) {
  uint8_t flags = deleted ? kDeletedFlag : 0;
  if (prev.known) flags |= prev.exists ? kPrevAtFlag : kNoPrevFlag;
  std::string out;
  out.reserve(1 + kPrevBytes + key.size());
  out.push_back(static_cast<char>(flags));
  if (prev.known && prev.exists) {
    coding::PutFixed64(&out, static_cast<uint64_t>(prev.revision));
    coding::PutFixed32(&out, prev.sub);
  }
  out.append(key);
  return out;
}

bool DecodeEvent(std::string_view in, std::string* key, bool* deleted, PrevVersion* prev) {
  if (in.empty()) return false;
  const uint8_t flags = static_cast<uint8_t>(in[0]);
  if ((flags & ~(kDeletedFlag | kPrevAtFlag | kNoPrevFlag)) != 0) return false;
  if ((flags & kPrevAtFlag) != 0 && (flags & kNoPrevFlag) != 0) return false;
  PrevVersion p;
  p.known = (flags & (kPrevAtFlag | kNoPrevFlag)) != 0;
  in.remove_prefix(1);
  if ((flags & kPrevAtFlag) != 0) {
    if (in.size() < kPrevBytes) return false;
    p.exists = true;
    p.revision = static_cast<int64_t>(coding::DecodeFixed64(in.data()));
    p.sub = coding::DecodeFixed32(in.data() + 8);
    if (p.revision < 0) return false;
    in.remove_prefix(kPrevBytes);
  }
  *deleted = (flags & kDeletedFlag) != 0;
  key->assign(in);
  if (prev != nullptr) *prev = p;
  return true;
}

}  // namespace mvcc

Status MvccReader::Find(std::string_view key, int64_t revision, std::optional<KvRecord>* out) const {
  out->reset();
  auto it = view_->NewLookupIterator(mvcc::VersionsBegin(key), mvcc::VersionsEnd(key));
  it->Seek(mvcc::VersionSeekKey(key, revision));
  if (!it->Valid()) return it->status();
  std::string found;
  int64_t rev = 0;
  KvRecord r;
  bool deleted = false;
  Status s = mvcc::ReadVersion(*it, &found, &rev, &r, &deleted);
  if (s.ok() && !deleted) *out = std::move(r);
  return s;
}

// Each key's versions are contiguous, newest first: the walk takes the
// first version at or below `revision` and moves past the key's others:
// with Next() while they are few (most keys have one or a few versions
// kept, and a step costs far less than a seek), with a seek past them
// after kStepsBeforeSeek.
Status MvccReader::Scan(const std::string& key, const std::string& end, int64_t revision,
                        const KvVisitor& visit, ScanValues values) const {
  constexpr int kStepsBeforeSeek = 8;
  const bool with_value = values == ScanValues::kWith;
  if (end.empty()) {
    std::optional<KvRecord> r;
    Status s = Find(key, revision, &r);
    if (s.ok() && r) {
      if (!with_value) r->value.clear();
      visit(key, *r);
    }
    return s;
  }
  const std::string lower = mvcc::KeyBound(key);
  const std::string upper = mvcc::RangeUpper(key, end);
  if (upper.empty()) return Status::OK();
  auto it = view_->NewIterator(lower, upper);
  std::string k;
  std::string versions;  // 'k' ord(k): the front of every version row of k
  int64_t rev = 0;
  KvRecord r;
  bool deleted = false;
  for (it->Seek(lower); it->Valid();) {
    Status s = mvcc::ReadVersion(*it, &k, &rev, &r, &deleted, with_value);
    if (!s.ok()) return s;
    if (rev > revision) {
      it->Seek(mvcc::VersionSeekKey(k, revision));
      if (!it->Valid()) break;
      const std::string newer = k;
      s = mvcc::ReadVersion(*it, &k, &rev, &r, &deleted, with_value);
      if (!s.ok()) return s;
      if (k != newer) continue;  // no version of `newer` then: at the next key's newest
    }
    if (!deleted && !visit(k, r)) return Status::OK();
    versions.assign(mvcc::VersionRowsPrefix(it->key()));
    int steps = 0;
    for (it->Next(); it->Valid() && it->key().substr(0, versions.size()) == versions; it->Next()) {
      if (++steps == kStepsBeforeSeek) {
        it->Seek(mvcc::VersionsEnd(k));
        break;
      }
    }
  }
  return it->status();
}

Status MvccReader::ReadEvents(const std::string& key, const std::string& end, int64_t from,
                              size_t max_bytes, std::vector<KvEvent>* out, int64_t* next) const {
  out->clear();
  from = std::max<int64_t>(from, 0);
  *next = from;
  const std::string lower = mvcc::HistoryKey(from, 0);
  auto history = view_->NewIterator(lower, mvcc::HistoryLimit());
  auto versions = view_->NewIterator(std::string(1, mvcc::kVersionPrefix), mvcc::VersionsLimit());
  size_t bytes = 0;
  std::string changed;
  for (history->Seek(lower); history->Valid(); history->Next()) {
    int64_t rev = 0;
    uint32_t sub = 0;
    bool is_delete = false;
    Status s = mvcc::ReadHistoryRow(*history, &rev, &sub, &changed, &is_delete);
    if (!s.ok()) return s;
    if (rev >= *next) {  // a new revision
      if (!out->empty() && bytes >= max_bytes) break;
      *next = rev + 1;
    }
    if (!InKeyRange(changed, key, end)) continue;
    KvEvent e;
    e.revision = rev;
    e.is_delete = is_delete;
    const std::string version = mvcc::VersionKey(changed, rev, sub);
    versions->Seek(version);
    std::string k;
    int64_t version_rev = 0;
    bool deleted = false;
    if (!versions->Valid() || versions->key() != version) {
      if (!versions->status().ok()) return versions->status();
      return Status::Corruption("the store's history names a version it does not hold (revision " +
                                std::to_string(rev) + ")");
    }
    s = mvcc::ReadVersion(*versions, &k, &version_rev, &e.kv, &deleted);
    if (!s.ok()) return s;
    if (deleted) {
      e.kv = KvRecord();
      e.kv.mod_revision = rev;
    }
    versions->Next();
    if (versions->Valid()) {
      KvRecord prev;
      s = mvcc::ReadVersion(*versions, &k, &version_rev, &prev, &deleted);
      if (!s.ok()) return s;
      if (k == changed && !deleted) {
        e.has_prev = true;
        e.prev = std::move(prev);
      }
    }
    e.key = std::move(changed);
    bytes += e.Bytes();
    out->push_back(std::move(e));
  }
  if (!history->status().ok()) return history->status();
  return versions->status();
}

Status MvccWriter::Find(const std::string& key, std::optional<KvRecord>* out) const {
  if (auto it = overlay_.find(key); it != overlay_.end()) {
    *out = it->second;
    return Status::OK();
  }
  return base_->Find(key, mvcc::kLatest, out);
}

// The base's keys merged with this entry's writes, in key order.
Status MvccWriter::Scan(const std::string& key, const std::string& end, const KvVisitor& visit,
                        ScanValues values) const {
  auto mine = overlay_.lower_bound(key);
  auto in_range = [&] { return mine != overlay_.end() && InKeyRange(mine->first, key, end); };
  bool more = true;
  // Visits this entry's keys before `bound` (all when null).
  auto mine_before = [&](const std::string* bound) {
    for (; more && in_range() && (bound == nullptr || mine->first < *bound); ++mine) {
      if (mine->second) more = visit(mine->first, *mine->second);
    }
    return more;
  };
  Status s = base_->Scan(key, end, mvcc::kLatest, [&](const std::string& k, const KvRecord& r) {
    if (!mine_before(&k)) return false;
    if (in_range() && mine->first == k) {  // written here: this entry's record wins
      const std::optional<KvRecord>& written = mine->second;
      ++mine;
      if (written) more = visit(k, *written);
      return more;
    }
    more = visit(k, r);
    return more;
  }, values);
  if (s.ok()) mine_before(nullptr);
  return s;
}

void MvccWriter::Put(const std::string& key, KvRecord record, const KvRecord* prev) {
  record.mod_revision = revision_;
  record.mod_sub = sub_;
  rows_.Put(mvcc::VersionKey(key, revision_, sub_), mvcc::EncodeVersion(record, false));
  rows_.Put(mvcc::HistoryKey(revision_, sub_), mvcc::EncodeEvent(key, false, mvcc::PrevVersion::Of(prev)));
  ++sub_;
  overlay_[key] = std::move(record);
}

void MvccWriter::Delete(const std::string& key, const KvRecord& prev) {
  rows_.Put(mvcc::VersionKey(key, revision_, sub_), mvcc::EncodeVersion(KvRecord(), true));
  rows_.Put(mvcc::HistoryKey(revision_, sub_), mvcc::EncodeEvent(key, true, mvcc::PrevVersion::Of(&prev)));
  ++sub_;
  overlay_[key] = std::nullopt;
}

void MvccWriter::Finish(BackendBatch* batch) {
  if (batch->empty()) {
    *batch = std::move(rows_);
  } else {
    for (const BackendBatch::Op& op : rows_.ops()) batch->Put(op.key, op.value);
  }
  rows_.Clear();
}

namespace {

// Up to this many rows are deleted one by one, more with one range
// deletion. A window that trims a revision per entry deletes a row or two
// at a time: as point deletions they cost what a put does, while every
// range deletion in RocksDB's memtable is fragmented again by each iterator
// opened on it (until a flush), which made every later read slower.
constexpr size_t kMaxPointDeletes = 32;
// History rows: the window's compaction sweeps many revisions at a time
// (a few rows each), still row by row.
constexpr size_t kMaxHistoryPointDeletes = 2048;

// Deletes [first, end) of `it`'s rows, `it` positioned at `first`: the rows
// one by one while there are few, else one range.
Status DeleteRows(BackendIterator* it, std::string first, const std::string& end, BackendBatch* batch) {
  std::vector<std::string> rows;
  for (; it->Valid() && it->key() < end; it->Next()) {
    if (rows.size() == kMaxPointDeletes) {
      batch->DeleteRange(std::move(first), end);
      return Status::OK();
    }
    rows.emplace_back(it->key());
  }
  if (!it->status().ok()) return it->status();
  for (std::string& row : rows) batch->Delete(std::move(row));
  return Status::OK();
}

// The compaction of keys whose history rows do not say which version each
// change replaced (layout 1): each key's versions are read from the newest
// one below `revision`.
Status PlanUnplaced(const BackendView& view, const std::set<std::string>& keys, int64_t revision,
                    BackendBatch* batch) {
  if (keys.empty()) return Status::OK();
  auto versions = view.NewIterator(std::string(1, mvcc::kVersionPrefix), mvcc::VersionsLimit());
  for (const std::string& key : keys) {
    // The newest version below `revision` is what a read at `revision` sees
    // of the key, or an event at `revision` has as its previous record: it
    // stays unless it is a deletion. Every older one goes.
    versions->Seek(mvcc::VersionSeekKey(key, revision - 1));
    if (!versions->Valid()) break;
    std::string k;
    int64_t rev = 0;
    KvRecord r;
    bool deleted = false;
    Status s = mvcc::ReadVersion(*versions, &k, &rev, &r, &deleted);
    if (!s.ok()) return s;
    if (k != key) continue;
    std::string first_dead(versions->key());
    if (!deleted) {
      first_dead.push_back('\0');  // the next key after the kept version
      versions->Next();
    }
    s = DeleteRows(versions.get(), std::move(first_dead), mvcc::VersionsEnd(key), batch);
    if (!s.ok()) return s;
  }
  return versions->status();
}

}  // namespace

Status PlanCompaction(const BackendView& view, int64_t from, int64_t revision, size_t max_keys,
                      BackendBatch* batch, int64_t* done) {
  from = std::max<int64_t>(from, 0);
  *done = std::max(from, revision);
  if (revision <= from) return Status::OK();
  const std::string lower = mvcc::HistoryKey(from, 0);
  auto history = view.NewIterator(lower, mvcc::HistoryKey(revision, 0));
  std::set<std::string> unplaced;  // keys of layout 1 rows
  size_t planned = 0;
  std::vector<std::string> history_rows;  // while few (kMaxHistoryPointDeletes)
  int64_t current = -1;
  std::string changed;
  for (history->Seek(lower); history->Valid(); history->Next()) {
    int64_t rev = 0;
    uint32_t sub = 0;
    bool deleted = false;
    mvcc::PrevVersion prev;
    Status s = mvcc::ReadHistoryRow(*history, &rev, &sub, &changed, &deleted, &prev);
    if (!s.ok()) return s;
    if (rev != current) {
      if (max_keys > 0 && planned + unplaced.size() >= max_keys) {
        *done = rev;
        break;
      }
      current = rev;
    }
    if (!prev.known) {
      unplaced.insert(changed);
    } else {
      // This change replaced `prev`: no read at or after `revision` sees it.
      if (prev.exists) batch->Delete(mvcc::VersionKey(changed, prev.revision, prev.sub));
      // A deletion below `revision` is gone for every read from there.
      if (deleted) batch->Delete(mvcc::VersionKey(changed, rev, sub));
      ++planned;
    }
    if (history_rows.size() <= kMaxHistoryPointDeletes) history_rows.emplace_back(history->key());
  }
  if (!history->status().ok()) return history->status();
  if (Status s = PlanUnplaced(view, unplaced, revision, batch); !s.ok()) return s;
  if (history_rows.size() <= kMaxHistoryPointDeletes) {
    // Only the rows below where the plan stopped.
    const std::string end = mvcc::HistoryKey(*done, 0);
    for (std::string& row : history_rows) {
      if (row < end) batch->Delete(std::move(row));
    }
  } else {
    batch->DeleteRange(lower, mvcc::HistoryKey(*done, 0));
  }
  return Status::OK();
}

}  // namespace raftkv
