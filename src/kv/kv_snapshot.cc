// KvStateMachine, the snapshot codec: Snapshot() writes the state's image
// as records, Restore() reads them back, checks them and swaps the result
// in (kv_state_machine.h; the file layout in storage/snapshot_format.h).
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kv/kv_state_machine.h"
#include "kv/kv_state_rows.h"
#include "kv/mvcc_keys.h"
#include "kv/mvcc_store.h"
#include "storage/memory_backend.h"
#include "storage/snapshot_format.h"

namespace raftkv {

namespace {

void RecordToKeyValue(const std::string& key, const KvRecord& r, KeyValue* out) {
  out->set_key(key);
  out->set_value(r.value);
  out->set_create_revision(r.create_revision);
  out->set_mod_revision(r.mod_revision);
  out->set_version(r.version);
  out->set_lease(r.lease);
}

KvRecord KeyValueToRecord(KeyValue* kv) {
  KvRecord r;
  r.value = std::move(*kv->mutable_value());
  r.create_revision = kv->create_revision();
  r.mod_revision = kv->mod_revision();
  r.version = kv->version();
  r.lease = kv->lease();
  return r;
}

}  // namespace

// What CaptureSnapshot() took under the lock, for EncodeSnapshot().
struct KvStateMachine::SnapshotImage {
  std::shared_ptr<const BackendView> view;
  SessionTable sessions;
  SnapshotStoreState store;
  int64_t from = 0;  // the history written: the revisions above it
};

void KvStateMachine::Snapshot(SnapshotWriter* out) const {
  const std::shared_ptr<const SnapshotImage> image = CaptureSnapshot(&out->meta());
  EncodeSnapshot(*image, out);
}

std::shared_ptr<const KvStateMachine::SnapshotImage> KvStateMachine::CaptureSnapshot(SnapshotMeta* meta) const {
  // The image: the store's view after the last apply (O(1)); the sessions
  // are copied. Apply waits only for this; it goes on while the image is
  // encoded.
  auto image = std::make_shared<SnapshotImage>();
  SnapshotStoreState& store = image->store;
  {
    ReaderLock lock(&mu_);
    meta->last_index = applied_index_;
    meta->last_term = applied_term_;
    meta->cluster_time_ms = cluster_time_ms_;
    image->view = backend_->View();
    image->sessions = sessions_;
    store.set_revision(revision_);
    for (const LeaseInfo& lease : leases_.Infos()) {
      SnapshotStoreState::LeaseRecord* l = store.add_leases();
      l->set_id(lease.id);
      l->set_ttl(lease.ttl);
      l->set_granted_index(lease.granted_index);
    }
    // Whole revisions from the newest back; the history kept covers every
    // revision above history_.compacted().
    const int64_t wanted = static_cast<int64_t>(std::min<size_t>(
        snapshot_history_revisions_, static_cast<size_t>(std::max<int64_t>(revision_, 0))));
    image->from = std::max(history_.compacted(), revision_ - wanted);
    store.set_history_compacted(image->from);
    store.set_compact_revision(history_.compact_revision());
    for (const auto& [member, type] : alarms_) {
      SnapshotStoreState::AlarmRecord* a = store.add_alarms();
      a->set_member(member);
      a->set_type(type);
    }
  }
  return image;
}

void KvStateMachine::EncodeSnapshot(const SnapshotImage& image, SnapshotWriter* out) {
  const MvccReader reader(image.view);
  const int64_t from = image.from;
  const std::string all_keys(1, '\0');
  std::vector<KvEvent> history;
  int64_t next = 0;
  CheckRead(reader.ReadEvents("", all_keys, from + 1, std::numeric_limits<size_t>::max(), &history, &next));
  SnapshotSession session;
  SnapshotSessionResult saved;
  std::string buf;
  for (const auto& [id, s] : image.sessions.sessions()) {
    session.set_client_id(id);
    session.set_timeout_ms(s.timeout_ms);
    session.set_expires_at_ms(s.expires_at_ms);
    session.set_first_outstanding(s.first_outstanding);
    session.set_result_count(s.results.size());
    session.SerializeToString(&buf);
    out->AddRecord(SnapshotRecordType::kSession, buf);
    for (const auto& [sequence, r] : s.results) {
      state_rows::EncodeResult(id, sequence, r, &saved);
      saved.SerializeToString(&buf);
      out->AddRecord(SnapshotRecordType::kSessionResult, buf);
    }
  }
  image.store.SerializeToString(&buf);
  out->AddRecord(SnapshotRecordType::kStore, buf);
  SnapshotEvent event;
  for (const KvEvent& e : history) {
    event.Clear();
    event.set_revision(e.revision);
    event.set_is_delete(e.is_delete);
    RecordToKeyValue(e.key, e.kv, event.mutable_kv());
    if (e.has_prev) RecordToKeyValue(e.key, e.prev, event.mutable_prev());
    event.SerializeToString(&buf);
    out->AddRecord(SnapshotRecordType::kHistory, buf);
  }
  CheckRead(reader.Scan("", all_keys, mvcc::kLatest, [out](const std::string& key, const KvRecord& r) {
    out->AddKv(key, r.value, r.create_revision, r.mod_revision, r.version, r.lease);
    return true;
  }));
}

// What Restore() builds aside from the file's records, and where it is in
// them (for the checks that span records and for the error messages).
struct KvStateMachine::RestoreState {
  explicit RestoreState(const std::string& path) : path(path) {}
  // A corruption at the current record.
  Status Bad(const std::string& what) const {
    return Status::Corruption(path + ": record " + std::to_string(record) + ": " + what);
  }

  // Adds a row to the store being built, in batches of kBatchBytes.
  Status Put(std::string key, std::string value) {
    batch.Put(std::move(key), std::move(value));
    return batch.bytes() < kBatchBytes ? Status::OK() : Flush();
  }
  Status Flush() {
    Status s = backend->Write(batch);
    batch.Clear();
    return s;
  }

  static constexpr size_t kBatchBytes = 4 << 20;
  const std::string& path;
  uint64_t record = 0;
  std::shared_ptr<KvBackend> backend = std::make_shared<MemoryBackend>();
  BackendBatch batch;
  size_t live_keys = 0;
  SessionTable sessions;
  LeaseTable leases;
  int64_t revision = 0;
  bool have_store = false;  // files written before revisions have no store record
  int64_t history_compacted = 0;
  int64_t compact_revision = 0;
  std::set<std::pair<uint64_t, uint32_t>> alarms;
  size_t data_bytes = 0;
  // The history's revisions with their events' bytes, in order, and the
  // row of each key's last change in it (revision, sub).
  std::vector<std::pair<int64_t, size_t>> window;
  std::map<std::string, std::pair<int64_t, uint32_t>> last_change;
  uint32_t sub = 0;  // of the next change in window.back()'s revision
  uint64_t session_id = 0;  // the session whose results are being read
  uint64_t results_left = 0;
  bool in_data = false;     // a KV record was seen: no more sessions
  std::string last_key;     // of the previous KV record (in_data)
  // Parsed into again for each record of their kind.
  SnapshotSession session_msg;
  SnapshotSessionResult result_msg;
  SnapshotKv kv_msg;
  SnapshotStoreState store_msg;
  SnapshotEvent event_msg;
};

Status KvStateMachine::Restore(SnapshotReader* in) {
  KvBackendFactory* factory = nullptr;
  if (persistent_) {
    ReaderLock lock(&mu_);
    factory = factory_;
  }
  if (persistent_ && factory == nullptr) {
    return Status::FailedPrecondition(in->path() + ": this persistent key-value store has nowhere to "
                                      "create the store of a snapshot");
  }
  // Built aside; swapped in only once the reader has verified the file.
  RestoreState st(in->path());
  if (factory != nullptr) {
    std::unique_ptr<KvBackend> fresh;
    Status s = factory->Create(in->meta().last_index, in->meta().last_term, &fresh);
    if (!s.ok()) return s;
    st.backend = std::move(fresh);
    // Every session and lease restored gets its rows.
    st.sessions.TrackChanges();
    st.leases.TrackChanges();
  }
  for (;; ++st.record) {
    SnapshotRecordType type;
    std::string_view msg;
    bool done = false;
    Status s = in->Next(&type, &msg, &done);
    if (!s.ok()) return s;
    if (done) break;
    if (type != SnapshotRecordType::kSessionResult && st.results_left > 0) {
      return st.Bad("session " + std::to_string(st.session_id) + " is missing " +
                    std::to_string(st.results_left) + " saved results");
    }
    s = RestoreRecord(type, msg, &st);
    if (!s.ok()) return s;
  }
  if (st.results_left > 0) {
    return st.Bad("session " + std::to_string(st.session_id) + " is missing " +
                  std::to_string(st.results_left) + " saved results");
  }
  if (Status s = st.Flush(); !s.ok()) return s;
  // Most of a new store is written before the swap, outside the lock.
  if (factory != nullptr) {
    if (Status s = st.backend->Flush(); !s.ok()) return s;
  }
  SwapInRestored(in->meta(), &st);
  // The old state (now in `st`) is freed outside the lock.
  st.backend.reset();
  if (factory == nullptr) return Status::OK();
  // The state rows SwapInRestored wrote; the old store is still the current
  // one until the commit, so only the RemoveStale() after it has work.
  std::shared_ptr<KvBackend> restored;
  {
    ReaderLock lock(&mu_);
    restored = backend_;
  }
  Status s = restored->Flush();
  if (s.ok()) s = factory->Commit(in->meta().last_index, in->meta().last_term);
  if (!s.ok()) {
    return Status::IOError(in->path() + ": restored, but the new store could not be made the current "
                           "one: " + s.ToString());
  }
  factory->RemoveStale();
  return Status::OK();
}

Status KvStateMachine::RestoreRecord(SnapshotRecordType type, std::string_view msg,
                                     RestoreState* st) {
  switch (type) {
    case SnapshotRecordType::kSession:
      return RestoreSession(msg, st);
    case SnapshotRecordType::kSessionResult:
      return RestoreSessionResult(msg, st);
    case SnapshotRecordType::kStore:
      return RestoreStore(msg, st);
    case SnapshotRecordType::kHistory:
      return RestoreHistory(msg, st);
    case SnapshotRecordType::kKv:
      return RestoreKv(msg, st);
  }
  return Status::OK();
}

Status KvStateMachine::RestoreSession(std::string_view msg, RestoreState* st) {
  if (st->in_data) return st->Bad("session record after the key/value records");
  SnapshotSession& m = st->session_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
    return st->Bad("bad SnapshotSession");
  }
  const uint64_t id = m.client_id();
  SessionTable::Session fields;
  fields.timeout_ms = m.timeout_ms();
  fields.expires_at_ms = m.expires_at_ms();
  fields.first_outstanding = m.first_outstanding();
  if (!st->sessions.AddRestored(id, fields)) {
    return st->Bad("session id " + std::to_string(id) + " out of order");
  }
  st->session_id = id;
  st->results_left = m.result_count();
  return Status::OK();
}

Status KvStateMachine::RestoreSessionResult(std::string_view msg, RestoreState* st) {
  if (st->results_left == 0) return st->Bad("saved result without a session expecting it");
  SnapshotSessionResult& m = st->result_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
    return st->Bad("bad SnapshotSessionResult");
  }
  if (m.client_id() != st->session_id) {
    return st->Bad("saved result of session " + std::to_string(m.client_id()) +
                   " inside session " + std::to_string(st->session_id));
  }
  const uint64_t sequence = m.sequence();
  ApplyResult r;
  std::string why;
  if (!state_rows::DecodeResult(&m, &r, &why)) return st->Bad(why);
  if (!st->sessions.AddRestoredResult(st->session_id, sequence, std::move(r))) {
    return st->Bad("saved result sequence " + std::to_string(sequence) + " out of order");
  }
  --st->results_left;
  return Status::OK();
}

Status KvStateMachine::RestoreStore(std::string_view msg, RestoreState* st) {
  if (st->in_data || st->have_store) return st->Bad("store record after the key/value records");
  SnapshotStoreState& m = st->store_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
    return st->Bad("bad SnapshotStoreState");
  }
  if (m.revision() < 0) return st->Bad("negative revision");
  st->revision = m.revision();
  for (const SnapshotStoreState::LeaseRecord& l : m.leases()) {
    if (l.id() <= 0 || !st->leases.AddRestored(l.id(), l.ttl(), l.granted_index())) {
      return st->Bad("lease id " + std::to_string(l.id()) + " out of order");
    }
  }
  // Used only when history records follow (older files have none).
  st->history_compacted = m.history_compacted();
  if (m.compact_revision() < 0 || m.compact_revision() > m.revision()) {
    return st->Bad("compact revision " + std::to_string(m.compact_revision()) + " outside 0.." +
                   std::to_string(m.revision()));
  }
  st->compact_revision = m.compact_revision();
  if (m.alarms_size() > static_cast<int>(kMaxAlarms)) return st->Bad("more than " + std::to_string(kMaxAlarms) + " alarms");
  for (const SnapshotStoreState::AlarmRecord& a : m.alarms()) {
    if (a.type() != kAlarmNoSpace) return st->Bad("unknown alarm type " + std::to_string(a.type()));
    if (!st->alarms.emplace(a.member(), a.type()).second) return st->Bad("alarm repeated");
  }
  st->have_store = true;
  return Status::OK();
}

Status KvStateMachine::RestoreHistory(std::string_view msg, RestoreState* st) {
  if (!st->have_store || st->in_data) return st->Bad("history record outside the store's records");
  SnapshotEvent& m = st->event_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
    return st->Bad("bad SnapshotEvent");
  }
  const int64_t rev = m.revision();
  const int64_t last = st->window.empty() ? st->history_compacted : st->window.back().first;
  if (rev <= st->history_compacted || rev > st->revision || rev < last) {
    return st->Bad("history revision " + std::to_string(rev) + " out of order or bounds");
  }
  KvEvent e;
  e.revision = rev;
  e.is_delete = m.is_delete();
  e.key = m.kv().key();
  e.kv = KeyValueToRecord(m.mutable_kv());
  e.has_prev = m.has_prev();  // the message is present
  if (e.has_prev) e.prev = KeyValueToRecord(m.mutable_prev());
  if (st->window.empty() || rev != last) {
    st->window.emplace_back(rev, 0);
    st->sub = 0;
  }
  st->window.back().second += e.Bytes();
  // The first change of a key in the history: the record before it (from
  // before the history) is a version a read at the history's start sees.
  const auto [change, first] = st->last_change.emplace(e.key, std::make_pair(rev, st->sub));
  // Where the version this change replaced is kept: the key's last change
  // here, or the one written below for the first.
  mvcc::PrevVersion prev;
  prev.known = true;
  prev.exists = e.has_prev;
  prev.revision = first ? e.prev.mod_revision : change->second.first;
  prev.sub = first ? 0 : change->second.second;
  if (!first) change->second = {rev, st->sub};
  Status s;
  if (first && e.has_prev && e.prev.mod_revision <= st->history_compacted) {
    s = st->Put(mvcc::VersionKey(e.key, e.prev.mod_revision, 0), mvcc::EncodeVersion(e.prev, false));
  }
  if (s.ok()) s = st->Put(mvcc::VersionKey(e.key, rev, st->sub), mvcc::EncodeVersion(e.kv, e.is_delete));
  if (s.ok()) s = st->Put(mvcc::HistoryKey(rev, st->sub), mvcc::EncodeEvent(e.key, e.is_delete, prev));
  ++st->sub;
  return s;
}

Status KvStateMachine::RestoreKv(std::string_view msg, RestoreState* st) {
  SnapshotKv& m = st->kv_msg;
  if (!m.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) return st->Bad("bad SnapshotKv");
  if (st->in_data && !(st->last_key < m.key())) return st->Bad("key out of order");
  st->last_key = m.key();
  KvRecord r;
  if (!st->have_store) {  // before revisions: every key as created at revision 1
    st->revision = 1;
    r.create_revision = r.mod_revision = r.version = 1;
  } else {
    r.create_revision = m.create_revision();
    r.mod_revision = m.mod_revision();
    r.version = m.version();
    r.lease = m.lease();
    if (r.create_revision <= 0 || r.mod_revision < r.create_revision ||
        r.mod_revision > st->revision || r.version <= 0) {
      return st->Bad("key revisions out of bounds (create " + std::to_string(r.create_revision) +
                     ", mod " + std::to_string(r.mod_revision) + ", version " +
                     std::to_string(r.version) + ", store revision " +
                     std::to_string(st->revision) + ")");
    }
    if (r.lease != 0 && !st->leases.Attach(m.key(), r.lease)) {
      return st->Bad("key attached to unknown lease " + std::to_string(r.lease));
    }
  }
  r.value = std::move(*m.mutable_value());
  st->data_bytes += m.key().size() + kKeyOverhead + r.value.size();
  ++st->live_keys;
  st->in_data = true;
  // Its version row is its last change's in the history, if there.
  uint32_t sub = 0;
  if (auto change = st->last_change.find(m.key());
      change != st->last_change.end() && change->second.first == r.mod_revision) {
    sub = change->second.second;
  }
  return st->Put(mvcc::VersionKey(m.key(), r.mod_revision, sub), mvcc::EncodeVersion(r, false));
}

void KvStateMachine::SwapInRestored(const SnapshotMeta& meta, RestoreState* st) {
  WriterLock lock(&mu_);
  std::swap(backend_, st->backend);
  live_keys_ = st->live_keys;
  std::swap(sessions_, st->sessions);
  leases_.Swap(&st->leases);
  std::swap(alarms_, st->alarms);
  data_bytes_ = st->data_bytes;
  revision_ = st->revision;
  int64_t history_compacted = st->history_compacted;
  if (history_compacted < 0 || history_compacted > st->revision) history_compacted = st->revision;
  const int64_t start = st->window.empty() ? st->revision : history_compacted;
  history_.Reset(start);
  history_.SetCompactRevision(st->compact_revision);
  for (const auto& [revision, bytes] : st->window) history_.AppendRevision(revision, bytes);
  applied_index_ = meta.last_index;
  applied_term_ = meta.last_term;
  cluster_time_ms_ = meta.cluster_time_ms;
  applied_config_ = meta.config;
  // What this member's window does not keep; a new persistent store gets
  // every row of the state besides the keys (`m state` at the new index).
  alarms_changed_ = config_changed_ = persistent_;
  swept_ = start;  // the new store holds no history at or below it
  DropTrimmedLocked(/*all_rows=*/persistent_);
  PublishLocked();
}

}  // namespace raftkv

namespace raftkv {

namespace {

// The `m state` of the checkpoint in `dir`, opened read-only; with
// `verify`, after every block's checksum has been checked.
Status ReadCheckpointState(KvBackendFactory* factory, const std::string& dir, bool verify,
                           state_rows::Loaded* out) {
  std::unique_ptr<KvBackend> opened;
  Status s = factory->OpenCheckpoint(dir, &opened);
  if (s.ok() && verify) s = opened->VerifyChecksums();
  if (s.ok()) s = state_rows::LoadMetaOnly(*opened->View(), out);
  if (s.ok() && !out->found) s = Status::Corruption(dir + ": the checkpoint's store holds no applied entry");
  return s;
}

}  // namespace

Status KvStateMachine::TakeCheckpoint(CheckpointStore* store, const std::string& engine,
                                      const std::function<bool(uint64_t, std::string*)>& config_at,
                                      CheckpointInfo* out) {
  std::shared_ptr<KvBackend> backend;
  KvBackendFactory* factory = nullptr;
  {
    ReaderLock lock(&mu_);
    backend = backend_;
    factory = factory_;
  }
  if (!persistent_ || factory == nullptr) {
    return Status::FailedPrecondition("this key-value store keeps no checkpoint snapshots");
  }
  const auto describe = [&](const std::string& dir, SnapshotMeta* meta) {
    state_rows::Loaded loaded;
    Status s = ReadCheckpointState(factory, dir, /*verify=*/false, &loaded);
    if (!s.ok()) return s;
    meta->last_index = loaded.meta.applied_index();
    meta->last_term = loaded.meta.applied_term();
    meta->cluster_time_ms = loaded.meta.cluster_time_ms();
    if (!config_at(meta->last_index, &meta->config)) {
      return Status::Aborted("a newer snapshot was installed while the checkpoint at index " +
                             std::to_string(meta->last_index) + " was taken");
    }
    return Status::OK();
  };
  return store->Create(backend.get(), engine, describe, out);
}

Status KvStateMachine::VerifyCheckpoint(const std::string& dir, uint64_t index, uint64_t term) {
  KvBackendFactory* factory = nullptr;
  {
    ReaderLock lock(&mu_);
    factory = factory_;
  }
  if (factory == nullptr) return Status::FailedPrecondition("this key-value store keeps no checkpoint snapshots");
  state_rows::Loaded loaded;
  Status s = ReadCheckpointState(factory, dir, /*verify=*/true, &loaded);
  if (s.ok() && (loaded.meta.applied_index() != index || loaded.meta.applied_term() != term)) {
    s = Status::Corruption(dir + ": the store is at index " + std::to_string(loaded.meta.applied_index()) +
                           ", term " + std::to_string(loaded.meta.applied_term()) + ", not the manifest's " +
                           std::to_string(index) + ", term " + std::to_string(term));
  }
  return s;
}

Status KvStateMachine::InstallCheckpoint(const std::string& dir, uint64_t index, uint64_t term) {
  KvBackendFactory* factory = nullptr;
  {
    ReaderLock lock(&mu_);
    factory = factory_;
  }
  if (factory == nullptr) return Status::FailedPrecondition("this key-value store keeps no checkpoint snapshots");
  std::unique_ptr<KvBackend> fresh;
  Status s = factory->CreateFromCheckpoint(dir, index, term, &fresh);
  if (!s.ok()) return s;
  std::shared_ptr<KvBackend> store(std::move(fresh));
  const std::shared_ptr<const BackendView> view = store->View();
  state_rows::Loaded loaded;
  s = state_rows::Load(*view, &loaded);
  if (s.ok() && (!loaded.found || loaded.meta.applied_index() != index || loaded.meta.applied_term() != term)) {
    s = Status::Corruption(dir + ": the checkpoint's store is not at index " + std::to_string(index) +
                           ", term " + std::to_string(term));
  }
  if (!s.ok()) {
    store.reset();
    factory->RemoveStale();
    return s;
  }
  // The commit point: a restart opens the new store from here on.
  s = factory->Commit(index, term);
  if (!s.ok()) {
    store.reset();
    factory->RemoveStale();
    return s;
  }
  s = Resume(view, &loaded, std::move(store));
  if (!s.ok()) return Status::Corruption(dir + ": installed, but cannot be read back: " + s.ToString());
  factory->RemoveStale();
  return Status::OK();
}

Status KvStateMachine::ExportCheckpoint(const std::string& dir, const SnapshotMeta& meta, SnapshotStore* into,
                                        SnapshotFileInfo* written) {
  KvBackendFactory* factory = nullptr;
  size_t history = 0;
  {
    ReaderLock lock(&mu_);
    factory = factory_;
    history = snapshot_history_revisions_;
  }
  if (factory == nullptr) return Status::FailedPrecondition("this key-value store keeps no checkpoint snapshots");
  std::unique_ptr<KvBackend> opened;
  Status s = factory->OpenCheckpoint(dir, &opened);
  if (!s.ok()) return s;
  const std::shared_ptr<const BackendView> view = opened->View();
  state_rows::Loaded loaded;
  s = state_rows::Load(*view, &loaded);
  if (s.ok() && (!loaded.found || loaded.meta.applied_index() != meta.last_index)) {
    s = Status::Corruption(dir + ": the checkpoint's store is not at index " + std::to_string(meta.last_index));
  }
  if (!s.ok()) return s;
  std::unique_ptr<KvStateMachine> reader(new KvStateMachine(std::move(opened)));
  reader->read_only_ = true;
  s = reader->Resume(view, &loaded);
  if (!s.ok()) return s;
  reader->SetSnapshotHistory(history);
  SnapshotMeta image_meta;
  const std::shared_ptr<const SnapshotImage> image = reader->CaptureSnapshot(&image_meta);
  image_meta.config = meta.config;
  return into->WriteStreamed(image_meta, [&image](SnapshotWriter* w) { EncodeSnapshot(*image, w); }, written);
}

}  // namespace raftkv
