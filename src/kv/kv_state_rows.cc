#include "kv/kv_state_rows.h"

#include <functional>
#include <string_view>

#include "kv/mvcc_keys.h"

namespace raftkv {
namespace state_rows {

namespace {

constexpr uint32_t kMaxSessionError =
    static_cast<uint32_t>(ApplyResult::SessionError::kStaleSequence);
constexpr std::string_view kStateName = "state";
constexpr std::string_view kConfigName = "config";
constexpr std::string_view kAlarmName = "alarm";

// The first key after every key that starts with `prefix` (not all 0xff).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

// The rows of one kind (those that start with one prefix byte and an id).
std::string IdPrefix(char kind, uint64_t id) {
  std::string out(1, kind);
  mvcc::AppendBigEndian64(&out, id);
  return out;
}

std::string AlarmKey(uint64_t member, uint32_t type) {
  std::string out = mvcc::MetaKey(kAlarmName);
  mvcc::AppendBigEndian64(&out, member);
  mvcc::AppendBigEndian32(&out, type);
  return out;
}

// Calls `row` for every row of [begin, end) in order, stopping at its first
// error.
Status ScanRows(const BackendView& view, const std::string& begin, const std::string& end,
                const std::function<Status(std::string_view, std::string_view)>& row) {
  std::unique_ptr<BackendIterator> it = view.NewIterator(begin, end);
  for (it->Seek(begin); it->Valid(); it->Next()) {
    if (Status s = row(it->key(), it->value()); !s.ok()) return s;
  }
  return it->status();
}

Status Bad(const std::string& what, std::string_view key) {
  std::string hex;
  for (unsigned char c : key.substr(0, 32)) {
    static const char kDigits[] = "0123456789abcdef";
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return Status::Corruption("key-value store: " + what + " (row " + hex + ")");
}

// Reads the big-endian ids that follow the prefix byte of `key`.
bool ParseIds(std::string_view key, uint64_t* first, uint64_t* second) {
  key.remove_prefix(1);
  if (!mvcc::ConsumeBigEndian64(&key, first)) return false;
  if (second == nullptr) return key.empty();
  return mvcc::ConsumeBigEndian64(&key, second) && key.empty();
}

Status LoadSessions(const BackendView& view, SessionTable* sessions) {
  SnapshotSession msg;
  const std::string prefix(1, mvcc::kSessionPrefix);
  Status s = ScanRows(view, prefix, PrefixEnd(prefix), [&](std::string_view key, std::string_view value) {
    uint64_t id = 0;
    if (!ParseIds(key, &id, nullptr) || !msg.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      return Bad("bad session row", key);
    }
    SessionTable::Session fields;
    fields.timeout_ms = msg.timeout_ms();
    fields.expires_at_ms = msg.expires_at_ms();
    fields.first_outstanding = msg.first_outstanding();
    if (!sessions->AddRestored(id, fields)) return Bad("session id 0", key);
    return Status::OK();
  });
  if (!s.ok()) return s;
  SnapshotSessionResult result;
  const std::string results(1, mvcc::kResultPrefix);
  return ScanRows(view, results, PrefixEnd(results), [&](std::string_view key, std::string_view value) {
    uint64_t id = 0, sequence = 0;
    if (!ParseIds(key, &id, &sequence) || !result.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      return Bad("bad saved answer row", key);
    }
    ApplyResult r;
    std::string why;
    if (!DecodeResult(&result, &r, &why)) return Bad(why, key);
    if (!sessions->AddRestoredResult(id, sequence, std::move(r))) return Bad("saved answer of no session", key);
    return Status::OK();
  });
}

Status LoadLeases(const BackendView& view, LeaseTable* leases) {
  SnapshotStoreState::LeaseRecord msg;
  const std::string prefix(1, mvcc::kLeasePrefix);
  Status s = ScanRows(view, prefix, PrefixEnd(prefix), [&](std::string_view key, std::string_view value) {
    uint64_t id = 0;
    if (!ParseIds(key, &id, nullptr) || !msg.ParseFromArray(value.data(), static_cast<int>(value.size())) ||
        static_cast<int64_t>(id) <= 0 || !leases->AddRestored(static_cast<int64_t>(id), msg.ttl(), msg.granted_index())) {
      return Bad("bad lease row", key);
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  const std::string attached(1, mvcc::kLeaseKeyPrefix);
  return ScanRows(view, attached, PrefixEnd(attached), [&](std::string_view key, std::string_view) {
    int64_t id = 0;
    std::string user_key;
    if (!mvcc::ParseLeaseAttachKey(key, &id, &user_key) || !leases->Attach(user_key, id)) {
      return Bad("key attached to no lease", key);
    }
    return Status::OK();
  });
}

Status LoadMeta(const BackendView& view, Loaded* out) {
  std::string value;
  const std::string state_key = mvcc::MetaKey(kStateName);
  Status s = view.Get(state_key, &value, &out->found);
  if (!s.ok() || !out->found) return s;
  if (!out->meta.ParseFromString(value)) return Bad("bad state row", state_key);
  if (out->meta.format() < kOldestFormat || out->meta.format() > kFormat) {
    return Bad("layout " + std::to_string(out->meta.format()) + ", this version reads " +
                   std::to_string(kOldestFormat) + " to " + std::to_string(kFormat),
               state_key);
  }
  bool found = false;
  s = view.Get(mvcc::MetaKey(kConfigName), &out->config, &found);
  if (!s.ok()) return s;
  const std::string alarms = mvcc::MetaKey(kAlarmName);
  return ScanRows(view, alarms, PrefixEnd(alarms), [&](std::string_view key, std::string_view) {
    std::string_view rest = key.substr(alarms.size());
    uint64_t member = 0;
    uint32_t type = 0;
    if (!mvcc::ConsumeBigEndian64(&rest, &member) || !mvcc::ConsumeBigEndian32(&rest, &type) || !rest.empty()) {
      return Bad("bad alarm row", key);
    }
    out->alarms.emplace(member, type);
    return Status::OK();
  });
}

}  // namespace

void EncodeResult(uint64_t client_id, uint64_t sequence, const ApplyResult& r,
                  SnapshotSessionResult* out) {
  out->Clear();
  out->set_client_id(client_id);
  out->set_sequence(sequence);
  out->set_ok(r.ok);
  out->set_existed(r.existed);
  out->set_swapped(r.swapped);
  out->set_found(r.found);
  out->set_current(r.current);
  out->set_error(r.error);
  out->set_session_error(static_cast<uint32_t>(r.session_error));
  out->set_duplicate(r.duplicate);
  out->set_index(r.index);
  out->set_term(r.term);
  out->set_result_client_id(r.client_id);
  for (bool e : r.batch_existed) out->add_batch_existed(e);
  r.answer.SerializeToString(out->mutable_answer());
}

bool DecodeResult(SnapshotSessionResult* m, ApplyResult* out, std::string* why) {
  if (m->session_error() > kMaxSessionError) {
    *why = "unknown session error " + std::to_string(m->session_error());
    return false;
  }
  ApplyResult& r = *out;
  r.ok = m->ok();
  r.existed = m->existed();
  r.swapped = m->swapped();
  r.found = m->found();
  r.current = std::move(*m->mutable_current());
  r.error = std::move(*m->mutable_error());
  r.session_error = static_cast<ApplyResult::SessionError>(m->session_error());
  r.duplicate = m->duplicate();
  r.index = m->index();
  r.term = m->term();
  r.client_id = m->result_client_id();
  r.batch_existed.assign(m->batch_existed().begin(), m->batch_existed().end());
  if (!r.answer.ParseFromString(m->answer())) {
    *why = "bad saved answer";
    return false;
  }
  return true;
}

void AddSessionRows(const SessionTable& table, const SessionTable::Changes& changes,
                    BackendBatch* batch) {
  const auto& sessions = table.sessions();
  SnapshotSession session;
  SnapshotSessionResult saved;
  std::string buf;
  for (uint64_t id : changes.sessions) {
    auto it = sessions.find(id);
    if (it == sessions.end()) {
      batch->Delete(mvcc::SessionKey(id));
      const std::string results = IdPrefix(mvcc::kResultPrefix, id);
      batch->DeleteRange(results, PrefixEnd(results));
      continue;
    }
    session.set_timeout_ms(it->second.timeout_ms);
    session.set_expires_at_ms(it->second.expires_at_ms);
    session.set_first_outstanding(it->second.first_outstanding);
    session.SerializeToString(&buf);
    batch->Put(mvcc::SessionKey(id), buf);
  }
  for (const auto& [id, sequence] : changes.results) {
    auto it = sessions.find(id);
    if (it == sessions.end()) continue;  // its rows are deleted whole above
    auto r = it->second.results.find(sequence);
    if (r == it->second.results.end()) {
      batch->Delete(mvcc::ResultKey(id, sequence));
      continue;
    }
    EncodeResult(id, sequence, r->second, &saved);
    saved.SerializeToString(&buf);
    batch->Put(mvcc::ResultKey(id, sequence), buf);
  }
}

void AddLeaseRows(const LeaseTable& table, const LeaseTable::Changes& changes,
                  BackendBatch* batch) {
  SnapshotStoreState::LeaseRecord lease;
  for (int64_t id : changes.leases) {
    std::optional<uint64_t> granted = table.GrantedIndex(id);
    if (!granted) {
      batch->Delete(mvcc::LeaseKey(id));
      const std::string keys = IdPrefix(mvcc::kLeaseKeyPrefix, static_cast<uint64_t>(id));
      batch->DeleteRange(keys, PrefixEnd(keys));
      continue;
    }
    int64_t ttl = 0;
    table.Get(id, &ttl, nullptr);
    lease.set_id(id);
    lease.set_ttl(ttl);
    lease.set_granted_index(*granted);
    batch->Put(mvcc::LeaseKey(id), lease.SerializeAsString());
  }
  for (const auto& [id, key] : changes.keys) {
    if (!table.Contains(id)) continue;  // its rows are deleted whole above
    if (table.Attached(id, key)) {
      batch->Put(mvcc::LeaseAttachKey(id, key), std::string());
    } else {
      batch->Delete(mvcc::LeaseAttachKey(id, key));
    }
  }
}

void AddAlarmRows(const std::set<std::pair<uint64_t, uint32_t>>& alarms, BackendBatch* batch) {
  const std::string prefix = mvcc::MetaKey(kAlarmName);
  batch->DeleteRange(prefix, PrefixEnd(prefix));
  for (const auto& [member, type] : alarms) batch->Put(AlarmKey(member, type), std::string());
}

void AddMeta(const KvMeta& meta, BackendBatch* batch) {
  batch->Put(mvcc::MetaKey(kStateName), meta.SerializeAsString());
}

void AddConfig(const std::string& config, BackendBatch* batch) {
  batch->Put(mvcc::MetaKey(kConfigName), config);
}

Status LoadMetaOnly(const BackendView& view, Loaded* out) { return LoadMeta(view, out); }

Status Load(const BackendView& view, Loaded* out) {
  if (Status s = LoadMeta(view, out); !s.ok() || !out->found) return s;
  if (Status s = LoadSessions(view, &out->sessions); !s.ok()) return s;
  return LoadLeases(view, &out->leases);
}

}  // namespace state_rows
}  // namespace raftkv
