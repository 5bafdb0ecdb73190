// PendingCalls: the calls a member has accepted and not answered yet, and
// what decides their answer.
//
//  - writes (proposals and membership changes), by the log index of their
//    entry: answered when that entry is applied (or another leader's entry
//    took the index: not applied), or at their deadline (outcome unknown);
//  - linearizable reads: waiting for a quorum to confirm the leader
//    (ReadIndex), then for the apply index to reach the confirmed index;
//  - leadership transfers: waiting for the target to lead a newer term;
//  - peer requests: waiting until the state their reply reflects is durable.
//
// The table decides answers; it never runs them. Every decision appends a
// closure to a Completions list that the caller runs later, without any
// lock held, on the apply thread (client calls are never completed on the
// thread that fsyncs). Not thread-safe: the node guards it with its mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>


#include "raft/raft.h"
#include "kv/kv_state_machine.h"

namespace raftkv {

using Clock = std::chrono::steady_clock;
// Closures that complete calls, collected under a lock and run after it.
using Completions = std::vector<std::function<void()>>;
void RunAll(Completions* completions);

// The result of a client call handled by the node.
struct Outcome {
  Status status;
  uint64_t index = 0;  // write: log index applied; read: index the read waited for
  uint64_t term = 0;
  ApplyResult apply;
  // For a failed write: true when the command is known not to have been
  // applied (never proposed, or its index went to another leader's entry), so
  // retrying it cannot apply it twice. False when the outcome is unknown.
  bool not_applied = false;
  // ABORTED because the write's session is unknown or expired.
  bool session_expired = false;
  // For FAILED_PRECONDITION (not leader): the leader, when known.
  uint64_t leader_id = 0;
  std::string leader_address;
};
using OutcomeCallback = std::function<void(Outcome)>;
Outcome Failure(Status::Code code, const std::string& message,
                Status::Reason reason = Status::Reason::kNone);

class PendingCalls {
 public:
  using ReplyCallback = std::function<void(const raft::Message*)>;
  // The address of a member (for the leader fields of an outcome).
  using AddressOf = std::function<std::string(uint64_t id)>;

  // ---- writes ----
  void AddWrite(uint64_t index, uint64_t term, Clock::time_point deadline, OutcomeCallback done);
  // `entries` (consecutive) were applied with `results`: answers the writes
  // waiting for them.
  void WritesApplied(const std::deque<Entry>& entries, const std::vector<ApplyResult>& results,
                     Completions* out);
  // A snapshot replaced the state up to `index`: writes waiting at or below
  // it can no longer be matched with their entries (outcome unknown).
  void FailWritesUpTo(uint64_t index, Completions* out);

  // ---- linearizable reads ----
  uint64_t NextReadId() { return next_read_id_++; }
  void AddRead(uint64_t id, Clock::time_point deadline, OutcomeCallback done);
  // The core's answers: confirmed at `index`, or failed (leadership lost).
  void ReadConfirmed(uint64_t id, uint64_t index);
  void ReadFailed(uint64_t id, Completions* out);
  // Answers the confirmed reads whose index is applied.
  void ReleaseReads(uint64_t applied_index, Completions* out);

  // ---- leadership transfers ----
  void AddTransfer(uint64_t target, uint64_t term, Clock::time_point deadline, OutcomeCallback done);
  // Answers the transfers that succeeded, were given up or expired, as seen
  // from `core` (member `self`).
  void CheckTransfers(const raft::Raft& core, uint64_t self, const AddressOf& address_of,
                      Clock::time_point now, Completions* out);

  // ---- peer requests ----
  // Registers the reply of a request and returns the rpc id to step it with.
  uint64_t AddReply(ReplyCallback reply);
  // The reply registered for `rpc_id` (empty if none), removed.
  ReplyCallback TakeReply(uint64_t rpc_id);

  // Fails the writes and reads whose deadline passed.
  void ExpireDeadlines(Clock::time_point now, Completions* out);
  // Shutdown: fails every waiting call (UNAVAILABLE) and hands back the
  // peer replies (to be answered with nullptr).
  void FailAll(Completions* out, std::vector<ReplyCallback>* replies);

 private:
  struct Write {
    uint64_t term;
    Clock::time_point deadline;
    OutcomeCallback done;
  };
  struct Read {
    Clock::time_point deadline;
    OutcomeCallback done;
    uint64_t index = 0;  // set once confirmed by a quorum; 0 while waiting
  };
  struct Transfer {
    uint64_t target;
    uint64_t term;  // the leader's term when it started
    Clock::time_point deadline;
    OutcomeCallback done;
  };
  static void Answer(OutcomeCallback done, Outcome out, Completions* completions);

  std::map<uint64_t, Write> writes_;  // by log index
  std::map<uint64_t, Read> reads_;    // by read id
  // Confirmed reads waiting for the apply index: read index -> read id.
  std::multimap<uint64_t, uint64_t> confirmed_reads_;
  uint64_t next_read_id_ = 1;
  std::vector<Transfer> transfers_;
  std::unordered_map<uint64_t, ReplyCallback> replies_;  // by rpc id
  uint64_t next_rpc_id_ = 1;
};

}  // namespace raftkv
