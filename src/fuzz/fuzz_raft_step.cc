// Fuzz target: the Raft consensus core (member 1 of {1, 2, 3}, or a single
// voter) driven by peer messages built from the input, interleaved with
// Tick / Propose / ReadIndex / GetReady / Advance and crash-restarts.
//
// Peer messages reach the core the way the service delivers them: requests
// are converted with raft::AppendRequestMessage / VoteRequestMessage and
// refused unless they name this member and come from another member (the
// CheckPeer of grpc_server.cc); replies are converted with
// AppendResponseMessage / VoteResponseMessage as peer_client.cc does, from
// the member called; every message must pass raft::CheckPeerMessage, as in
// the service. Field values are arbitrary: near the core's own term and log
// (so the interesting paths are reached) or anywhere in the uint64 range.
//
// The harness plays the node: it persists each Ready's hard state and
// entries in a MemoryLogStore (whose Append refuses gaps), applies committed
// entries to a KvStateMachine (which CHECKs index order) and, on kOpRestart,
// builds a new core from what was persisted (the constructor CHECKs the
// recovered log and term). Checked invariants, besides CHECKs and sanitizers:
//  * every request stepped gets exactly one reply carrying its rpc_id;
//  * the term never decreases, commit <= last index, the log is contiguous
//    with non-decreasing terms no higher than the current term;
//  * a committed entry is durable and never changes while the core runs.
// Input format: fuzz_raft_step.h.
#include "fuzz/fuzz_raft_step.h"

#include <cinttypes>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "raft/raft.h"
#include "storage/kv_state_machine.h"
#include "storage/log_store.h"

namespace raftkv::fuzz {
namespace {

using raft::Message;
using raft::MessageType;

constexpr uint64_t kSelf = 1;

uint64_t PickTerm(Reader& in, uint64_t current) {
  switch (in.U8() % 10) {
    case 0: return current > 0 ? current - 1 : 0;
    case 1: case 2: case 3: return current;
    case 4: case 5: return current + 1;
    case 6: return current + 1 + in.U8() % 4;
    case 7: return in.U64();
    case 8: return raft::kMaxTerm - in.U8() % 2;
    default: return in.U8();
  }
}

uint64_t PickIndex(Reader& in, uint64_t last) {
  switch (in.U8() % 8) {
    case 0: return last;
    case 1: return last > 0 ? last - 1 : 0;
    case 2: return last + 1;
    case 3: return 0;
    case 4: return in.U64();
    case 5: return last > 1 ? last - 2 : last;
    default: return in.U8() % 16;
  }
}

class Harness {
 public:
  explicit Harness(Reader& in) : in_(in) {
    const uint8_t flags = in.U8();
    const uint8_t limits = in.U8();
    config_.id = kSelf;
    config_.voters = (flags & kSingleVoter) ? std::vector<uint64_t>{1}
                                            : std::vector<uint64_t>{1, 2, 3};
    config_.election_ticks = 3;
    config_.heartbeat_ticks = 1;
    config_.pre_vote = !(flags & kNoPreVote);
    config_.check_quorum = !(flags & kNoCheckQuorum);
    config_.max_inflight_appends = 1 + limits % 4;
    config_.max_append_entries = 1 + (limits >> 2) % 4;
    config_.max_append_bytes = 64 + 64 * ((limits >> 4) % 4);
    config_.seed = limits;
    // A recovered log of up to 3 entries with terms 1, 1, 2.
    const int entries = (flags >> 3) & 3;
    std::vector<Entry> log;
    for (int i = 0; i < entries; ++i) {
      Entry e;
      e.set_index(static_cast<uint64_t>(i) + 1);
      e.set_term(i < 2 ? 1 : 2);
      e.set_type(i == 0 ? ENTRY_NOOP : ENTRY_COMMAND);
      log.push_back(e);
    }
    Status s = store_.Append(log);
    FUZZ_ASSERT(s.ok(), "%s", s.ToString().c_str());
    hard_state_.term = (log.empty() ? 0 : log.back().term()) + ((flags >> 5) & 3);
    Start();
  }

  void Run() {
    while (!in_.empty()) {
      Do(static_cast<RaftOp>(in_.U8() % kOpCount));
      CheckInvariants();
    }
    Do(kOpReady);
  }

 private:
  void Start() {
    raft_ = std::make_unique<raft::Raft>(config_, hard_state_, store_.entries());
    sm_ = std::make_unique<KvStateMachine>();
    applied_.clear();
    outbox_.clear();
    unanswered_.clear();
    last_term_ = raft_->term();
  }

  // Members 2 and 3 (not members when there is a single voter: refused).
  static uint64_t Peer(uint8_t b) { return 2 + b % 2; }

  // The service's CheckPeer for requests.
  bool FromAPeer(const Message& m) const {
    if (m.to != kSelf || m.from == kSelf) return false;
    for (uint64_t v : config_.voters) {
      if (v == m.from) return true;
    }
    return false;
  }

  void StepRequest(Message m) {
    if (!FromAPeer(m) || !raft::CheckPeerMessage(m).empty()) return;
    m.rpc_id = next_rpc_id_++;
    unanswered_.insert(m.rpc_id);
    raft_->Step(m);
  }

  void StepResponse(const Message& m) {
    for (uint64_t v : config_.voters) {
      if (v == m.from && v != kSelf) {
        if (raft::CheckPeerMessage(m).empty()) raft_->Step(m);
        return;
      }
    }
  }

  void Do(RaftOp op) {
    switch (op) {
      case kOpTick: {
        const int n = 1 + in_.U8() % 8;
        for (int i = 0; i < n; ++i) raft_->Tick();
        break;
      }
      case kOpPropose: {
        const raft::ProposeResult r = raft_->Propose(in_.Chunk());
        FUZZ_ASSERT(r.accepted == (raft_->role() == raft::Role::kLeader), "propose accepted=%d",
                    r.accepted);
        if (r.accepted) {
          FUZZ_ASSERT(r.index == raft_->last_index() && r.term == raft_->term(),
                      "proposal at %" PRIu64 "/%" PRIu64, r.index, r.term);
        }
        break;
      }
      case kOpReadIndex:
        raft_->ReadIndex(in_.U8());
        break;
      case kOpUnreachable:
        raft_->ReportUnreachable(in_.U8() % 4);
        break;
      case kOpReady:
        Ready();
        break;
      case kOpAppend: {
        AppendEntriesRequest req;
        const uint64_t from = Peer(in_.U8());
        req.set_term(PickTerm(in_, raft_->term()));
        req.set_leader_id(from);
        req.set_to(in_.U8() % 8 == 0 ? 3 : kSelf);
        req.set_prev_log_index(PickIndex(in_, raft_->last_index()));
        req.set_prev_log_term(in_.Bool() ? raft_->TermAt(req.prev_log_index())
                                         : PickTerm(in_, raft_->term()));
        const int n = in_.U8() % 5;
        uint64_t term = req.prev_log_term();
        for (int i = 0; i < n; ++i) {
          Entry* e = req.add_entries();
          const uint8_t how = in_.U8();
          e->set_index(how % 8 == 0 ? PickIndex(in_, raft_->last_index())
                                    : req.prev_log_index() + 1 + static_cast<uint64_t>(i));
          if (how & 8) term = std::max(term, std::min<uint64_t>(req.term(), term + 1));
          e->set_term(how % 16 == 15 ? PickTerm(in_, raft_->term()) : std::max<uint64_t>(term, 1));
          e->set_type((how & 16) ? ENTRY_NOOP : ENTRY_COMMAND);
          if (!(how & 16)) e->set_data(in_.Chunk());
        }
        req.set_leader_commit(PickIndex(in_, raft_->last_index() + static_cast<uint64_t>(n)));
        req.set_read_round(in_.U8() % 4);
        StepRequest(raft::AppendRequestMessage(&req));
        break;
      }
      case kOpAppendResp: {
        AppendEntriesResponse resp;
        const uint64_t from = Peer(in_.U8());
        resp.set_term(PickTerm(in_, raft_->term()));
        resp.set_from(from);
        resp.set_success(in_.Bool());
        resp.set_match_index(PickIndex(in_, raft_->last_index()));
        resp.set_rejected_index(PickIndex(in_, raft_->last_index()));
        const uint64_t conflict_term = PickTerm(in_, raft_->term());
        resp.set_conflict_term(in_.Bool() ? 0 : conflict_term);
        resp.set_conflict_index(PickIndex(in_, raft_->last_index()));
        resp.set_last_log_index(PickIndex(in_, raft_->last_index()));
        resp.set_read_round(in_.U8() % 8);
        StepResponse(raft::AppendResponseMessage(from, kSelf, &resp));
        break;
      }
      case kOpVote: {
        RequestVoteRequest req;
        req.set_candidate_id(Peer(in_.U8()));
        req.set_to(kSelf);
        req.set_term(PickTerm(in_, raft_->term()));
        req.set_last_log_index(PickIndex(in_, raft_->last_index()));
        req.set_last_log_term(PickTerm(in_, raft_->last_term()));
        req.set_pre_vote(in_.Bool());
        StepRequest(raft::VoteRequestMessage(&req));
        break;
      }
      case kOpVoteResp: {
        RequestVoteResponse resp;
        const uint64_t from = Peer(in_.U8());
        resp.set_term(PickTerm(in_, raft_->term()));
        resp.set_from(from);
        resp.set_granted(in_.Bool());
        resp.set_pre_vote(in_.Bool());
        StepResponse(raft::VoteResponseMessage(from, kSelf, &resp));
        break;
      }
      case kOpReply:
        Reply();
        break;
      case kOpRawProto: {
        const uint8_t kind = in_.U8();
        const uint64_t peer = Peer(in_.U8());
        const std::string bytes = in_.Chunk();
        switch (kind % 4) {
          case 0: {
            AppendEntriesRequest req;
            if (!req.ParseFromString(bytes)) break;
            if (kind & 4) {  // make it pass the sender/recipient check
              req.set_leader_id(peer);
              req.set_to(kSelf);
            }
            StepRequest(raft::AppendRequestMessage(&req));
            break;
          }
          case 1: {
            RequestVoteRequest req;
            if (!req.ParseFromString(bytes)) break;
            if (kind & 4) {
              req.set_candidate_id(peer);
              req.set_to(kSelf);
            }
            StepRequest(raft::VoteRequestMessage(&req));
            break;
          }
          case 2: {
            AppendEntriesResponse resp;
            if (resp.ParseFromString(bytes)) {
              StepResponse(raft::AppendResponseMessage(peer, kSelf, &resp));
            }
            break;
          }
          case 3: {
            RequestVoteResponse resp;
            if (resp.ParseFromString(bytes)) {
              StepResponse(raft::VoteResponseMessage(peer, kSelf, &resp));
            }
            break;
          }
        }
        break;
      }
      case kOpRestart:
        // Whatever was not handed to storage is lost; the core recovers from
        // the persisted hard state and log (its constructor CHECKs them).
        Start();
        break;
      case kOpCount:
        break;
    }
  }

  // A peer answers one of the requests the core sent, as a correct member
  // would (accepting, or rejecting with consistent hints).
  void Reply() {
    if (outbox_.empty()) return;
    const size_t which = in_.U8() % outbox_.size();
    const uint8_t how = in_.U8();
    Message req = outbox_[which];
    outbox_.erase(outbox_.begin() + static_cast<std::ptrdiff_t>(which));
    if (req.type == MessageType::kAppend) {
      AppendEntriesResponse resp;
      resp.set_term(req.append.term());
      resp.set_from(req.to);
      resp.set_read_round(req.append.read_round());
      const uint64_t last = req.append.prev_log_index() +
                            static_cast<uint64_t>(req.append.entries_size());
      if (how % 4 != 0) {
        resp.set_success(true);
        resp.set_match_index(last);
        resp.set_last_log_index(last);
      } else {
        const uint64_t prev = req.append.prev_log_index();
        resp.set_success(false);
        resp.set_rejected_index(prev);
        resp.set_conflict_term(how & 4 ? 0 : req.append.prev_log_term());
        resp.set_conflict_index(prev == 0 ? 1 : 1 + (how >> 3) % prev);
        resp.set_last_log_index(resp.conflict_index() - 1);
      }
      StepResponse(raft::AppendResponseMessage(req.to, kSelf, &resp));
    } else if (req.type == MessageType::kVote) {
      RequestVoteResponse resp;
      const bool granted = how % 4 != 0;
      resp.set_term(granted || !(how & 4) ? req.vote.term() : raft_->term());
      resp.set_from(req.to);
      resp.set_granted(granted);
      resp.set_pre_vote(req.vote.pre_vote());
      StepResponse(raft::VoteResponseMessage(req.to, kSelf, &resp));
    }
  }

  void Ready() {
    raft::Ready rd = raft_->GetReady();
    if (rd.hard_state) {
      FUZZ_ASSERT(rd.hard_state->term >= hard_state_.term,
                  "persisted term goes back from %" PRIu64 " to %" PRIu64, hard_state_.term,
                  rd.hard_state->term);
      hard_state_ = *rd.hard_state;
    }
    if (!rd.entries.empty()) {
      for (const Entry& e : rd.entries) {
        FUZZ_ASSERT(e.term() <= hard_state_.term,
                    "entry %" PRIu64 " of term %" PRIu64 " persisted in term %" PRIu64,
                    e.index(), e.term(), hard_state_.term);
      }
      Status s = store_.Append(rd.entries);
      FUZZ_ASSERT(s.ok(), "log store refused the Ready's entries: %s", s.ToString().c_str());
    }
    for (const Message& m : rd.messages) {
      FUZZ_ASSERT(m.from == kSelf, "message from %" PRIu64, m.from);
      if (m.IsResponse() && m.rpc_id != 0) {
        FUZZ_ASSERT(unanswered_.erase(m.rpc_id) == 1,
                    "reply to rpc %" PRIu64 " that is not waiting for one: %s", m.rpc_id,
                    m.DebugString().c_str());
      } else if (!m.IsResponse()) {
        FUZZ_ASSERT(m.to != kSelf, "request to self");
        outbox_.push_back(m);
        if (outbox_.size() > 64) outbox_.erase(outbox_.begin());
      }
    }
    FUZZ_ASSERT(unanswered_.empty(), "%zu request(s) got no reply", unanswered_.size());
    raft_->Advance(rd);
    for (const Entry& e : rd.committed) {
      FUZZ_ASSERT(e.index() <= store_.LastIndex(), "entry %" PRIu64 " committed, not durable",
                  e.index());
      FUZZ_ASSERT(store_.entries()[e.index() - 1].SerializeAsString() == e.SerializeAsString(),
                  "committed entry %" PRIu64 " differs from the stored one", e.index());
      sm_->Apply(e);  // CHECKs that entries come in index order
      if (applied_.size() < e.index()) applied_.resize(e.index());
      applied_[e.index() - 1] = e.SerializeAsString();
    }
    for (const raft::ReadState& r : rd.reads) {
      FUZZ_ASSERT(r.index <= raft_->commit_index() || r.index <= raft_->last_index(),
                  "read at %" PRIu64 " beyond the log", r.index);
    }
  }

  void CheckInvariants() {
    const raft::Raft& r = *raft_;
    FUZZ_ASSERT(r.term() >= last_term_, "term went back from %" PRIu64 " to %" PRIu64,
                last_term_, r.term());
    last_term_ = r.term();
    FUZZ_ASSERT(r.commit_index() <= r.last_index(), "commit %" PRIu64 " > last %" PRIu64,
                r.commit_index(), r.last_index());
    FUZZ_ASSERT(r.last_term() <= r.term(), "last log term %" PRIu64 " > term %" PRIu64,
                r.last_term(), r.term());
    uint64_t previous = 0;
    for (uint64_t i = 1; i <= r.last_index(); ++i) {
      const Entry& e = r.EntryAt(i);
      FUZZ_ASSERT(e.index() == i, "log position %" PRIu64 " holds index %" PRIu64, i, e.index());
      FUZZ_ASSERT(e.term() >= previous, "log terms decrease at %" PRIu64, i);
      previous = e.term();
    }
    for (uint64_t i = 1; i <= applied_.size() && i <= r.last_index(); ++i) {
      if (applied_[i - 1].empty() || i > r.commit_index()) continue;
      FUZZ_ASSERT(r.EntryAt(i).SerializeAsString() == applied_[i - 1],
                  "applied entry %" PRIu64 " changed in the log", i);
    }
    if (r.role() == raft::Role::kLeader) {
      FUZZ_ASSERT(r.leader_id() == kSelf, "leader with leader_id %" PRIu64, r.leader_id());
    }
  }

  Reader& in_;
  raft::Config config_;
  HardState hard_state_;  // persisted
  MemoryLogStore store_;  // persisted
  std::unique_ptr<raft::Raft> raft_;
  std::unique_ptr<KvStateMachine> sm_;
  std::vector<std::string> applied_;  // serialized entries applied since the last start
  std::vector<Message> outbox_;       // requests the core sent, not answered yet
  std::set<uint64_t> unanswered_;     // rpc_ids of requests stepped since the last Ready
  uint64_t next_rpc_id_ = 1;
  uint64_t last_term_ = 0;
};

}  // namespace
}  // namespace raftkv::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  raftkv::fuzz::Reader in(data, size);
  raftkv::fuzz::Harness harness(in);
  harness.Run();
  return 0;
}
