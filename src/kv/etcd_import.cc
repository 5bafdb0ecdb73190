#include "kv/etcd_import.h"

#include <glog/logging.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "proto/etcd.h"
#include "proto/internal.h"

namespace raftkv {

namespace {

constexpr size_t kRevisionBytes = 17;  // main, '_', sub
constexpr char kTombstone = 't';

uint64_t BigEndian64(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

std::string RevisionName(uint64_t main, uint64_t sub) {
  return std::to_string(main) + "_" + std::to_string(sub);
}

// What the import builds, and where it is.
struct ImportState {
  explicit ImportState(const std::string& name, size_t history_revisions)
      : name(name), history_revisions(history_revisions) {}
  Status Bad(const std::string& bucket, const std::string& what) const {
    return Status::Corruption(name + ": etcd bucket '" + bucket + "': " + what);
  }

  const std::string& name;
  size_t history_revisions;
  EtcdImportSummary summary;
  int64_t scheduled_compact = 0;
  std::map<int64_t, int64_t> leases;  // id -> TTL
  std::map<std::string, KvRecord> keys;
  int64_t last_main = 0;  // the previous entry of the key bucket
  int64_t last_sub = -1;
  // The history: the events of the newest revisions above the compaction.
  std::deque<SnapshotEvent> events;
  size_t event_revisions = 0;  // distinct revisions in `events`
};

// A revision key's main revision (the first 8 bytes, big endian).
Status CompactRevision(const ImportState& st, std::string_view name, std::string_view value,
                       int64_t* out) {
  if (value.size() < 8 || BigEndian64(value) > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return st.Bad("meta", std::string(name) + " is not a revision");
  }
  *out = static_cast<int64_t>(BigEndian64(value));
  return Status::OK();
}

Status ReadMetaBucket(BboltReader* db, ImportState* st) {
  bool found = false;
  return db->ForEach("meta", &found, [&](std::string_view key, std::string_view value, bool) {
    if (key == "consistent_index" || key == "term") {
      if (value.size() != 8) return st->Bad("meta", std::string(key) + " is not 8 bytes");
      (key == "term" ? st->summary.term : st->summary.consistent_index) = BigEndian64(value);
    } else if (key == "finishedCompactRev") {
      return CompactRevision(*st, key, value, &st->summary.compact_revision);
    } else if (key == "scheduledCompactRev") {
      return CompactRevision(*st, key, value, &st->scheduled_compact);
    }
    return Status::OK();
  });
}

// leasepb.Lease: ID (1) and TTL (2), varints; other fields skipped.
bool ParseLease(std::string_view value, int64_t* id, int64_t* ttl) {
  namespace wire = google::protobuf::internal;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(value.data()),
                                            static_cast<int>(value.size()));
  *id = *ttl = 0;
  for (;;) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return in.ConsumedEntireMessage();
    const int field = wire::WireFormatLite::GetTagFieldNumber(tag);
    uint64_t v = 0;
    if ((field == 1 || field == 2) &&
        wire::WireFormatLite::GetTagWireType(tag) == wire::WireFormatLite::WIRETYPE_VARINT) {
      if (!in.ReadVarint64(&v)) return false;
      (field == 1 ? *id : *ttl) = static_cast<int64_t>(v);
    } else if (!wire::WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
}

Status ReadLeases(BboltReader* db, ImportState* st) {
  bool found = false;
  return db->ForEach("lease", &found, [&](std::string_view key, std::string_view value, bool) {
    int64_t id = 0;
    int64_t ttl = 0;
    if (key.size() != 8) return st->Bad("lease", "a key of " + std::to_string(key.size()) + " bytes");
    const std::string name = "lease " + std::to_string(static_cast<int64_t>(BigEndian64(key)));
    if (!ParseLease(value, &id, &ttl)) return st->Bad("lease", name + " is not a leasepb.Lease");
    if (id <= 0 || static_cast<uint64_t>(id) != BigEndian64(key)) {
      return st->Bad("lease", name + " holds lease id " + std::to_string(id));
    }
    if (ttl <= 0) return st->Bad("lease", name + " has TTL " + std::to_string(ttl));
    if (!st->leases.empty() && st->leases.rbegin()->first >= id) {
      return st->Bad("lease", name + " out of order");
    }
    st->leases.emplace(id, ttl);
    return Status::OK();
  });
}

// Keeps `e` in the history when its revision is above the compaction,
// dropping the oldest revisions past the limit.
void AddEvent(ImportState* st, SnapshotEvent e) {
  if (e.revision() <= std::max(st->summary.compact_revision, st->scheduled_compact) ||
      st->history_revisions == 0) {
    return;
  }
  if (st->events.empty() || st->events.back().revision() != e.revision()) ++st->event_revisions;
  st->events.push_back(std::move(e));
  while (st->event_revisions > st->history_revisions) {
    const int64_t oldest = st->events.front().revision();
    while (st->events.front().revision() == oldest) st->events.pop_front();
    --st->event_revisions;
  }
}

// One entry of the key bucket, applied to st->keys in revision order.
Status ApplyRevision(ImportState* st, std::string_view rev, std::string_view value) {
  const std::string where = "revision " + (rev.size() >= kRevisionBytes
                                               ? RevisionName(BigEndian64(rev), BigEndian64(rev.substr(9)))
                                               : "key of " + std::to_string(rev.size()) + " bytes");
  const bool tombstone = rev.size() == kRevisionBytes + 1 && rev[kRevisionBytes] == kTombstone;
  if ((rev.size() != kRevisionBytes && !tombstone) || rev[8] != '_') {
    return st->Bad("key", where + ": not a revision key");
  }
  const uint64_t main = BigEndian64(rev);
  const uint64_t sub = BigEndian64(rev.substr(9));
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (main == 0 || main > kMax || sub > kMax) return st->Bad("key", where + ": out of range");
  const int64_t m = static_cast<int64_t>(main);
  const int64_t s = static_cast<int64_t>(sub);
  if (m < st->last_main || (m == st->last_main && s <= st->last_sub)) {
    return st->Bad("key", where + " comes after revision " + RevisionName(st->last_main, st->last_sub));
  }
  st->last_main = m;
  st->last_sub = s;
  ++st->summary.revisions;
  mvccpb::KeyValue kv;
  if (!kv.ParseFromArray(value.data(), static_cast<int>(value.size())) || kv.key().empty()) {
    return st->Bad("key", where + ": the value is not an mvccpb.KeyValue with a key");
  }
  auto old = st->keys.find(kv.key());
  SnapshotEvent e;
  e.set_revision(m);
  e.set_is_delete(tombstone);
  if (old != st->keys.end()) ToKeyValue(old->first, old->second, false, e.mutable_prev());
  if (tombstone) {
    // A deletion of a key the file no longer holds (compacted away) changes nothing.
    if (old == st->keys.end()) return Status::OK();
    e.mutable_kv()->set_key(kv.key());
    e.mutable_kv()->set_mod_revision(m);
    st->keys.erase(old);
    AddEvent(st, std::move(e));
    return Status::OK();
  }
  if (kv.mod_revision() != m || kv.create_revision() <= 0 || kv.create_revision() > m ||
      kv.version() <= 0) {
    return st->Bad("key", where + ": key-value with create revision " +
                              std::to_string(kv.create_revision()) + ", mod revision " +
                              std::to_string(kv.mod_revision()) + ", version " +
                              std::to_string(kv.version()));
  }
  KvRecord r;
  r.value = std::move(*kv.mutable_value());
  r.create_revision = kv.create_revision();
  r.mod_revision = m;
  r.version = kv.version();
  r.lease = kv.lease();
  ToKeyValue(kv.key(), r, false, e.mutable_kv());
  st->keys.insert_or_assign(std::move(*kv.mutable_key()), std::move(r));
  AddEvent(st, std::move(e));
  return Status::OK();
}

// The records of the image, in the order Restore() reads them.
void WriteImage(ImportState* st, SnapshotWriter* out) {
  EtcdImportSummary& sum = st->summary;
  SnapshotStoreState store;
  store.set_revision(sum.revision);
  for (const auto& [id, ttl] : st->leases) {
    SnapshotStoreState::LeaseRecord* l = store.add_leases();
    l->set_id(id);
    l->set_ttl(ttl);
  }
  sum.history_from = st->events.empty() ? sum.revision : st->events.front().revision() - 1;
  store.set_history_compacted(sum.history_from);
  // etcd finishes a scheduled compaction when it opens the database.
  store.set_compact_revision(std::max(sum.compact_revision, st->scheduled_compact));
  std::string buf;
  store.SerializeToString(&buf);
  out->AddRecord(SnapshotRecordType::kStore, buf);
  for (const SnapshotEvent& e : st->events) {
    e.SerializeToString(&buf);
    out->AddRecord(SnapshotRecordType::kHistory, buf);
  }
  for (auto& [key, r] : st->keys) {
    if (r.lease != 0 && st->leases.count(r.lease) == 0) {
      ++sum.leaseless;
      r.lease = 0;
    }
    out->AddKv(key, r.value, r.create_revision, r.mod_revision, r.version, r.lease);
  }
  sum.keys = st->keys.size();
  sum.leases = st->leases.size();
  out->meta().last_index = std::max<uint64_t>(sum.consistent_index, 1);
  out->meta().last_term = std::max<uint64_t>(sum.term, 1);
  out->meta().cluster_time_ms = 0;
}

}  // namespace

Status ImportEtcdDatabase(BboltReader* db, SnapshotWriter* out, EtcdImportSummary* summary,
                          size_t history_revisions) {
  *summary = EtcdImportSummary();
  ImportState st(db->name(), history_revisions);
  Status s = ReadMetaBucket(db, &st);
  if (s.ok()) s = ReadLeases(db, &st);
  if (!s.ok()) return s;
  bool found = false;
  s = db->ForEach("key", &found, [&](std::string_view key, std::string_view value, bool is_bucket) {
    if (is_bucket) return st.Bad("key", "holds a nested bucket");
    return ApplyRevision(&st, key, value);
  });
  if (!s.ok()) return s;
  if (!found) {
    return Status::Corruption(db->name() +
                              ": a bbolt database without etcd's 'key' bucket (not an etcd v3 "
                              "database)");
  }
  // As etcd opens a database: the highest revision, not below a compaction.
  st.summary.revision = std::max({st.last_main, st.summary.compact_revision, st.scheduled_compact});
  WriteImage(&st, out);
  if (st.summary.leaseless > 0) {
    LOG(WARNING) << db->name() << ": " << st.summary.leaseless
                 << " keys are attached to leases the database does not hold; imported without "
                    "a lease";
  }
  *summary = st.summary;
  return Status::OK();
}

}  // namespace raftkv
