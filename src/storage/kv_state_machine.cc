#include "storage/kv_state_machine.h"

#include <algorithm>
#include <mutex>

#include <glog/logging.h>

#include "storage/snapshot_format.h"

namespace raftkv {

namespace {

bool IsDataOp(Command::Op op) {
  return op == Command::PUT || op == Command::DELETE || op == Command::CAS ||
         op == Command::BATCH;
}

// Empty if every op of a BATCH is a PUT or DELETE, else why not. The server
// never proposes anything else; an entry that does (a bug, a newer version)
// is skipped whole by every replica alike.
std::string CheckBatchOps(const Command& command) {
  for (int i = 0; i < command.ops_size(); ++i) {
    const Command::Op op = command.ops(i).op();
    if (op != Command::PUT && op != Command::DELETE) {
      return "batch op " + std::to_string(i) + " has op " + std::to_string(op) +
             " (only PUT and DELETE may be batched)";
    }
  }
  return "";
}

constexpr uint32_t kMaxSessionError =
    static_cast<uint32_t>(ApplyResult::SessionError::kStaleSequence);

}  // namespace

ApplyResult KvStateMachine::Apply(const Entry& entry) {
  ApplyResult result;
  Command command;
  const bool have_command = Decode(entry, &command, &result);
  std::unique_lock<std::shared_mutex> lock(mu_);
  ApplyLocked(entry, command, have_command, &result);
  return result;
}

bool KvStateMachine::Decode(const Entry& entry, Command* out, ApplyResult* result_out) {
  ApplyResult& result = *result_out;
  Command& command = *out;
  result.index = entry.index();
  result.term = entry.term();
  // Decode outside the lock: readers are only blocked for the map update.
  bool have_command = false;
  if (entry.type() == ENTRY_COMMAND) {
    if (!command.ParseFromString(entry.data())) {
      result.ok = false;
      result.error = "undecodable command at index " + std::to_string(entry.index());
    } else if (!IsDataOp(command.op()) && command.op() != Command::OPEN_SESSION &&
               command.op() != Command::CLOSE_SESSION) {
      result.ok = false;
      result.error = "unknown command op " + std::to_string(command.op()) + " at index " +
                     std::to_string(entry.index());
    } else if (std::string why = command.op() == Command::BATCH ? CheckBatchOps(command) : "";
               !why.empty()) {
      result.ok = false;
      result.error = why + " at index " + std::to_string(entry.index());
    } else {
      have_command = true;
    }
  } else if (entry.type() != ENTRY_NOOP && entry.type() != ENTRY_CONFIG) {
    // ENTRY_CONFIG (a MembershipConfig) is the consensus layer's business:
    // here it is a no-op like ENTRY_NOOP, and a successful one.
    // An entry type added by a newer version: every replica skips it alike.
    result.ok = false;
    result.error = "unknown entry type " + std::to_string(entry.type()) + " at index " +
                   std::to_string(entry.index());
  }
  return have_command;
}

void KvStateMachine::ApplyLocked(const Entry& entry, Command& command, bool have_command,
                                 ApplyResult* result_out) {
  ApplyResult& result = *result_out;
  CHECK_EQ(entry.index(), applied_index_ + 1) << "entries must be applied in index order";
  applied_index_ = entry.index();
  applied_term_ = entry.term();
  // Cluster time never goes back along the committed log; max() keeps it so
  // even for a log written before entries carried a time.
  cluster_time_ms_ = std::max(cluster_time_ms_, entry.cluster_time_ms());
  ExpireSessions(cluster_time_ms_);
  if (!have_command) return;

  if (command.op() == Command::OPEN_SESSION) {
    const uint64_t id = entry.index();
    Session& s = sessions_[id];
    s.timeout_ms = command.session_timeout_ms();
    Touch(id, &s, cluster_time_ms_);
    result.client_id = id;
    return;
  }
  if (command.op() == Command::CLOSE_SESSION) {
    auto it = sessions_.find(command.client_id());
    if (it != sessions_.end()) {
      expiry_.erase({it->second.expires_at_ms, it->first});
      sessions_.erase(it);
    }
    return;
  }
  if (command.client_id() == 0) {  // no session: at-least-once
    ApplyToMap(command, &result);
    return;
  }

  auto it = sessions_.find(command.client_id());
  if (it == sessions_.end()) {
    result.session_error = ApplyResult::SessionError::kSessionExpired;
    result.error = "session " + std::to_string(command.client_id()) +
                   " is unknown or expired; open a new session";
    return;
  }
  Session& s = it->second;
  Touch(it->first, &s, cluster_time_ms_);
  if (command.first_outstanding() > s.first_outstanding) {
    s.first_outstanding = command.first_outstanding();
    s.results.erase(s.results.begin(), s.results.lower_bound(s.first_outstanding));
  }
  if (command.sequence() < s.first_outstanding) {
    result.session_error = ApplyResult::SessionError::kStaleSequence;
    result.error = "sequence " + std::to_string(command.sequence()) + " of session " +
                   std::to_string(command.client_id()) +
                   " is below the session's first outstanding sequence " +
                   std::to_string(s.first_outstanding) + ": its result is no longer kept";
    return;
  }
  auto saved = s.results.find(command.sequence());
  if (saved != s.results.end()) {
    result = saved->second;
    result.duplicate = true;
    return;
  }
  ApplyToMap(command, &result);
  s.results.emplace(command.sequence(), result);
  if (s.results.size() > kMaxSavedResultsPerSession) {
    // Forget the oldest; its sequence becomes stale rather than re-appliable.
    s.first_outstanding = s.results.begin()->first + 1;
    s.results.erase(s.results.begin());
  }
}

void KvStateMachine::ApplyToMap(Command& command, ApplyResult* result) {
  if (command.op() == Command::PUT) {
    data_.insert_or_assign(std::move(*command.mutable_key()), std::move(*command.mutable_value()));
  } else if (command.op() == Command::DELETE) {
    result->existed = data_.erase(command.key());
  } else if (command.op() == Command::BATCH) {
    result->batch_existed.reserve(static_cast<size_t>(command.ops_size()));
    for (Command& op : *command.mutable_ops()) {
      if (op.op() == Command::PUT) {
        result->batch_existed.push_back(
            !data_.insert_or_assign(std::move(*op.mutable_key()), std::move(*op.mutable_value())));
      } else {
        result->batch_existed.push_back(data_.erase(op.key()));
      }
    }
  } else {  // CAS
    const std::string* current = data_.find(command.key());
    result->found = current != nullptr;
    if (result->found) result->current = *current;
    result->swapped = command.has_expected() ? result->found && *current == command.expected()
                                             : !result->found;
    if (result->swapped) {
      data_.insert_or_assign(std::move(*command.mutable_key()), std::move(*command.mutable_value()));
    }
  }
}

void KvStateMachine::Touch(uint64_t id, Session* session, uint64_t now_ms) {
  expiry_.erase({session->expires_at_ms, id});
  // Saturating: a huge timeout means "never".
  const uint64_t t = session->timeout_ms;
  session->expires_at_ms = now_ms > UINT64_MAX - t ? UINT64_MAX : now_ms + t;
  expiry_.emplace(session->expires_at_ms, id);
}

void KvStateMachine::ExpireSessions(uint64_t now_ms) {
  while (!expiry_.empty() && expiry_.begin()->first < now_ms) {
    const uint64_t id = expiry_.begin()->second;
    expiry_.erase(expiry_.begin());
    sessions_.erase(id);
  }
}

void KvStateMachine::Snapshot(SnapshotWriter* out) const {
  // The image: the map's root is shared (O(1)); the sessions are copied.
  // Apply waits only for this; it goes on while the image is encoded.
  CowBTree<std::string, std::string> data;
  std::map<uint64_t, Session> sessions;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    out->meta().last_index = applied_index_;
    out->meta().last_term = applied_term_;
    out->meta().cluster_time_ms = cluster_time_ms_;
    data = data_;
    sessions = sessions_;
  }
  SnapshotSession session;
  SnapshotSessionResult saved;
  std::string buf;
  for (const auto& [id, s] : sessions) {
    session.set_client_id(id);
    session.set_timeout_ms(s.timeout_ms);
    session.set_expires_at_ms(s.expires_at_ms);
    session.set_first_outstanding(s.first_outstanding);
    session.set_result_count(s.results.size());
    session.SerializeToString(&buf);
    out->AddRecord(SnapshotRecordType::kSession, buf);
    for (const auto& [sequence, r] : s.results) {
      saved.Clear();
      saved.set_client_id(id);
      saved.set_sequence(sequence);
      saved.set_ok(r.ok);
      saved.set_existed(r.existed);
      saved.set_swapped(r.swapped);
      saved.set_found(r.found);
      saved.set_current(r.current);
      saved.set_error(r.error);
      saved.set_session_error(static_cast<uint32_t>(r.session_error));
      saved.set_duplicate(r.duplicate);
      saved.set_index(r.index);
      saved.set_term(r.term);
      saved.set_result_client_id(r.client_id);
      for (bool e : r.batch_existed) saved.add_batch_existed(e);
      saved.SerializeToString(&buf);
      out->AddRecord(SnapshotRecordType::kSessionResult, buf);
    }
  }
  for (auto it = data.begin(); it.Valid(); it.Next()) out->AddKv(it.key(), it.value());
}

Status KvStateMachine::Restore(SnapshotReader* in) {
  // Built aside; swapped in only once the reader has verified the file.
  CowBTree<std::string, std::string> data;
  std::map<uint64_t, Session> sessions;
  std::set<std::pair<uint64_t, uint64_t>> expiry;

  uint64_t record = 0;
  auto bad = [&](const std::string& what) {
    return Status::Corruption(in->path() + ": record " + std::to_string(record) + ": " + what);
  };
  SnapshotSession session_msg;
  SnapshotSessionResult result_msg;
  SnapshotKv kv_msg;
  Session* session = nullptr;   // the session whose results are being read
  uint64_t session_id = 0;
  uint64_t results_left = 0;
  bool in_data = false;         // a KV record was seen: no more sessions
  std::string last_key;         // of the previous KV record
  for (;; ++record) {
    SnapshotRecordType type;
    std::string_view msg;
    bool done = false;
    Status s = in->Next(&type, &msg, &done);
    if (!s.ok()) return s;
    if (done) break;
    const int size = static_cast<int>(msg.size());
    if (type != SnapshotRecordType::kSessionResult && results_left > 0) {
      return bad("session " + std::to_string(session_id) + " is missing " +
                 std::to_string(results_left) + " saved results");
    }
    switch (type) {
      case SnapshotRecordType::kSession: {
        if (in_data) return bad("session record after the key/value records");
        if (!session_msg.ParseFromArray(msg.data(), size)) return bad("bad SnapshotSession");
        const uint64_t id = session_msg.client_id();
        if (id == 0 || (!sessions.empty() && id <= sessions.rbegin()->first)) {
          return bad("session id " + std::to_string(id) + " out of order");
        }
        session = &sessions.emplace_hint(sessions.end(), id, Session())->second;
        session_id = id;
        session->timeout_ms = session_msg.timeout_ms();
        session->expires_at_ms = session_msg.expires_at_ms();
        session->first_outstanding = session_msg.first_outstanding();
        expiry.emplace(session->expires_at_ms, id);
        results_left = session_msg.result_count();
        break;
      }
      case SnapshotRecordType::kSessionResult: {
        if (results_left == 0) return bad("saved result without a session expecting it");
        if (!result_msg.ParseFromArray(msg.data(), size)) return bad("bad SnapshotSessionResult");
        if (result_msg.client_id() != session_id) {
          return bad("saved result of session " + std::to_string(result_msg.client_id()) +
                     " inside session " + std::to_string(session_id));
        }
        const uint64_t sequence = result_msg.sequence();
        if (!session->results.empty() && sequence <= session->results.rbegin()->first) {
          return bad("saved result sequence " + std::to_string(sequence) + " out of order");
        }
        if (result_msg.session_error() > kMaxSessionError) {
          return bad("unknown session error " + std::to_string(result_msg.session_error()));
        }
        ApplyResult r;
        r.ok = result_msg.ok();
        r.existed = result_msg.existed();
        r.swapped = result_msg.swapped();
        r.found = result_msg.found();
        r.current = std::move(*result_msg.mutable_current());
        r.error = std::move(*result_msg.mutable_error());
        r.session_error = static_cast<ApplyResult::SessionError>(result_msg.session_error());
        r.duplicate = result_msg.duplicate();
        r.index = result_msg.index();
        r.term = result_msg.term();
        r.client_id = result_msg.result_client_id();
        r.batch_existed.assign(result_msg.batch_existed().begin(), result_msg.batch_existed().end());
        session->results.emplace_hint(session->results.end(), sequence, std::move(r));
        --results_left;
        break;
      }
      case SnapshotRecordType::kKv: {
        if (!kv_msg.ParseFromArray(msg.data(), size)) return bad("bad SnapshotKv");
        if (!last_key.empty() && !(last_key < kv_msg.key())) return bad("key out of order");
        last_key = kv_msg.key();
        if (!data.insert_or_assign(std::move(*kv_msg.mutable_key()),
                                   std::move(*kv_msg.mutable_value()))) {
          return bad("key out of order");  // a repeated key (possible only for "")
        }
        in_data = true;
        break;
      }
    }
  }
  if (results_left > 0) {
    return bad("session " + std::to_string(session_id) + " is missing " +
               std::to_string(results_left) + " saved results");
  }

  const SnapshotMeta& meta = in->meta();
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    data_.swap(data);
    sessions_.swap(sessions);
    expiry_.swap(expiry);
    applied_index_ = meta.last_index;
    applied_term_ = meta.last_term;
    cluster_time_ms_ = meta.cluster_time_ms;
  }
  // The old state is freed here, outside the lock.
  return Status::OK();
}

std::optional<std::string> KvStateMachine::Get(const std::string& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  const std::string* value = data_.find(key);
  if (value == nullptr) return std::nullopt;
  return *value;
}

uint64_t KvStateMachine::AppliedTerm() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return applied_term_;
}

uint64_t KvStateMachine::AppliedIndex() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return applied_index_;
}

size_t KvStateMachine::Size() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return data_.size();
}

size_t KvStateMachine::SessionCount() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace raftkv
