#include "kv/session_table.h"

#include <algorithm>
#include <utility>

namespace raftkv {

Status SessionTable::Open(uint64_t index, uint64_t timeout_ms, uint64_t now_ms,
                          uint64_t max_sessions) {
  if (max_sessions > 0 && sessions_.size() >= max_sessions) {
    return Status::ResourceExhausted(std::to_string(sessions_.size()) +
                                     " sessions are open, the cluster's limit (--max_sessions); "
                                     "close one or wait for idle ones to expire");
  }
  Session& s = sessions_[index];
  s.timeout_ms = timeout_ms;
  Touch(index, &s, now_ms);
  return Status::OK();
}

void SessionTable::Close(uint64_t id) {
  auto it = sessions_.find(id);
  if (it != sessions_.end()) Erase(it);
}

void SessionTable::Expire(uint64_t now_ms) {
  while (!expiry_.empty() && expiry_.begin()->first < now_ms) {
    auto it = sessions_.find(expiry_.begin()->second);
    if (it == sessions_.end()) {
      expiry_.erase(expiry_.begin());  // cannot happen; never loop on it
      continue;
    }
    Erase(it);
  }
}

void SessionTable::Erase(std::map<uint64_t, Session>::iterator it) {
  Session& s = it->second;
  if (tracking_) changes_.sessions.insert(it->first);  // and every saved answer with it
  for (const auto& [sequence, r] : s.results) {
    saved_order_.erase({r.index, it->first, sequence});
    saved_bytes_ -= r.SavedBytes();
  }
  expiry_.erase({s.expires_at_ms, it->first});
  sessions_.erase(it);
}

void SessionTable::Touch(uint64_t id, Session* session, uint64_t now_ms) {
  if (tracking_) changes_.sessions.insert(id);
  expiry_.erase({session->expires_at_ms, id});
  // Saturating: a huge timeout means "never".
  const uint64_t t = session->timeout_ms;
  session->expires_at_ms = now_ms > UINT64_MAX - t ? UINT64_MAX : now_ms + t;
  expiry_.emplace(session->expires_at_ms, id);
}

void SessionTable::Forget(uint64_t id, uint64_t sequence, const ApplyResult& r, Session* session) {
  saved_order_.erase({r.index, id, sequence});
  if (tracking_) changes_.results.emplace(id, sequence);
  const size_t bytes = r.SavedBytes();
  saved_bytes_ -= bytes;
  session->saved_bytes -= bytes;
}

void SessionTable::DropBelow(uint64_t id, Session* session, uint64_t below) {
  auto end = session->results.lower_bound(below);
  if (tracking_) changes_.sessions.insert(id);  // its first_outstanding moved
  for (auto it = session->results.begin(); it != end; ++it) Forget(id, it->first, it->second, session);
  session->results.erase(session->results.begin(), end);
}

bool SessionTable::Begin(const Command& command, uint64_t now_ms, ApplyResult* result) {
  auto it = sessions_.find(command.client_id());
  if (it == sessions_.end()) {
    result->session_error = ApplyResult::SessionError::kSessionExpired;
    result->error = "session " + std::to_string(command.client_id()) +
                    " is unknown or expired; open a new session";
    return false;
  }
  Session& s = it->second;
  Touch(it->first, &s, now_ms);
  if (command.first_outstanding() > s.first_outstanding) {
    s.first_outstanding = command.first_outstanding();
    DropBelow(it->first, &s, s.first_outstanding);
  }
  if (command.sequence() < s.first_outstanding) {
    result->session_error = ApplyResult::SessionError::kStaleSequence;
    result->error = "sequence " + std::to_string(command.sequence()) + " of session " +
                    std::to_string(command.client_id()) +
                    " is below the session's first outstanding sequence " +
                    std::to_string(s.first_outstanding) + ": its result is no longer kept";
    return false;
  }
  auto saved = s.results.find(command.sequence());
  if (saved != s.results.end()) {
    *result = saved->second;
    result->duplicate = true;
    return false;
  }
  return true;
}

void SessionTable::Save(const Command& command, const ApplyResult& result) {
  const uint64_t id = command.client_id();
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;  // Begin found it; nothing in between removes it
  Session& s = it->second;
  const uint64_t sequence = command.sequence();
  if (!s.results.emplace(sequence, result).second) return;
  if (tracking_) changes_.results.emplace(id, sequence);
  const size_t bytes = result.SavedBytes();
  s.saved_bytes += bytes;
  saved_bytes_ += bytes;
  saved_order_.emplace(result.index, id, sequence);
  // Within the session: forget the oldest (lowest sequences) first. Its
  // sequence becomes stale rather than re-appliable.
  const uint64_t session_bytes = command.session_saved_bytes();
  while (s.results.size() > 1 &&
         (s.results.size() > kMaxSavedResultsPerSession ||
          (session_bytes > 0 && s.saved_bytes > session_bytes))) {
    s.first_outstanding = std::max(s.first_outstanding, s.results.begin()->first + 1);
    DropBelow(id, &s, s.first_outstanding);
  }
  // Across sessions: the oldest answer of all, by the entry that produced
  // it, and with it every lower sequence of its session. A session's newest
  // answer stays.
  const uint64_t total_bytes = command.saved_bytes_total();
  auto order = saved_order_.begin();
  while (total_bytes > 0 && saved_bytes_ > total_bytes && order != saved_order_.end()) {
    const auto at = *order;
    const uint64_t owner_id = std::get<1>(at);
    const uint64_t owner_sequence = std::get<2>(at);
    Session& owner = sessions_.at(owner_id);
    if (owner.results.rbegin()->first == owner_sequence) {
      ++order;  // the newest of its session: kept
      continue;
    }
    owner.first_outstanding = std::max(owner.first_outstanding, owner_sequence + 1);
    DropBelow(owner_id, &owner, owner.first_outstanding);
    // Everything before `at` is the newest answer of another session.
    order = saved_order_.upper_bound(at);
  }
}

bool SessionTable::AddRestored(uint64_t id, const Session& fields) {
  if (id == 0 || (!sessions_.empty() && id <= sessions_.rbegin()->first)) return false;
  Session& s = sessions_.emplace_hint(sessions_.end(), id, Session())->second;
  s.timeout_ms = fields.timeout_ms;
  s.expires_at_ms = fields.expires_at_ms;
  s.first_outstanding = fields.first_outstanding;
  expiry_.emplace(s.expires_at_ms, id);
  if (tracking_) changes_.sessions.insert(id);
  return true;
}

bool SessionTable::AddRestoredResult(uint64_t id, uint64_t sequence, ApplyResult result) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  Session& s = it->second;
  if (!s.results.empty() && sequence <= s.results.rbegin()->first) return false;
  const size_t bytes = result.SavedBytes();
  saved_order_.emplace(result.index, id, sequence);
  s.results.emplace_hint(s.results.end(), sequence, std::move(result));
  s.saved_bytes += bytes;
  saved_bytes_ += bytes;
  if (tracking_) changes_.results.emplace(id, sequence);
  return true;
}

}  // namespace raftkv
