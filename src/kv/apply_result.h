// What applying one committed entry to the key-value state machine answers
// (kv/kv_state_machine.h), and what a session saves of it to answer a
// duplicate (kv/session_table.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/internal.h"

namespace raftkv {

struct ApplyResult {
  enum class SessionError { kNone, kSessionExpired, kStaleSequence };

  bool ok = true;            // false if the entry's command could not be decoded
  bool existed = false;      // DELETE: whether the key was present
  bool swapped = false;      // CAS: whether the new value was written
  // BATCH: per op, in order, whether the key was present just before it.
  std::vector<bool> batch_existed;
  // CAS: the key's state just before the operation (found: present; current:
  // its value then, empty when absent).
  bool found = false;
  std::string current;
  std::string error;         // set when !ok or session_error != kNone
  // Sessions. index, term: the log entry in which the command took effect
  // (for a duplicate: the first application's). client_id: OPEN_SESSION's new id.
  SessionError session_error = SessionError::kNone;
  bool duplicate = false;
  uint64_t index = 0;
  uint64_t term = 0;
  uint64_t client_id = 0;
  // The rest: the store's revision after the entry, previous key-values,
  // DeleteRange's count, a transaction's answer, a granted lease, and a
  // refusal (reject_code != 0: a Status::Code; nothing was changed).
  SavedAnswer answer;

  bool rejected() const { return answer.reject_code() != 0; }
  Status Rejection() const;
  // What keeping this result costs a session, in bytes: its variable parts
  // plus a fixed charge for the record itself (the same on every replica:
  // it decides which saved answers are dropped).
  size_t SavedBytes() const;
};

}  // namespace raftkv
