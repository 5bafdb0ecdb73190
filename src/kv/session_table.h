// The client sessions of the state machine (Raft thesis 6.3; LogCabin):
// what makes a session's writes exactly-once, and the bounds on what it may
// keep.
//
// An OPEN_SESSION entry creates session <its index>. A command carrying
// client_id != 0 is applied at most once per (client_id, sequence): the
// result of the first application is saved and returned for any duplicate.
// first_outstanding lets the session drop the results the client already
// has; a sequence below the highest first_outstanding seen is refused
// (kStaleSequence) because its result is gone and re-applying it could apply
// it twice. A session expires when no command of it was applied for its
// timeout, measured in the leader-stamped Entry.cluster_time_ms, so every
// replica expires it at the same entry.
//
// Bounds (every one decided from the entry alone, so every replica drops the
// same answers at the same entry): at most kMaxSavedResultsPerSession saved
// answers per session; the bytes a session keeps (Command.session_saved_bytes)
// and the bytes all sessions keep (Command.saved_bytes_total), both stamped
// in each command by the leader; the number of sessions
// (Command.max_sessions, stamped in OPEN_SESSION). A dropped answer makes its
// sequence, and every lower one of its session, stale: refused, never
// applied twice. The newest answer of a session is always kept.
//
// Not thread-safe: the state machine guards it with its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "common/status.h"
#include "kv/apply_result.h"

namespace raftkv {

class SessionTable {
 public:
  // Saved answers per session beyond which the oldest is dropped: bounds a
  // client that never advances first_outstanding, whatever the byte bounds.
  static constexpr size_t kMaxSavedResultsPerSession = 100000;

  struct Session {
    uint64_t timeout_ms = 0;
    uint64_t expires_at_ms = 0;      // cluster time
    uint64_t first_outstanding = 0;  // highest seen
    std::map<uint64_t, ApplyResult> results;  // by sequence
    size_t saved_bytes = 0;          // sum of results' SavedBytes()
  };

  // OPEN_SESSION at `index`: ResourceExhausted when `max_sessions` (> 0)
  // are open already.
  Status Open(uint64_t index, uint64_t timeout_ms, uint64_t now_ms, uint64_t max_sessions);
  void Close(uint64_t id);
  // Drops the sessions whose expiry is before `now_ms`.
  void Expire(uint64_t now_ms);

  // The session part of applying `command` (client_id != 0) at `now_ms`:
  // true when the command is to be applied (then Save its result); false
  // when *result already holds the answer (a duplicate, a stale sequence,
  // an unknown or expired session).
  bool Begin(const Command& command, uint64_t now_ms, ApplyResult* result);
  // Saves the result of a command Begin let through, then drops the oldest
  // answers the command's bounds no longer allow.
  void Save(const Command& command, const ApplyResult& result);

  size_t size() const { return sessions_.size(); }
  // Bytes of the saved answers of every session.
  size_t saved_bytes() const { return saved_bytes_; }
  const std::map<uint64_t, Session>& sessions() const { return sessions_; }

  // What changed since the last TakeChanges(), recorded only once
  // TrackChanges() was called (a persistent store writes these rows through;
  // the memory engine pays nothing): the sessions opened, touched or gone,
  // and the saved answers added or dropped. Look each one up to know which.
  struct Changes {
    std::set<uint64_t> sessions;
    std::set<std::pair<uint64_t, uint64_t>> results;  // (session, sequence)
  };
  void TrackChanges() { tracking_ = true; }
  Changes TakeChanges() { return std::exchange(changes_, Changes()); }

  // Restore: adds a session (in increasing id order), then its results (in
  // increasing sequence order). False when out of order.
  bool AddRestored(uint64_t id, const Session& fields);
  bool AddRestoredResult(uint64_t id, uint64_t sequence, ApplyResult result);

 private:
  void Touch(uint64_t id, Session* session, uint64_t now_ms);
  // Drops the results of `session` with a sequence below `below`.
  void DropBelow(uint64_t id, Session* session, uint64_t below);
  void Forget(uint64_t id, uint64_t sequence, const ApplyResult& r, Session* session);
  void Erase(std::map<uint64_t, Session>::iterator it);

  std::map<uint64_t, Session> sessions_;
  std::set<std::pair<uint64_t, uint64_t>> expiry_;  // (expires_at_ms, id)
  // Every saved answer by the index of the entry that produced it (the
  // oldest first): (index, session id, sequence).
  std::set<std::tuple<uint64_t, uint64_t, uint64_t>> saved_order_;
  size_t saved_bytes_ = 0;
  bool tracking_ = false;
  Changes changes_;
};

}  // namespace raftkv
