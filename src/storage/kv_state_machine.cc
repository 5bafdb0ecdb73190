#include "storage/kv_state_machine.h"

#include <algorithm>
#include <mutex>

#include <glog/logging.h>

namespace raftkv {

namespace {

bool IsDataOp(Command::Op op) {
  return op == Command::PUT || op == Command::DELETE || op == Command::CAS;
}

}  // namespace

ApplyResult KvStateMachine::Apply(const Entry& entry) {
  ApplyResult result;
  result.index = entry.index();
  result.term = entry.term();
  // Decode outside the lock: readers are only blocked for the map update.
  Command command;
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
    } else {
      have_command = true;
    }
  } else if (entry.type() != ENTRY_NOOP) {
    // An entry type added by a newer version: every replica skips it alike.
    result.ok = false;
    result.error = "unknown entry type " + std::to_string(entry.type()) + " at index " +
                   std::to_string(entry.index());
  }

  std::unique_lock<std::shared_mutex> lock(mu_);
  CHECK_EQ(entry.index(), applied_index_ + 1) << "entries must be applied in index order";
  applied_index_ = entry.index();
  // Cluster time never goes back along the committed log; max() keeps it so
  // even for a log written before entries carried a time.
  cluster_time_ms_ = std::max(cluster_time_ms_, entry.cluster_time_ms());
  ExpireSessions(cluster_time_ms_);
  if (!have_command) return result;

  if (command.op() == Command::OPEN_SESSION) {
    const uint64_t id = entry.index();
    Session& s = sessions_[id];
    s.timeout_ms = command.session_timeout_ms();
    Touch(id, &s, cluster_time_ms_);
    result.client_id = id;
    return result;
  }
  if (command.op() == Command::CLOSE_SESSION) {
    auto it = sessions_.find(command.client_id());
    if (it != sessions_.end()) {
      expiry_.erase({it->second.expires_at_ms, it->first});
      sessions_.erase(it);
    }
    return result;
  }
  if (command.client_id() == 0) {  // no session: at-least-once
    ApplyToMap(command, &result);
    return result;
  }

  auto it = sessions_.find(command.client_id());
  if (it == sessions_.end()) {
    result.session_error = ApplyResult::SessionError::kSessionExpired;
    result.error = "session " + std::to_string(command.client_id()) +
                   " is unknown or expired; open a new session";
    return result;
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
    return result;
  }
  auto saved = s.results.find(command.sequence());
  if (saved != s.results.end()) {
    ApplyResult dup = saved->second;
    dup.duplicate = true;
    return dup;
  }
  ApplyToMap(command, &result);
  s.results.emplace(command.sequence(), result);
  if (s.results.size() > kMaxSavedResultsPerSession) {
    // Forget the oldest; its sequence becomes stale rather than re-appliable.
    s.first_outstanding = s.results.begin()->first + 1;
    s.results.erase(s.results.begin());
  }
  return result;
}

void KvStateMachine::ApplyToMap(const Command& command, ApplyResult* result) {
  if (command.op() == Command::PUT) {
    data_.insert_or_assign(command.key(), command.value());
  } else if (command.op() == Command::DELETE) {
    result->existed = data_.erase(command.key()) > 0;
  } else {  // CAS
    auto it = data_.find(command.key());
    result->found = it != data_.end();
    if (result->found) result->current = it->second;
    result->swapped = command.has_expected() ? result->found && it->second == command.expected()
                                             : !result->found;
    if (result->swapped) {
      if (result->found) {
        it->second = command.value();
      } else {
        data_.emplace(command.key(), command.value());
      }
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

std::optional<std::string> KvStateMachine::Get(const std::string& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second;
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
