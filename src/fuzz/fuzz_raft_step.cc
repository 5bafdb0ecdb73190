// Fuzz target: the Raft consensus core (member 1 of {1, 2, 3}, of a variant
// of it with learners, or a single voter) driven by peer messages built from
// the input, interleaved with Tick / Propose / ReadIndex / GetReady / Advance,
// membership changes, leadership transfers, log compaction and crash-restarts.
//
// Peer messages reach the core the way the service delivers them: requests
// are converted with raft::AppendRequestMessage / VoteRequestMessage /
// SnapshotRequestMessage / TimeoutNowMessage and refused unless they name
// this member and come from another member of the configuration in effect
// (the CheckPeer of grpc_server.cc); replies are converted with
// AppendResponseMessage / VoteResponseMessage / SnapshotResponseMessage as
// peer_client.cc does, from the member called; every message must pass
// raft::CheckPeerMessage, as in the service. Field values are arbitrary: near
// the core's own term and log (so the interesting paths are reached) or
// anywhere in the uint64 range. AppendEntries may carry ENTRY_CONFIG entries
// (valid configurations, or garbage), InstallSnapshot requests name valid-
// looking or random snapshots and configurations.
//
// The harness plays the node and models its storage:
//  * a MemoryLogStore (whose Append refuses gaps and writes below its first
//    index) and the persisted hard state, written from each Ready in the
//    documented order: Ready::snapshot first (restore the state machine,
//    LogStore::Reset(index + 1)), then the hard state, then the entries;
//  * the durable snapshot: the one a Ready::snapshot installed, or the one
//    the harness "wrote" before calling Compact(index) (index, term,
//    MembershipAt(index), the entry's cluster time); the log store may then
//    drop its prefix (CompactPrefix);
//  * a restart builds a new core from that snapshot (SnapshotRef
//    constructor) and the stored entries after it; a crash may also happen
//    in the middle of persisting a Ready (kOpCrashInReady);
//  * durability before sending: the messages a Ready lets go ahead of its
//    write (Ready::SendBeforePersist) are AppendEntries whose term is already
//    durable; every other message leaves after the write, with its term, a
//    vote request's self-vote and a granted vote durable;
//  * the state machine: a KvStateMachine while the node's state starts at
//    index 0; after a snapshot (whose data the harness does not have) only
//    the applied index and term are tracked.
// Checked invariants, besides CHECKs and sanitizers:
//  * every request stepped (AppendEntries, RequestVote, InstallSnapshot) gets
//    exactly one reply of the matching type carrying its rpc_id, in the next
//    Ready; TimeoutNow gets none; a successful InstallSnapshot reply covers
//    the snapshot;
//  * the invariants of one member that raft::MemberInvariants checks
//    (raft/invariants.h), after every operation: the term and the commit
//    index never decrease, snapshot index <= commit <= last index, durable
//    index <= last index, the log is contiguous after the snapshot with
//    non-decreasing terms from the snapshot's, none above the current term;
//    TermAt is 0 below the snapshot; a committed entry never changes;
//    candidates and leaders voted for themselves; the configuration entry is
//    within the log; a leader's Progress has match < next; and those below
//    marked (shared);
//  * the core's snapshot changes only by Compact (to what the harness
//    recorded) or by an InstallSnapshot (to that message's metadata), and a
//    Ready::snapshot hands out exactly the last one installed, above the
//    applied index;
//  * a committed entry is durable and never changes while the core runs;
//    entries are applied exactly once, in order (a snapshot jumps the
//    applied index); the log store holds what the core counts as durable;
//  * the configuration in effect is the last valid ENTRY_CONFIG in the log,
//    else the snapshot's (shared); every change is reported in a Ready::config, and
//    every request in a Ready goes to a member of the configuration the
//    service knows after that Ready;
//  * (shared) a leader's commit index, when it advances, is of its term and
//    covered by the durable indexes of a quorum of the voters in effect (its
//    own durable index and its followers' match); a leader tracks progress
//    of exactly the other members; candidates are voters; a leader that is
//    not a voter has an uncommitted configuration removing it;
//  * this member never votes for two candidates in one term
//    (raft::ClusterInvariants, across restarts);
//  * Propose / ProposeMembershipChange / TransferLeadership / Compact accept
//    or refuse exactly as their contracts say (an oracle recomputes each
//    rule), and an accepted change is the configuration in effect;
//  * kSnapshot messages the leader sends name a snapshot the node has, with
//    its configuration; kTimeoutNow goes to a voter.
// Input format: fuzz_raft_step.h, plus the operations of ExtOp below.
// RAFTKV_FUZZ_TRACE=1 prints each operation (to debug a crash);
// RAFTKV_FUZZ_WRITE_SEEDS=<dir> writes the seeds of the new operations to
// <dir> and exits (see doc/fuzzing.md).
#include "fuzz/fuzz_raft_step.h"

#include <algorithm>
#include <cinttypes>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "raft/core/membership.h"
#include "raft/core/quorum.h"
#include "raft/invariants.h"
#include "raft/raft.h"
#include "kv/kv_state_machine.h"
#include "storage/log_store.h"

namespace raftkv::fuzz {
namespace {

using raft::ChangeType;
using raft::MembershipChange;
using raft::Message;
using raft::MessageType;
using raft::SnapshotRef;

constexpr uint64_t kSelf = 1;

// Operations added with snapshots, membership change and leadership
// transfer. They continue the numbering of RaftOp (the op byte is taken
// modulo kOpAllCount, so the operations of RaftOp keep their values).
enum ExtOp : uint8_t {
  // [from:u8] [term pick] [to:u8] [index sel:u8 ...] [last_term sel:u8 ...]
  // [config] [time:u8] a structured InstallSnapshot (kSnapshot) request.
  kOpSnapshot = kOpCount,
  // [from:u8] [term pick] [success:u8] [match pick] [last pick]
  kOpSnapshotResp,
  // [from:u8] [term pick] [to:u8] a TimeoutNow request.
  kOpTimeoutNow,
  // [type:u8] [id:u8] [address:u8] ProposeMembershipChange.
  kOpProposeChange,
  // [target:u8] TransferLeadership(target % 6).
  kOpTransfer,
  // [index sel:u8 ...] [compact store:u8] write a snapshot at index, Compact.
  kOpCompact,
  // [kind:u8] [peer:u8] [proto: u16 chunk] InstallSnapshotRequest (kind % 3
  // == 0), InstallSnapshotResponse (1), TimeoutNowRequest (2); kind & 4: fix
  // the sender and recipient so the request passes the service's check.
  kOpRawProto2,
  // [stage:u8] GetReady, persist its first (stage % 4) parts (snapshot,
  // hard state, entries), crash and restart.
  kOpCrashInReady,
  // As kOpAppend, then [prev sel:u8] ([back:u8]: prev = snapshot index -
  // back % 3 when sel is even, else [prev pick]); each entry's [how:u8] may
  // also make it an ENTRY_CONFIG ([config], or [data: u16 chunk]) and give it
  // a cluster time ([time:u8]). See Harness::Append.
  kOpAppendConfig,
  kOpAllCount,
};

const char* OpName(uint8_t op) {
  static const char* const kNames[] = {
      "Tick",     "Propose",      "ReadIndex",   "Unreachable",   "Ready",
      "Append",   "AppendResp",   "Vote",        "VoteResp",      "Reply",
      "RawProto", "Restart",      "Snapshot",    "SnapshotResp",  "TimeoutNow",
      "ProposeChange", "Transfer", "Compact",    "RawProto2",     "CrashInReady",
      "AppendConfig"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kOpAllCount);
  return op < kOpAllCount ? kNames[op] : "?";
}

bool Tracing() {
  static const bool trace = std::getenv("RAFTKV_FUZZ_TRACE") != nullptr;
  return trace;
}

#define TRACE(...)                          \
  do {                                      \
    if (Tracing()) {                        \
      std::fprintf(stderr, "  ");           \
      std::fprintf(stderr, __VA_ARGS__);    \
      std::fprintf(stderr, "\n");           \
    }                                       \
  } while (0)

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

bool SameRef(const SnapshotRef& a, const SnapshotRef& b) {
  return a.index == b.index && a.term == b.term && a.cluster_time_ms == b.cluster_time_ms &&
         raft::SameMembership(a.config, b.config);
}

std::string Describe(const SnapshotRef& s) {
  return std::to_string(s.index) + "/" + std::to_string(s.term) + " [" +
         raft::DescribeMembership(s.config) + "] t=" + std::to_string(s.cluster_time_ms);
}

bool IsMember(const MembershipConfig& c, uint64_t id) { return raft::FindMember(c, id) != nullptr; }

bool IsVoterIn(const MembershipConfig& c, uint64_t id) {
  const MemberConfig* m = raft::FindMember(c, id);
  return m != nullptr && m->voter();
}

// The configuration an ENTRY_CONFIG entry carries, if the core is to use it
// (it parses and is well formed; otherwise every member ignores it).
std::optional<MembershipConfig> ConfigOf(const Entry& e) {
  if (e.type() != ENTRY_CONFIG) return std::nullopt;
  MembershipConfig c;
  if (!c.ParseFromString(e.data()) || !raft::CheckMembership(c).ok()) return std::nullopt;
  return c;
}

const char* ExpectedResponseName(MessageType t) { return raft::MessageTypeName(t); }

class Harness {
 public:
  explicit Harness(Reader& in) : in_(in) {
    const uint8_t flags = in.U8();
    const uint8_t limits = in.U8();
    config_.id = kSelf;
    config_.election_ticks = 3;
    config_.heartbeat_ticks = 1;
    config_.pre_vote = !(flags & kNoPreVote);
    config_.check_quorum = !(flags & kNoCheckQuorum);
    config_.max_inflight_appends = 1 + limits % 4;
    config_.max_append_entries = 1 + (limits >> 2) % 4;
    config_.max_append_bytes = 64 + 64 * ((limits >> 4) % 4);
    // Bits 6-7: no byte window, or one of about one to three messages.
    config_.max_inflight_bytes = (limits >> 6) == 0 ? 0 : 100 * (limits >> 6);
    config_.seed = limits;
    // Flag bit 7 (unused by the header of fuzz_raft_step.h): cluster time.
    config_.tick_ms = (flags & 0x80) ? 10 : 0;
    static const uint64_t kLags[] = {1000, 0, 2, 5};
    config_.promote_max_lag = kLags[(limits >> 2) & 3];
    if (flags & kSingleVoter) {
      config_.voters = {1};
    } else {
      config_.voters = {1, 2, 3};
      // Limits bits 6-7: the bootstrap configuration.
      switch (limits >> 6) {
        case 0: break;  // voters {1, 2, 3}
        case 1:         // this member is a learner
          config_.bootstrap = Members({{1, false}, {2, true}, {3, true}});
          break;
        case 2:  // this member is joining: not in the configuration
          config_.bootstrap = Members({{2, true}, {3, true}});
          break;
        case 3:  // voters {1, 2, 3} and learner 4
          config_.bootstrap = Members({{1, true}, {2, true}, {3, true}, {4, false}});
          break;
      }
    }
    bootstrap_.config = config_.bootstrap.members_size() > 0 ? config_.bootstrap
                                                             : raft::VotersConfig(config_.voters);
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
    snap_ = bootstrap_;
    // The leader must track none of the ids messages are made from but the
    // other members.
    checks_.set_probe_ids({0, 1, 2, 3, 4, 5, 6, 7});
    Start();
  }

  void Run() {
    while (!in_.empty()) {
      const uint8_t op = in_.U8() % kOpAllCount;
      if (Tracing()) {
        std::fprintf(stderr, "op %s (%s term %" PRIu64 " commit %" PRIu64 " log %" PRIu64
                             "..%" PRIu64 " snap %s)\n",
                     OpName(op), raft::RoleName(raft_->role()), raft_->term(),
                     raft_->commit_index(), raft_->first_index(), raft_->last_index(),
                     Describe(raft_->snapshot()).c_str());
      }
      Do(op);
      CheckInvariants();
    }
    Do(kOpReady);
    CheckInvariants();
  }

 private:
  struct Pending {
    MessageType response;  // the type of the one reply expected
    uint64_t from;
    uint64_t snapshot_index;  // kSnapshot: the snapshot's last index
  };

  static MembershipConfig Members(std::initializer_list<std::pair<uint64_t, bool>> members) {
    MembershipConfig c;
    for (const auto& [id, voter] : members) {
      MemberConfig* m = c.add_members();
      m->set_id(id);
      m->set_voter(voter);
      m->set_address("n" + std::to_string(id));
    }
    return c;
  }

  void Start() {
    std::vector<Entry> log;
    FUZZ_ASSERT(store_.FirstIndex() <= snap_.index + 1,
                "harness: log store starts at %" PRIu64 ", after snapshot %" PRIu64,
                store_.FirstIndex(), snap_.index);
    for (const Entry& e : store_.entries()) {
      if (e.index() > snap_.index) log.push_back(e);
    }
    // Committed entries are durable: the restarted core recovers them.
    for (const auto& [index, bytes] : committed_) {
      if (index <= snap_.index) continue;
      FUZZ_ASSERT(index <= store_.LastIndex() &&
                      store_.entries()[index - store_.FirstIndex()].SerializeAsString() == bytes,
                  "committed entry %" PRIu64 " was not durable", index);
    }
    // A crash between persisting a Ready's snapshot and its hard state
    // leaves a snapshot of a term above the saved one: the service's
    // recovery (node.cc) then raises the term to the snapshot's, without a
    // vote (no vote of that term was ever persisted, so none was sent).
    if (snap_.term > hard_state_.term) hard_state_ = HardState{snap_.term, 0};
    TRACE("start from snapshot %s, hard state %" PRIu64 "/%" PRIu64 ", %zu entries",
          Describe(snap_).c_str(), hard_state_.term, hard_state_.vote, log.size());
    if (snap_.index == 0) {
      raft_ = std::make_unique<raft::Raft>(config_, hard_state_, std::move(log));
    } else {
      raft_ = std::make_unique<raft::Raft>(config_, hard_state_, snap_, std::move(log));
    }
    core_base_ = snap_;
    if (snap_.index == 0) {
      sm_ = std::make_unique<KvStateMachine>();
    } else {
      sm_.reset();  // restored from a snapshot whose data the harness does not have
    }
    applied_index_ = snap_.index;
    committed_.clear();
    outbox_.clear();
    unanswered_.clear();
    pending_install_.reset();
    reported_config_.reset();
    checks_.Reset();
    FUZZ_ASSERT(raft_->commit_index() == snap_.index && raft_->snapshot().index == snap_.index &&
                    raft_->last_index() == std::max(snap_.index, store_.LastIndex()),
                "restarted core: commit %" PRIu64 " snapshot %" PRIu64 " last %" PRIu64,
                raft_->commit_index(), raft_->snapshot().index, raft_->last_index());
  }

  // The other members of the configuration in effect (2 and 3 when there
  // are none: they are refused).
  uint64_t Peer(uint8_t b) const {
    std::vector<uint64_t> others;
    for (const MemberConfig& m : raft_->membership().members()) {
      if (m.id() != kSelf) others.push_back(m.id());
    }
    if (others.empty()) return 2 + b % 2;
    return others[b % others.size()];
  }

  // The service's CheckPeer for requests: to this member, from another
  // member of the configuration.
  bool FromAPeer(const Message& m) const {
    return m.to == kSelf && m.from != kSelf && IsMember(raft_->membership(), m.from);
  }

  // Returns true if the request reached the core.
  bool StepRequest(Message m) {
    if (!FromAPeer(m)) return false;
    if (Status why = raft::CheckPeerMessage(m); !why.ok()) {
      TRACE("refused by CheckPeerMessage: %s", why.message().c_str());
      return false;
    }
    m.rpc_id = next_rpc_id_++;
    TRACE("step %s rpc %" PRIu64, m.DebugString().c_str(), m.rpc_id);
    switch (m.type) {
      case MessageType::kAppend:
        unanswered_[m.rpc_id] = Pending{MessageType::kAppendResp, m.from, 0};
        break;
      case MessageType::kVote:
        unanswered_[m.rpc_id] = Pending{MessageType::kVoteResp, m.from, 0};
        break;
      case MessageType::kSnapshot:
        unanswered_[m.rpc_id] =
            Pending{MessageType::kSnapshotResp, m.from, m.snapshot.last_index()};
        break;
      default:
        no_answer_.insert(m.rpc_id);  // kTimeoutNow: one-way
        break;
    }
    const SnapshotRef before = raft_->snapshot();
    raft_->Step(m);
    if (m.type == MessageType::kSnapshot && !SameRef(before, raft_->snapshot())) {
      // The core installed the snapshot the message names.
      SnapshotRef expected;
      expected.index = m.snapshot.last_index();
      expected.term = m.snapshot.last_term();
      expected.config = m.snapshot.config();
      expected.cluster_time_ms = m.snapshot.cluster_time_ms();
      FUZZ_ASSERT(SameRef(raft_->snapshot(), expected), "core took snapshot %s from %s",
                  Describe(raft_->snapshot()).c_str(), m.DebugString().c_str());
      FUZZ_ASSERT(expected.index > before.index, "snapshot went back from %" PRIu64,
                  before.index);
      core_base_ = expected;
      pending_install_ = expected;
      // The service installed the file before stepping: the node has it.
      snapshots_[{expected.index, expected.term}] = expected;
    }
    return true;
  }

  // A reply to a call this member made: the peer client delivers it whatever
  // the configuration now says; `check_member` for replies made up by the
  // input (they must come from a member the core could have called).
  void StepResponse(const Message& m, bool check_member = true) {
    if (m.from == kSelf || m.to != kSelf) return;
    if (check_member && !IsMember(raft_->membership(), m.from)) return;
    if (Status why = raft::CheckPeerMessage(m); !why.ok()) {
      TRACE("reply refused by CheckPeerMessage: %s", why.message().c_str());
      return;
    }
    TRACE("step reply %s", m.DebugString().c_str());
    raft_->Step(m);
  }

  // A configuration: the one in effect, one change away from it, made up
  // from ids 1..6, or arbitrary bytes.
  MembershipConfig MakeConfig() {
    const uint8_t mode = in_.U8();
    switch (mode % 8) {
      case 0: case 1: return raft_->membership();
      case 2: {
        MembershipChange change;
        change.type = static_cast<ChangeType>(in_.U8() % 5);
        change.id = in_.U8() % 7;
        change.address = "n" + std::to_string(change.id);
        MembershipConfig next;
        if (raft::ApplyChange(raft_->membership(), change, &next).ok()) return next;
        return raft_->membership();
      }
      case 3: return raft::VotersConfig({1, 2, 3});
      case 4: {
        const uint8_t present = in_.U8();
        const uint8_t voters = in_.U8();
        MembershipConfig c;
        for (uint64_t id = 1; id <= 6; ++id) {
          if (!(present & (1u << (id - 1)))) continue;
          MemberConfig* m = c.add_members();
          m->set_id(id);
          m->set_voter((voters & (1u << (id - 1))) != 0);
          m->set_address("n" + std::to_string(id));
        }
        return c;
      }
      case 5: return Members({{2, true}, {3, true}});
      case 6: return MembershipConfig();
      default: {
        MembershipConfig c;
        (void)c.ParseFromString(in_.Chunk());  // may be invalid
        return c;
      }
    }
  }

  void StepSnapshotRequest(InstallSnapshotRequest req) { StepRequest(raft::SnapshotRequestMessage(req)); }

  void Do(uint8_t op) {
    switch (op) {
      case kOpTick: {
        const int n = 1 + in_.U8() % 8;
        for (int i = 0; i < n; ++i) raft_->Tick();
        break;
      }
      case kOpPropose: Propose(); break;
      case kOpReadIndex: raft_->ReadIndex(in_.U8()); break;
      case kOpUnreachable: raft_->ReportUnreachable(in_.U8() % 4); break;
      case kOpReady: Ready(); break;
      case kOpAppend: Append(false); break;
      case kOpAppendConfig: Append(true); break;
      case kOpAppendResp: AppendResponse(); break;
      case kOpVote: VoteRequest(); break;
      case kOpVoteResp: VoteResponse(); break;
      case kOpReply: Reply(); break;
      case kOpRawProto: RawProto(); break;
      case kOpRestart:
        // Whatever was not handed to storage is lost; the core recovers from
        // the persisted snapshot, hard state and log (its constructor CHECKs
        // them).
        Start();
        break;
      case kOpSnapshot: SnapshotRequest(); break;
      case kOpSnapshotResp: SnapshotResponse(); break;
      case kOpTimeoutNow: TimeoutNow(); break;
      case kOpProposeChange: ProposeChange(); break;
      case kOpTransfer: Transfer(in_.U8() % 6); break;
      case kOpCompact: Compact(); break;
      case kOpRawProto2: RawProto2(); break;
      case kOpCrashInReady: CrashInReady(in_.U8() % 4); break;
      default: break;
    }
  }

  // kOpPropose: accepted exactly by a leader not transferring leadership.
  void Propose() {
    const bool leader = raft_->role() == raft::Role::kLeader;
    const bool transferring = raft_->transfer_target() != 0;
    const raft::ProposeResult r = raft_->Propose(in_.Chunk());
    FUZZ_ASSERT(r.accepted == (leader && !transferring), "propose accepted=%d", r.accepted);
    FUZZ_ASSERT(r.error.ok() == (r.accepted || !leader), "propose error '%s'",
                r.error.message().c_str());
    if (r.accepted) {
      FUZZ_ASSERT(r.index == raft_->last_index() && r.term == raft_->term(),
                  "proposal at %" PRIu64 "/%" PRIu64, r.index, r.term);
    }
  }

  // kOpAppendResp: a structured AppendEntriesResponse.
  void AppendResponse() {
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
  }

  // kOpVote: a structured RequestVoteRequest.
  void VoteRequest() {
    RequestVoteRequest req;
    req.set_candidate_id(Peer(in_.U8()));
    req.set_to(kSelf);
    req.set_term(PickTerm(in_, raft_->term()));
    req.set_last_log_index(PickIndex(in_, raft_->last_index()));
    req.set_last_log_term(PickTerm(in_, raft_->last_term()));
    req.set_pre_vote(in_.Bool());
    StepRequest(raft::VoteRequestMessage(&req));
  }

  // kOpVoteResp: a structured RequestVoteResponse.
  void VoteResponse() {
    RequestVoteResponse resp;
    const uint64_t from = Peer(in_.U8());
    resp.set_term(PickTerm(in_, raft_->term()));
    resp.set_from(from);
    resp.set_granted(in_.Bool());
    resp.set_pre_vote(in_.Bool());
    StepResponse(raft::VoteResponseMessage(from, kSelf, &resp));
  }

  // kOpRawProto: AppendEntries / RequestVote requests and responses parsed
  // from arbitrary bytes.
  void RawProto() {
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
  }

  // kOpSnapshotResp: a structured InstallSnapshotResponse.
  void SnapshotResponse() {
    InstallSnapshotResponse resp;
    const uint64_t from = Peer(in_.U8());
    resp.set_term(PickTerm(in_, raft_->term()));
    resp.set_from(from);
    resp.set_success(in_.Bool());
    resp.set_match_index(PickIndex(in_, raft_->last_index()));
    resp.set_last_log_index(PickIndex(in_, raft_->last_index()));
    StepResponse(raft::SnapshotResponseMessage(from, kSelf, resp));
  }

  // kOpTimeoutNow: a structured TimeoutNow request.
  void TimeoutNow() {
    TimeoutNowRequest req;
    req.set_leader_id(Peer(in_.U8()));
    req.set_term(PickTerm(in_, raft_->term()));
    req.set_to(in_.U8() % 8 == 0 ? 3 : kSelf);
    StepRequest(raft::TimeoutNowMessage(req));
  }

  // kOpRawProto2: InstallSnapshot requests and responses and TimeoutNow
  // requests parsed from arbitrary bytes.
  void RawProto2() {
    const uint8_t kind = in_.U8();
    const uint64_t peer = Peer(in_.U8());
    const std::string bytes = in_.Chunk();
    switch (kind % 3) {
      case 0: {
        InstallSnapshotRequest req;
        if (!req.ParseFromString(bytes)) break;
        if (kind & 4) {
          req.set_leader_id(peer);
          req.set_to(kSelf);
        }
        StepSnapshotRequest(req);
        break;
      }
      case 1: {
        InstallSnapshotResponse resp;
        if (resp.ParseFromString(bytes)) {
          StepResponse(raft::SnapshotResponseMessage(peer, kSelf, resp));
        }
        break;
      }
      case 2: {
        TimeoutNowRequest req;
        if (!req.ParseFromString(bytes)) break;
        if (kind & 4) {
          req.set_leader_id(peer);
          req.set_to(kSelf);
        }
        StepRequest(raft::TimeoutNowMessage(req));
        break;
      }
    }
  }

  // kOpAppend, and (extended) kOpAppendConfig: a structured AppendEntries.
  // Extended: prev may be picked at the snapshot (the trimmed path), and an
  // entry's `how` byte may make it an ENTRY_CONFIG (bit 5; bit 6: arbitrary
  // bytes as its data) or give it a cluster time (bit 7).
  void Append(bool extended) {
    AppendEntriesRequest req;
    const uint64_t from = Peer(in_.U8());
    req.set_term(PickTerm(in_, raft_->term()));
    req.set_leader_id(from);
    req.set_to(in_.U8() % 8 == 0 ? 3 : kSelf);
    if (extended && in_.U8() % 2 == 0) {
      const uint64_t back = in_.U8() % 3;
      const uint64_t base = raft_->snapshot().index;
      req.set_prev_log_index(base > back ? base - back : 0);
    } else {
      req.set_prev_log_index(PickIndex(in_, raft_->last_index()));
    }
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
      if (extended && (how & 32)) {
        e->set_type(ENTRY_CONFIG);
        e->set_data((how & 64) ? in_.Chunk() : MakeConfig().SerializeAsString());
      } else {
        e->set_type((how & 16) ? ENTRY_NOOP : ENTRY_COMMAND);
        if (!(how & 16)) e->set_data(in_.Chunk());
      }
      if (extended && (how & 128)) e->set_cluster_time_ms(in_.U8() * 10u);
    }
    req.set_leader_commit(PickIndex(in_, raft_->last_index() + static_cast<uint64_t>(n)));
    req.set_read_round(in_.U8() % 4);
    StepRequest(raft::AppendRequestMessage(&req));
  }

  // kOpSnapshot: an InstallSnapshot the service has received and installed.
  void SnapshotRequest() {
    const raft::Raft& r = *raft_;
    InstallSnapshotRequest req;
    req.set_leader_id(Peer(in_.U8()));
    req.set_term(PickTerm(in_, r.term()));
    req.set_to(in_.U8() % 8 == 0 ? 3 : kSelf);
    uint64_t index = 0;
    const uint8_t sel = in_.U8();
    switch (sel % 8) {
      case 0: index = r.commit_index() + 1 + in_.U8() % 4; break;  // above commit
      case 1: index = r.last_index(); break;
      case 2: index = r.last_index() + 1 + in_.U8() % 4; break;    // beyond the log
      case 3: index = r.commit_index(); break;                     // nothing new
      case 4: index = PickIndex(in_, r.last_index()); break;
      case 5: index = in_.U64(); break;
      case 6: index = r.snapshot().index + in_.U8() % 3; break;
      default: {
        const uint64_t span = r.last_index() - r.first_index() + 1;
        index = r.first_index() + in_.U8() % std::max<uint64_t>(span, 1);
        break;
      }
    }
    req.set_last_index(index);
    switch (in_.U8() % 4) {
      case 0: case 1:  // the term the log has there: the "already holds it" path
        req.set_last_term(r.TermAt(index) != 0 ? r.TermAt(index) : req.term());
        break;
      case 2: req.set_last_term(req.term()); break;
      default: req.set_last_term(PickTerm(in_, r.term())); break;
    }
    *req.mutable_config() = MakeConfig();
    req.set_cluster_time_ms(in_.U8() * 100u);
    StepSnapshotRequest(req);
  }

  // kOpProposeChange, with an oracle for the refusal rules.
  void ProposeChange() {
    MembershipChange change;
    change.type = static_cast<ChangeType>(in_.U8() % 5);
    change.id = in_.U8() % 7;
    const uint8_t address = in_.U8() % 5;
    change.address = address == 0 ? "" : "n" + std::to_string(address + 2);
    const raft::Raft& r = *raft_;
    const bool leader = r.role() == raft::Role::kLeader;
    bool expect_accept = leader && r.transfer_target() == 0 &&
                         r.membership_index() <= r.commit_index() && TermStartCommitted();
    MembershipConfig next;
    if (expect_accept) {
      expect_accept = raft::ApplyChange(r.membership(), change, &next).ok();
    }
    if (expect_accept && change.type == ChangeType::kAddVoter) {
      // The voters heard from lately must stay a majority of the larger set
      // (one voter may take a second).
      const std::vector<uint64_t> voters = raft::VoterIds(r.membership());
      size_t started = 0;
      for (uint64_t v : voters) {
        const raft::Progress* pr = r.ProgressOf(v);
        if (v == r.id() || (pr != nullptr && pr->RecentlyActive())) ++started;
      }
      expect_accept = voters.size() == 1 || raft::IsMajority(started, voters.size() + 1);
    }
    if (expect_accept && change.type == ChangeType::kPromote) {
      const raft::Progress* pr = r.ProgressOf(change.id);
      const uint64_t match = pr == nullptr ? 0 : pr->match();
      expect_accept = match > 0 && match + config_.promote_max_lag >= r.last_index();
    }
    const uint64_t last = r.last_index();
    const raft::ProposeResult p = raft_->ProposeMembershipChange(change);
    TRACE("propose %s %" PRIu64 " '%s': %s %s", raft::ChangeTypeName(change.type), change.id,
          change.address.c_str(), p.accepted ? "accepted" : "refused", p.error.message().c_str());
    FUZZ_ASSERT(p.accepted == expect_accept, "ProposeMembershipChange(%s %" PRIu64
                ") accepted=%d, expected %d (%s)", raft::ChangeTypeName(change.type), change.id,
                p.accepted, expect_accept, p.error.message().c_str());
    FUZZ_ASSERT(p.error.ok() == (p.accepted || !leader), "ProposeMembershipChange error '%s'",
                p.error.message().c_str());
    if (!p.accepted) return;
    FUZZ_ASSERT(p.index == last + 1 && p.index == raft_->last_index() && p.term == raft_->term(),
                "configuration proposed at %" PRIu64 "/%" PRIu64, p.index, p.term);
    const std::optional<MembershipConfig> logged = ConfigOf(raft_->EntryAt(p.index));
    FUZZ_ASSERT(logged && raft::SameMembership(*logged, next) && raft::SameMembership(raft_->membership(), next) &&
                    raft_->membership_index() == p.index,
                "accepted change not in effect: %s", raft::DescribeMembership(raft_->membership()).c_str());
  }

  // A leader has committed an entry of its term (the no-op it appended).
  bool TermStartCommitted() const {
    const raft::Raft& r = *raft_;
    if (r.snapshot().term == r.term()) return true;  // compacted past it: committed
    for (uint64_t i = r.first_index(); i <= r.last_index(); ++i) {
      if (r.TermAt(i) == r.term()) return i <= r.commit_index();
    }
    return false;
  }

  void Transfer(uint64_t target) {
    const raft::Raft& r = *raft_;
    const bool expect_start = r.role() == raft::Role::kLeader && target != kSelf &&
                              r.IsVoter(target) && r.ProgressOf(target) != nullptr &&
                              r.transfer_target() == 0;
    const std::string why = raft_->TransferLeadership(target).message();
    TRACE("transfer to %" PRIu64 ": '%s'", target, why.c_str());
    FUZZ_ASSERT(why.empty() == expect_start, "TransferLeadership(%" PRIu64 ") = '%s'", target,
                why.c_str());
    if (why.empty()) {
      FUZZ_ASSERT(raft_->transfer_target() == target, "transfer target %" PRIu64,
                  raft_->transfer_target());
    }
  }

  // kOpCompact: the node writes a snapshot of its state at `index`, then
  // tells the core (and may drop the log store's prefix).
  void Compact() {
    const raft::Raft& r = *raft_;
    uint64_t index = 0;
    const uint8_t sel = in_.U8();
    switch (sel % 4) {
      case 0: index = applied_index_; break;
      case 1: {
        const uint64_t back = in_.U8() % 4;
        index = applied_index_ > back ? applied_index_ - back : 0;
        break;
      }
      case 2: index = PickIndex(in_, r.last_index()); break;
      default: index = r.snapshot().index + in_.U8() % 3; break;
    }
    const bool compact_store = in_.Bool();
    const bool expect = index > r.snapshot().index && index <= applied_index_;
    SnapshotRef ref;
    if (expect) {
      ref.index = index;
      ref.term = r.TermAt(index);
      ref.config = ExpectedConfigAt(index);
      FUZZ_ASSERT(raft::SameMembership(ref.config, r.MembershipAt(index)), "MembershipAt(%" PRIu64 ") = %s",
                  index, raft::DescribeMembership(r.MembershipAt(index)).c_str());
      ref.cluster_time_ms = r.EntryAt(index).cluster_time_ms();
    }
    const bool ok = raft_->Compact(index);
    TRACE("compact %" PRIu64 ": %d", index, ok);
    FUZZ_ASSERT(ok == expect, "Compact(%" PRIu64 ") = %d (snapshot %" PRIu64 ", applied %" PRIu64
                ")", index, ok, core_base_.index, applied_index_);
    if (!ok) return;
    FUZZ_ASSERT(SameRef(raft_->snapshot(), ref), "core snapshot %s after Compact, expected %s",
                Describe(raft_->snapshot()).c_str(), Describe(ref).c_str());
    snap_ = ref;
    snapshots_[{ref.index, ref.term}] = ref;
    core_base_ = ref;
    if (compact_store) {
      Status s = store_.CompactPrefix(index);
      FUZZ_ASSERT(s.ok(), "%s", s.ToString().c_str());
    }
  }

  // The configuration in effect at `index` (the core's snapshot index <=
  // index <= last index), from the log.
  MembershipConfig ExpectedConfigAt(uint64_t index) const {
    const raft::Raft& r = *raft_;
    for (uint64_t i = std::min(index, r.last_index()); i >= r.first_index() && i > 0; --i) {
      if (std::optional<MembershipConfig> c = ConfigOf(r.EntryAt(i))) return *c;
    }
    return core_base_.config;
  }

  // A peer answers one of the requests the core sent, as a correct member
  // would (accepting, or rejecting with consistent hints).
  void Reply() {
    if (outbox_.empty()) return;
    const size_t which = in_.U8() % outbox_.size();
    const uint8_t how = in_.U8();
    Message req = outbox_[which];
    TRACE("reply to outbox[%zu of %zu]: %s", which, outbox_.size(), req.DebugString().c_str());
    outbox_.erase(outbox_.begin() + static_cast<std::ptrdiff_t>(which));
    if (req.type == MessageType::kAppend) {
      AppendEntriesResponse resp;
      resp.set_term(req.append.term());
      resp.set_from(req.to);
      resp.set_read_round(req.append.read_round());
      resp.set_seq(req.append.seq());
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
      StepResponse(raft::AppendResponseMessage(req.to, kSelf, &resp), false);
    } else if (req.type == MessageType::kVote) {
      RequestVoteResponse resp;
      const bool granted = how % 4 != 0;
      resp.set_term(granted || !(how & 4) ? req.vote.term() : raft_->term());
      resp.set_from(req.to);
      resp.set_granted(granted);
      resp.set_pre_vote(req.vote.pre_vote());
      StepResponse(raft::VoteResponseMessage(req.to, kSelf, &resp), false);
    } else if (req.type == MessageType::kSnapshot) {
      // The service streams the snapshot: the transfer fails
      // (ReportUnreachable), the follower refuses it (a newer term), or it
      // installs it (or already had more: match above the snapshot).
      if (how % 4 == 0) {
        TRACE("snapshot transfer to %" PRIu64 " failed", req.to);
        raft_->ReportUnreachable(req.to);
        // The transfer ended: the leader must be able to retry (kSnapshot
        // sends nothing until the transfer ends).
        const raft::Progress* pr = raft_->ProgressOf(req.to);
        FUZZ_ASSERT(pr == nullptr || pr->state() != raft::Progress::State::kSnapshot,
                    "failed snapshot transfer to %" PRIu64 " leaves it waiting for snapshot %" PRIu64
                    " forever", req.to, pr->pending_snapshot());
        return;
      }
      InstallSnapshotResponse resp;
      resp.set_from(req.to);
      if (how % 4 == 1) {
        resp.set_term(req.snapshot.term() + ((how & 4) ? 1 : 0));
        resp.set_success(false);
        resp.set_last_log_index(req.snapshot.last_index() / 2);
      } else {
        resp.set_term(req.snapshot.term());
        resp.set_success(true);
        const uint64_t match = req.snapshot.last_index() + ((how & 8) ? 1 : 0);
        resp.set_match_index(std::min(match, std::max(raft_->last_index(), req.snapshot.last_index())));
        resp.set_last_log_index(resp.match_index());
      }
      StepResponse(raft::SnapshotResponseMessage(req.to, kSelf, resp), false);
    } else if (req.type == MessageType::kTimeoutNow) {
      // The target starts an election at once (no PreVote), saying so.
      if (how % 2 == 0) return;
      RequestVoteRequest vote;
      vote.set_candidate_id(req.to);
      vote.set_to(kSelf);
      vote.set_term(req.timeout_now.term() + 1);
      vote.set_last_log_index(raft_->last_index());
      vote.set_last_log_term(raft_->last_term());
      vote.set_transfer(true);
      StepRequest(raft::VoteRequestMessage(&vote));
    }
  }

  // A Ready's snapshot: restore the state machine (the harness cannot: it
  // only tracks the applied index) and reset the log store.
  void InstallSnapshot(const SnapshotRef& s) {
    Status st = store_.Reset(s.index + 1);
    FUZZ_ASSERT(st.ok(), "log store Reset(%" PRIu64 " + 1): %s", s.index, st.ToString().c_str());
    snap_ = s;
    snapshots_[{s.index, s.term}] = s;
    applied_index_ = s.index;
    sm_.reset();
  }

  // Durability before sending: a message leaves only with state that is
  // durable when it leaves. `durable` is the hard state on disk at that
  // moment (before the Ready's write for the messages sent ahead of it).
  void CheckSendable(const Message& m, const HardState& durable, bool ahead_of_write) {
    const bool pre_vote = (m.type == MessageType::kVote && m.vote.pre_vote()) ||
                          (m.type == MessageType::kVoteResp && m.vote_resp.pre_vote());
    FUZZ_ASSERT(pre_vote || m.Term() <= durable.term,
                "%s leaves %s with term %" PRIu64 " while the durable term is %" PRIu64,
                m.DebugString().c_str(), ahead_of_write ? "ahead of the write" : "after the write",
                m.Term(), durable.term);
    // (A durable term above the message's is enough: this member can never
    // vote in that term again.)
    if (m.type == MessageType::kVote && !m.vote.pre_vote()) {
      FUZZ_ASSERT(durable.term > m.vote.term() || (durable.term == m.vote.term() && durable.vote == kSelf),
                  "%s asks for votes before its own vote is durable (%" PRIu64 "/%" PRIu64 ")",
                  m.DebugString().c_str(), durable.term, durable.vote);
    }
    if (m.type == MessageType::kVoteResp && !m.vote_resp.pre_vote() && m.vote_resp.granted()) {
      FUZZ_ASSERT(durable.term > m.vote_resp.term() ||
                      (durable.term == m.vote_resp.term() && durable.vote == m.to),
                  "%s grants a vote that is not durable (%" PRIu64 "/%" PRIu64 ")",
                  m.DebugString().c_str(), durable.term, durable.vote);
    }
    if (ahead_of_write) {
      FUZZ_ASSERT(m.type == MessageType::kAppend, "%s may not leave ahead of the write",
                  m.DebugString().c_str());
    }
  }

  void Ready() {
    raft::Ready rd = raft_->GetReady();
    for (const Message& m : rd.messages) {
      if (rd.SendBeforePersist(m)) CheckSendable(m, hard_state_, /*ahead_of_write=*/true);
    }
    PersistReady(rd);
    for (const Message& m : rd.messages) SendReadyMessage(rd, m);
    FUZZ_ASSERT(unanswered_.empty(), "%zu request(s) got no reply", unanswered_.size());
    no_answer_.clear();
    raft_->Advance(rd);
    ApplyReady(rd);
  }

  // Persists a Ready in the documented order: its snapshot, hard state and
  // entries (checking the snapshot and configuration it reports).
  void PersistReady(const raft::Ready& rd) {
    if (rd.snapshot) {
      TRACE("ready: snapshot %s", Describe(*rd.snapshot).c_str());
      FUZZ_ASSERT(pending_install_ && SameRef(*rd.snapshot, *pending_install_),
                  "Ready::snapshot %s, installed %s", Describe(*rd.snapshot).c_str(),
                  pending_install_ ? Describe(*pending_install_).c_str() : "none");
      FUZZ_ASSERT(rd.snapshot->index > applied_index_,
                  "Ready::snapshot %" PRIu64 " not above the applied index %" PRIu64,
                  rd.snapshot->index, applied_index_);
      InstallSnapshot(*rd.snapshot);
    } else {
      FUZZ_ASSERT(!pending_install_, "installed snapshot %s not in the Ready",
                  Describe(*pending_install_).c_str());
    }
    pending_install_.reset();
    if (rd.config) {
      TRACE("ready: config %s", raft::DescribeMembership(*rd.config).c_str());
      FUZZ_ASSERT(raft::SameMembership(*rd.config, raft_->membership()), "Ready::config %s, in effect %s",
                  raft::DescribeMembership(*rd.config).c_str(),
                  raft::DescribeMembership(raft_->membership()).c_str());
      reported_config_ = *rd.config;
    }
    FUZZ_ASSERT(reported_config_ && raft::SameMembership(*reported_config_, raft_->membership()),
                "configuration %s in effect was not reported",
                raft::DescribeMembership(raft_->membership()).c_str());
    if (rd.hard_state) {
      if (rd.hard_state->vote != 0) RecordVote(rd.hard_state->term, rd.hard_state->vote);
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
  }

  // A Ready's message leaves: a reply answers a request stepped since the
  // last Ready; a request goes to a member the service knows.
  void SendReadyMessage(const raft::Ready& rd, const Message& m) {
    TRACE("ready: send %s rpc %" PRIu64, m.DebugString().c_str(), m.rpc_id);
    FUZZ_ASSERT(m.from == kSelf, "message from %" PRIu64, m.from);
    if (!rd.SendBeforePersist(m)) CheckSendable(m, hard_state_, /*ahead_of_write=*/false);
    FUZZ_ASSERT(no_answer_.count(m.rpc_id) == 0, "reply to a TimeoutNow: %s",
                m.DebugString().c_str());
    if (m.IsResponse()) {
      AnswerRequest(m);
      return;
    }
    FUZZ_ASSERT(m.to != kSelf, "request to self");
    // The service dials members of the configuration it knows.
    FUZZ_ASSERT(IsMember(*reported_config_, m.to),
                "%s goes to a member the service no longer knows (configuration %s)",
                m.DebugString().c_str(), raft::DescribeMembership(*reported_config_).c_str());
    if (m.type == MessageType::kAppend && raft_->role() == raft::Role::kLeader &&
        m.append.term() == raft_->term()) {
      // What this leader sends is its log.
      const AppendEntriesRequest& a = m.append;
      const raft::Raft& r = *raft_;
      FUZZ_ASSERT(a.leader_commit() <= r.commit_index(), "%s: commit above the leader's %" PRIu64,
                  m.DebugString().c_str(), r.commit_index());
      // (A heartbeat to a follower whose match is below the snapshot has
      // prev 0; the log may also have been compacted since the message.)
      if (a.prev_log_index() >= r.snapshot().index) {
        FUZZ_ASSERT(a.prev_log_term() == r.TermAt(a.prev_log_index()),
                    "%s: prev term, the log has %" PRIu64, m.DebugString().c_str(),
                    r.TermAt(a.prev_log_index()));
      }
      for (const Entry& e : a.entries()) {
        if (e.index() < r.first_index()) continue;
        FUZZ_ASSERT(e.index() <= r.last_index() &&
                        e.SerializeAsString() == r.EntryAt(e.index()).SerializeAsString(),
                    "%s: entry %" PRIu64 " is not the leader's", m.DebugString().c_str(),
                    e.index());
      }
    }
    if (m.type == MessageType::kSnapshot) {
      auto it = snapshots_.find({m.snapshot.last_index(), m.snapshot.last_term()});
      FUZZ_ASSERT(it != snapshots_.end(), "%s names a snapshot the node does not have",
                  m.DebugString().c_str());
      FUZZ_ASSERT(raft::SameMembership(it->second.config, m.snapshot.config()) &&
                      it->second.cluster_time_ms == m.snapshot.cluster_time_ms(),
                  "%s: not the metadata of snapshot %s", m.DebugString().c_str(),
                  Describe(it->second).c_str());
    } else if (m.type == MessageType::kTimeoutNow) {
      FUZZ_ASSERT(IsVoterIn(raft_->membership(), m.to), "%s to a non-voter",
                  m.DebugString().c_str());
    }
    outbox_.push_back(m);
    if (outbox_.size() > 64) outbox_.erase(outbox_.begin());
  }

  // A reply of a Ready: exactly one per request, of the matching type.
  void AnswerRequest(const Message& m) {
    auto it = unanswered_.find(m.rpc_id);
    FUZZ_ASSERT(it != unanswered_.end(),
                "reply to rpc %" PRIu64 " that is not waiting for one: %s", m.rpc_id,
                m.DebugString().c_str());
    FUZZ_ASSERT(m.type == it->second.response && m.to == it->second.from,
                "%s answers a request from %" PRIu64 " expecting %s",
                m.DebugString().c_str(), it->second.from,
                ExpectedResponseName(it->second.response));
    if (m.type == MessageType::kVoteResp && m.vote_resp.granted() && !m.vote_resp.pre_vote()) {
      RecordVote(m.vote_resp.term(), m.to);
    }
    if (m.type == MessageType::kSnapshotResp && m.snapshot_resp.success()) {
      FUZZ_ASSERT(m.snapshot_resp.match_index() >= it->second.snapshot_index,
                  "snapshot %" PRIu64 " accepted with match %" PRIu64,
                  it->second.snapshot_index, m.snapshot_resp.match_index());
    }
    unanswered_.erase(it);
  }

  // Applies a Ready's committed entries (after Advance) and checks its reads.
  void ApplyReady(const raft::Ready& rd) {
    for (const Entry& e : rd.committed) {
      FUZZ_ASSERT(e.index() == applied_index_ + 1, "entry %" PRIu64 " applied after %" PRIu64,
                  e.index(), applied_index_);
      FUZZ_ASSERT(e.index() >= store_.FirstIndex() && e.index() <= store_.LastIndex(),
                  "entry %" PRIu64 " committed, not durable", e.index());
      FUZZ_ASSERT(store_.entries()[e.index() - store_.FirstIndex()].SerializeAsString() ==
                      e.SerializeAsString(),
                  "committed entry %" PRIu64 " differs from the stored one", e.index());
      if (sm_) sm_->Apply(e);  // CHECKs that entries come in index order
      applied_index_ = e.index();
      committed_[e.index()] = e.SerializeAsString();
    }
    for (const raft::ReadState& r : rd.reads) {
      FUZZ_ASSERT(r.index <= raft_->commit_index() || r.index <= raft_->last_index(),
                  "read at %" PRIu64 " beyond the log", r.index);
    }
  }

  // This member granted its vote in `term` to `candidate` (a granted vote
  // sent, or a vote persisted): never to another one (election safety).
  void RecordVote(uint64_t term, uint64_t candidate) {
    history_.RecordVote(kSelf, term, candidate);
    FUZZ_ASSERT(history_.violations().empty(), "%s", history_.violations()[0].c_str());
  }

  // A crash while persisting a Ready, in the documented order (snapshot,
  // hard state, entries): the later parts are lost, nothing is applied or
  // acknowledged (the service fails the open RPCs).
  void CrashInReady(int stage) {
    raft::Ready rd = raft_->GetReady();
    TRACE("crash after persisting %d part(s)", stage);
    // What went out ahead of the write is out, whatever the crash loses.
    for (const Message& m : rd.messages) {
      if (rd.SendBeforePersist(m)) CheckSendable(m, hard_state_, /*ahead_of_write=*/true);
    }
    if (stage >= 1 && rd.snapshot) {
      InstallSnapshot(*rd.snapshot);
    }
    if (stage >= 2 && rd.hard_state) hard_state_ = *rd.hard_state;
    if (stage >= 3 && !rd.entries.empty()) {
      Status s = store_.Append(rd.entries);
      FUZZ_ASSERT(s.ok(), "log store refused the Ready's entries: %s", s.ToString().c_str());
    }
    no_answer_.clear();
    Start();
  }

  // After every operation: the shared invariants of the core (indexes,
  // terms, log, configuration in effect, roles, a leader's progress and
  // commit quorum; term and commit never going back, committed entries never
  // changing), then what the harness knows of its storage.
  void CheckInvariants() {
    const raft::Raft& r = *raft_;
    std::vector<std::string> violations;
    checks_.Check(r, /*full=*/true, &violations);
    if (r.role() == raft::Role::kLeader) history_.RecordLeader(kSelf, r.term());
    FUZZ_ASSERT(violations.empty(), "%s", violations.empty() ? "" : violations[0].c_str());
    FUZZ_ASSERT(history_.violations().empty(), "%s", history_.violations()[0].c_str());
    FUZZ_ASSERT(SameRef(r.snapshot(), core_base_), "core snapshot %s, expected %s",
                Describe(r.snapshot()).c_str(), Describe(core_base_).c_str());
    // Applied entries never change.
    for (const auto& [index, bytes] : committed_) {
      if (index < r.first_index()) continue;
      FUZZ_ASSERT(index <= r.commit_index() && index <= r.last_index(),
                  "applied entry %" PRIu64 " is no longer committed (commit %" PRIu64 ")", index,
                  r.commit_index());
      FUZZ_ASSERT(r.EntryAt(index).SerializeAsString() == bytes,
                  "applied entry %" PRIu64 " changed in the log", index);
    }
    // What the core counts as durable is in the log store.
    FUZZ_ASSERT(r.durable_index() <= std::max(store_.LastIndex(), r.snapshot().index),
                "durable index %" PRIu64 " beyond the store's %" PRIu64, r.durable_index(),
                store_.LastIndex());
    for (uint64_t i = std::max(r.first_index(), store_.FirstIndex()); i <= r.durable_index(); ++i) {
      FUZZ_ASSERT(store_.entries()[i - store_.FirstIndex()].SerializeAsString() ==
                      r.EntryAt(i).SerializeAsString(),
                  "durable entry %" PRIu64 " differs from the stored one", i);
    }
  }

  Reader& in_;
  raft::Config config_;
  SnapshotRef bootstrap_;  // index 0: the bootstrap configuration
  HardState hard_state_;   // persisted
  MemoryLogStore store_;   // persisted
  SnapshotRef snap_;       // the durable snapshot a restart starts from
  // Every snapshot the node's snapshot store holds, by (index, term).
  std::map<std::pair<uint64_t, uint64_t>, SnapshotRef> snapshots_;
  std::unique_ptr<raft::Raft> raft_;
  SnapshotRef core_base_;  // what raft_->snapshot() must be
  std::optional<SnapshotRef> pending_install_;  // installed, not yet in a Ready
  std::optional<MembershipConfig> reported_config_;  // last Ready::config since start
  std::unique_ptr<KvStateMachine> sm_;  // while the state starts at index 0
  uint64_t applied_index_ = 0;
  std::map<uint64_t, std::string> committed_;  // serialized entries applied since the start
  std::vector<Message> outbox_;                // requests the core sent, not answered yet
  std::map<uint64_t, Pending> unanswered_;     // requests stepped since the last Ready
  std::set<uint64_t> no_answer_;               // TimeoutNow rpc_ids since the last Ready
  // This member's votes and leaderships (all incarnations): the shared
  // checker of election safety.
  raft::ClusterInvariants history_;
  // The shared invariants of this member's core (this incarnation).
  raft::MemberInvariants checks_;
  uint64_t next_rpc_id_ = 1;
};

// ---- seeds of the operations of ExtOp ----
// Written to <dir>/seed-<name> by RAFTKV_FUZZ_WRITE_SEEDS=<dir> (the seeds of
// RaftOp come from make_corpus.cc). Each is a short scenario through one of
// the new paths; the operand bytes are commented (outbox positions were
// read off RAFTKV_FUZZ_TRACE=1).
class SeedBuilder {
 public:
  SeedBuilder(uint8_t flags, uint8_t limits) { bytes_ = {static_cast<char>(flags), static_cast<char>(limits)}; }
  SeedBuilder& Op(uint8_t op, std::initializer_list<uint8_t> args = {}) {
    bytes_.push_back(static_cast<char>(op));
    return Raw(args);
  }
  SeedBuilder& Raw(std::initializer_list<uint8_t> args) {
    for (uint8_t a : args) bytes_.push_back(static_cast<char>(a));
    return *this;
  }
  SeedBuilder& Chunk(const std::string& data) {
    bytes_.push_back(static_cast<char>(data.size() & 0xFF));
    bytes_.push_back(static_cast<char>(data.size() >> 8));
    bytes_ += data;
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Member 1 of {1, 2, 3} campaigns and wins (pre-vote and vote granted by 2),
// 2 accepts the no-op: leader of term 1 with commit 1.
SeedBuilder ElectedLeader() {
  SeedBuilder b(0, 0);
  b.Op(kOpTick, {7}).Op(kOpReady);
  b.Op(kOpReply, {0, 1}).Op(kOpReady);  // pre-vote granted by 2
  b.Op(kOpReply, {3, 1}).Op(kOpReady);  // vote granted by 2: leader, no-op at 1
  b.Op(kOpReply, {4, 1}).Op(kOpReady);  // 2 accepts the no-op: commit 1
  return b;
}

// Seeds of snapshot transfer, installation and compaction.
void SnapshotSeeds(std::map<std::string, std::string>& seeds) {
  {
    // Leader: compacts, member 3 (never heard from) gets the snapshot and
    // installs it; a proposal replicates after it; restart from the
    // snapshot.
    SeedBuilder b = ElectedLeader();
    b.Op(kOpCompact, {0, 0});             // Compact(applied = 1), store kept
    b.Op(kOpTick, {0}).Op(kOpReady);      // heartbeat: kSnapshot to 3
    b.Op(kOpReply, {6, 2}).Op(kOpReady);  // 3 installed it
    b.Op(kOpPropose).Chunk("AB").Op(kOpReady);
    b.Op(kOpReply, {6, 1}).Op(kOpReply, {5, 1}).Op(kOpReady);  // 2 accepts: commit 2
    b.Op(kOpSnapshotResp, {1, 3, 1, 0, 0}).Op(kOpReady);       // a late, duplicate answer
    b.Op(kOpRestart).Op(kOpReady);
    seeds["snap-leader"] = b.bytes();
  }
  {
    // Leader: the snapshot transfer to 3 fails (ReportUnreachable).
    SeedBuilder b = ElectedLeader();
    b.Op(kOpCompact, {0, 1});             // Compact(1), store compacted too
    b.Op(kOpTick, {0}).Op(kOpReady);
    b.Op(kOpReply, {6, 0});               // transfer failed
    b.Op(kOpTick, {3}).Op(kOpReady).Op(kOpRestart).Op(kOpReady);
    seeds["snap-leader-failed"] = b.bytes();
  }
  {
    // Follower with a recovered log of 3 entries: installs a snapshot beyond
    // its log, appends after it (with an ENTRY_CONFIG adding learner 4),
    // learns from a second snapshot that its log already holds it (keep),
    // compacts, restarts from its snapshot, installs a third one and crashes
    // after persisting it, then ignores a malformed configuration entry.
    SeedBuilder b(3 << 3, 0);
    // kSnapshot: from 2, term current + 1, to 1, index last + 2, term = the
    // message's, the current configuration, time 500.
    b.Op(kOpSnapshot, {0, 4, 1, 2, 1, 2, 0, 5}).Op(kOpReady);
    // AppendConfig: from 2, current term, to 1, prev sel odd: prev pick =
    // last (its own term), two entries: a command, and a configuration (mode 2: add learner 4);
    // leader commit pick last + n; read round 0.
    b.Op(kOpAppendConfig, {0, 1, 1, 1, 0, 1, 2, 0x01}).Chunk("").Raw({0x21, 2, 0, 4, 3, 0});
    b.Op(kOpReady);
    // kSnapshot at the last index with the log's term: kept.
    b.Op(kOpSnapshot, {0, 1, 1, 1, 0, 0, 0}).Op(kOpReady);
    b.Op(kOpCompact, {0, 1}).Op(kOpRestart).Op(kOpReady);
    b.Op(kOpSnapshot, {0, 4, 1, 2, 1, 2, 0, 0});
    b.Op(kOpCrashInReady, {3}).Op(kOpReady);
    // Append of a configuration entry with bytes that are no valid
    // configuration (member id 0): every member ignores it.
    b.Op(kOpAppendConfig, {0, 1, 1, 1, 0, 1, 1, 0x61}).Chunk(std::string("\x0a\x02\x08\x00", 4));
    b.Raw({3, 0}).Op(kOpReady);
    seeds["snap-follower"] = b.bytes();
  }
}

// Seeds of membership change, leadership transfer and TimeoutNow.
void MembershipSeeds(std::map<std::string, std::string>& seeds) {
  {
    // A single voter adds learner 2, promotes it, transfers leadership to
    // it: TimeoutNow, and 2 campaigns with transfer set.
    SeedBuilder b(kSingleVoter, 0);
    b.Op(kOpTick, {7}).Op(kOpReady).Op(kOpReady);
    b.Op(kOpProposeChange, {0, 2, 2}).Op(kOpReady).Op(kOpReady);  // add learner 2 "n4"
    b.Op(kOpProposeChange, {1, 2, 0}).Op(kOpReady);               // promote 2
    b.Op(kOpReply, {0, 1}).Op(kOpReady);
    b.Op(kOpReply, {0, 1}).Op(kOpTick, {0}).Op(kOpReady);
    b.Op(kOpTransfer, {2}).Op(kOpReady);  // 2 is caught up: TimeoutNow
    b.Op(kOpReply, {3, 1}).Op(kOpReady);  // 2 asks for votes (transfer)
    b.Op(kOpProposeChange, {2, 1, 0}).Op(kOpReady);  // refused: not leader
    seeds["membership-transfer"] = b.bytes();
  }
  {
    // The leader of {1, 2, 3} removes itself; once 2 and 3 hold the entry
    // it is committed and the leader steps down with a TimeoutNow to 3.
    SeedBuilder b = ElectedLeader();
    b.Op(kOpProposeChange, {2, 1, 0}).Op(kOpReady);
    b.Op(kOpReply, {5, 1}).Op(kOpReady);
    b.Op(kOpReply, {4, 1}).Op(kOpReady);
    b.Op(kOpReply, {4, 1}).Op(kOpReady);
    b.Op(kOpTick, {0}).Op(kOpReady);
    seeds["membership-remove-self"] = b.bytes();
  }
  {
    // A follower told to take over (TimeoutNow), by a structured and by a
    // raw request; it campaigns at once without PreVote.
    SeedBuilder b(0, 0);
    b.Op(kOpTimeoutNow, {0, 1, 1}).Op(kOpReady);
    b.Op(kOpReply, {0, 1}).Op(kOpReady);
    TimeoutNowRequest raw;
    raw.set_term(7);
    b.Op(kOpRawProto2, {5, 1})  // 5 % 3 == 2: TimeoutNow; 5 & 4: sender fixed
        .Chunk(raw.SerializeAsString()).Op(kOpReady);
    seeds["timeout-now"] = b.bytes();
  }
}

// Seeds of raw snapshot protos and of members outside the voters.
void OtherSeeds(std::map<std::string, std::string>& seeds) {
  {
    // Raw InstallSnapshot request and response protos.
    SeedBuilder b(0, 0);
    InstallSnapshotRequest req;
    req.set_term(2);
    req.set_last_index(4);
    req.set_last_term(2);
    req.set_cluster_time_ms(1234);
    *req.mutable_config() = raft::VotersConfig({1, 2, 3});
    b.Op(kOpRawProto2, {6, 0})  // 6 % 3 == 0: InstallSnapshot; 6 & 4: sender fixed
        .Chunk(req.SerializeAsString()).Op(kOpReady);
    InstallSnapshotResponse resp;
    resp.set_term(2);
    resp.set_success(true);
    resp.set_match_index(4);
    b.Op(kOpRawProto2, {1, 1}).Chunk(resp.SerializeAsString()).Op(kOpReady);
    b.Op(kOpCompact, {0, 0}).Op(kOpRestart).Op(kOpReady);
    seeds["snap-raw"] = b.bytes();
  }
  {
    // This member starts as a learner ({1l, 2v, 3v}): no campaign; the
    // leader's configuration entry promotes it; then it campaigns.
    SeedBuilder b(0, 1 << 6);
    b.Op(kOpTick, {7}).Op(kOpReady);
    // AppendConfig with one configuration entry, mode 4: members 1, 2, 3 all voters.
    b.Op(kOpAppendConfig, {0, 4, 1, 1, 0, 1, 1, 0x21, 4, 7, 7, 0, 0}).Op(kOpReady);
    b.Op(kOpTick, {7}).Op(kOpReady);
    seeds["learner-promoted"] = b.bytes();
  }
  {
    // This member is joining ({2v, 3v}): a snapshot whose configuration
    // includes it as a learner, then an add-learner ENTRY_CONFIG it ignores
    // as invalid ... and a crash before persisting anything.
    SeedBuilder b(0, 2 << 6);
    // kSnapshot: from 2, term current + 1, to 1, index last + 2, term = the
    // message's, mode 4 config: ids 1, 2, 3, voters 2, 3.
    b.Op(kOpSnapshot, {0, 4, 1, 2, 1, 2, 4, 7, 6, 0}).Op(kOpReady);
    b.Op(kOpTick, {7}).Op(kOpReady);
    b.Op(kOpSnapshot, {1, 4, 1, 2, 2, 2, 0, 0}).Op(kOpCrashInReady, {1});
    b.Op(kOpReady);
    seeds["joining"] = b.bytes();
  }
}

std::map<std::string, std::string> ExtSeeds() {
  std::map<std::string, std::string> seeds;
  SnapshotSeeds(seeds);
  MembershipSeeds(seeds);
  OtherSeeds(seeds);
  return seeds;
}

void MaybeWriteSeeds() {
  const char* dir = std::getenv("RAFTKV_FUZZ_WRITE_SEEDS");
  if (dir == nullptr) return;
  for (const auto& [name, bytes] : ExtSeeds()) {
    const std::filesystem::path path = std::filesystem::path(dir) / ("seed-" + name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    FUZZ_ASSERT(out.good(), "cannot write %s", path.c_str());
    std::fprintf(stderr, "wrote %s\n", path.c_str());
  }
  std::_Exit(0);  // not exit(): libFuzzer reports an exit during a run as a crash
}

}  // namespace
}  // namespace raftkv::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool seeds_written = (raftkv::fuzz::MaybeWriteSeeds(), true);
  (void)seeds_written;
  raftkv::fuzz::Reader in(data, size);
  raftkv::fuzz::Harness harness(in);
  harness.Run();
  return 0;
}
