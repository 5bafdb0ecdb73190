#include "node/pending_calls.h"


#include <utility>

namespace raftkv {

void RunAll(Completions* completions) {
  for (auto& fn : *completions) fn();
  completions->clear();
}

Outcome Failure(Status::Code code, const std::string& message, Status::Reason reason) {
  Outcome out;
  out.status = Status(code, message, reason);
  return out;
}

void PendingCalls::Answer(OutcomeCallback done, Outcome out, Completions* completions) {
  completions->push_back([done = std::move(done), out = std::move(out)]() mutable {
    done(std::move(out));
  });
}

void PendingCalls::AddWrite(uint64_t index, uint64_t term, Clock::time_point deadline,
                            OutcomeCallback done) {
  writes_.emplace(index, Write{term, deadline, std::move(done)});
}

void PendingCalls::WritesApplied(const std::deque<Entry>& entries,
                                 const std::vector<ApplyResult>& results, Completions* out) {
  if (entries.empty()) return;
  const uint64_t first = entries.front().index();
  const uint64_t last = entries.back().index();
  auto it = writes_.lower_bound(first);
  while (it != writes_.end() && it->first <= last) {
    const Entry& e = entries[it->first - first];
    Outcome o;
    if (e.term() != it->second.term) {
      // Another leader's entry took this index: the proposal was never committed.
      o.status = Status(Status::Code::kUnavailable,
                        "leadership changed before the write committed; it was not applied, retry",
                        Status::Reason::kLeaderChanged);
      o.not_applied = true;
    } else if (e.type() == ENTRY_CONFIG) {
      // A membership change: committed (the state machine skips it).
      o.index = e.index();
      o.term = e.term();
    } else {
      o.apply = results[it->first - first];
      // A duplicate answers with where the first application happened.
      o.index = o.apply.index;
      o.term = o.apply.term;
      if (!o.apply.ok) {
        o.status = Status(Status::Code::kInternal, o.apply.error);
      } else if (o.apply.session_error == ApplyResult::SessionError::kSessionExpired) {
        o.status = Status(Status::Code::kAborted, o.apply.error);
        o.session_expired = true;
      } else if (o.apply.session_error == ApplyResult::SessionError::kStaleSequence) {
        o.status = Status(Status::Code::kInvalidArgument, o.apply.error);
      } else if (o.apply.rejected()) {  // e.g. a put on a lease that does not exist
        o.status = o.apply.Rejection();
      }
    }
    Answer(std::move(it->second.done), std::move(o), out);
    it = writes_.erase(it);
  }
}

void PendingCalls::FailWritesUpTo(uint64_t index, Completions* out) {
  for (auto it = writes_.begin(); it != writes_.end() && it->first <= index;) {
    Answer(std::move(it->second.done),
           Failure(Status::Code::kUnavailable,
                   "this member installed a snapshot from the leader before the write's entry "
                   "was applied here; its outcome is unknown"),
           out);
    it = writes_.erase(it);
  }
}

void PendingCalls::AddRead(uint64_t id, Clock::time_point deadline, OutcomeCallback done) {
  reads_.emplace(id, Read{deadline, std::move(done), 0});
}

void PendingCalls::ReadConfirmed(uint64_t id, uint64_t index) {
  auto it = reads_.find(id);
  if (it == reads_.end()) return;  // expired meanwhile
  it->second.index = index;
  confirmed_reads_.emplace(index, id);
}

void PendingCalls::ReadFailed(uint64_t id, Completions* out) {
  auto it = reads_.find(id);
  if (it == reads_.end()) return;
  Answer(std::move(it->second.done),
         Failure(Status::Code::kUnavailable, "leadership was lost before the read was confirmed; retry",
                 Status::Reason::kLeaderChanged),
         out);
  reads_.erase(it);
}

void PendingCalls::ReleaseReads(uint64_t applied_index, Completions* out) {
  auto it = confirmed_reads_.begin();
  while (it != confirmed_reads_.end() && it->first <= applied_index) {
    auto read = reads_.find(it->second);
    if (read != reads_.end()) {
      Outcome o;
      o.index = it->first;
      Answer(std::move(read->second.done), std::move(o), out);
      reads_.erase(read);
    }
    it = confirmed_reads_.erase(it);
  }
}

void PendingCalls::AddTransfer(uint64_t target, uint64_t term, Clock::time_point deadline,
                               OutcomeCallback done) {
  transfers_.push_back(Transfer{target, term, deadline, std::move(done)});
}

void PendingCalls::CheckTransfers(const raft::Raft& core, uint64_t self, const AddressOf& address_of,
                                  Clock::time_point now, Completions* out) {
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    Outcome o;
    bool finished = true;
    const uint64_t leader = core.leader_id();
    if (leader == it->target && core.term() > it->term) {
      o.leader_id = leader;
      o.leader_address = address_of(leader);
      o.term = core.term();
    } else if (core.role() == raft::Role::kLeader && core.term() == it->term &&
               core.transfer_target() != it->target) {
      o = Failure(Status::Code::kFailedPrecondition,
                  "leadership transfer to member " + std::to_string(it->target) +
                      " was given up (it did not catch up and win an election within an "
                      "election timeout); member " +
                      std::to_string(self) + " still leads");
    } else if (core.term() > it->term && leader != 0 && leader != it->target) {
      o = Failure(Status::Code::kFailedPrecondition,
                  "member " + std::to_string(leader) + " became leader in term " +
                      std::to_string(core.term()) + " instead of member " +
                      std::to_string(it->target));
      o.leader_id = leader;
      o.leader_address = address_of(leader);
    } else if (it->deadline <= now) {
      o = Failure(Status::Code::kDeadlineExceeded,
                  "member " + std::to_string(it->target) +
                      " did not become leader before the deadline");
    } else {
      finished = false;
    }
    if (!finished) {
      ++it;
      continue;
    }
    Answer(std::move(it->done), std::move(o), out);
    it = transfers_.erase(it);
  }
}

uint64_t PendingCalls::AddReply(ReplyCallback reply) {
  const uint64_t id = next_rpc_id_++;
  replies_.emplace(id, std::move(reply));
  return id;
}

PendingCalls::ReplyCallback PendingCalls::TakeReply(uint64_t rpc_id) {
  auto it = replies_.find(rpc_id);
  if (it == replies_.end()) return nullptr;
  ReplyCallback reply = std::move(it->second);
  replies_.erase(it);
  return reply;
}

void PendingCalls::ExpireDeadlines(Clock::time_point now, Completions* out) {
  for (auto it = writes_.begin(); it != writes_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    Answer(std::move(it->second.done),
           Failure(Status::Code::kDeadlineExceeded,
                   "write not committed before the deadline; its outcome is unknown",
                   Status::Reason::kTimeout),
           out);
    it = writes_.erase(it);
  }
  for (auto it = reads_.begin(); it != reads_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    Answer(std::move(it->second.done),
           Failure(Status::Code::kDeadlineExceeded,
                   "read not confirmed by a quorum before the deadline", Status::Reason::kTimeout),
           out);
    it = reads_.erase(it);
  }
}

void PendingCalls::FailAll(Completions* out, std::vector<ReplyCallback>* replies) {
  for (auto& [index, w] : writes_) {
    Answer(std::move(w.done),
           Failure(Status::Code::kUnavailable, "server is shutting down; outcome unknown",
                   Status::Reason::kStopped),
           out);
  }
  writes_.clear();
  for (auto& [id, r] : reads_) {
    Answer(std::move(r.done),
           Failure(Status::Code::kUnavailable, "server is shutting down", Status::Reason::kStopped), out);
  }
  reads_.clear();
  confirmed_reads_.clear();
  for (auto& t : transfers_) {
    Answer(std::move(t.done),
           Failure(Status::Code::kUnavailable,
                   "server is shutting down; the leadership transfer's outcome is unknown"),
           out);
  }
  transfers_.clear();
  for (auto& [id, reply] : replies_) replies->push_back(std::move(reply));
  replies_.clear();
}

}  // namespace raftkv
