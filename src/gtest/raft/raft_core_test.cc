// Direct tests of one consensus core: requests stepped by hand, Ready
// inspected by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gtest/raft/core_test_util.h"
#include "gtest/raft/sim/sim_cluster.h"
#include "raft/raft.h"

namespace raftkv::raft {
namespace {

Config ThreeNodeConfig(uint64_t id) {
  Config c;
  c.heartbeat_ticks = 1;  // these tests count heartbeats in ticks
  c.tick_ms = 0;          // cluster time 0 unless a test sets it
  c.id = id;
  c.voters = {1, 2, 3};
  c.seed = 7;
  return c;
}

// Node 1 of {1,2,3}: durable term 5, log terms [1, 2, 5].
std::unique_ptr<Raft> MakeTermFiveCore() {
  HardState hs;
  hs.term = 5;
  hs.vote = 0;
  std::vector<Entry> log = {MakeEntry(1, 1), MakeEntry(2, 2), MakeEntry(3, 5)};
  auto r = std::make_unique<Raft>(ThreeNodeConfig(1), hs, std::move(log));
  // Drain whatever the fresh core wants to say.
  while (r->HasReady()) r->Advance(r->GetReady());
  return r;
}

Message VoteRequest(uint64_t from, uint64_t term, uint64_t last_index, uint64_t last_term,
                    bool pre_vote, uint64_t rpc_id) {
  Message m;
  m.type = MessageType::kVote;
  m.from = from;
  m.to = 1;
  m.rpc_id = rpc_id;
  m.vote.set_term(term);
  m.vote.set_candidate_id(from);
  m.vote.set_last_log_index(last_index);
  m.vote.set_last_log_term(last_term);
  m.vote.set_pre_vote(pre_vote);
  m.vote.set_to(1);
  return m;
}

// The single response to rpc_id in the next Ready (fails the test otherwise).
Message OnlyResponse(Raft& r, uint64_t rpc_id, Ready* ready_out = nullptr) {
  Ready rd = r.GetReady();
  std::vector<Message> found;
  for (const Message& m : rd.messages) {
    if (m.IsResponse() && m.rpc_id == rpc_id) found.push_back(m);
  }
  EXPECT_EQ(found.size(), 1u) << "want exactly one response carrying rpc_id " << rpc_id;
  r.Advance(rd);
  if (ready_out != nullptr) *ready_out = rd;
  return found.empty() ? Message{} : found.front();
}

TEST(RaftCoreTest, StaleTermAppendIsRejectedWithHigherTerm) {
  auto r = MakeTermFiveCore();
  Message m = Append2To1(77, 3, 3, 5, 3, {MakeEntry(4, 3)});
  r->Step(m);
  Message resp = OnlyResponse(*r, 77);
  EXPECT_EQ(resp.type, MessageType::kAppendResp);
  EXPECT_EQ(resp.to, 2u);
  EXPECT_FALSE(resp.append_resp.success());
  EXPECT_EQ(resp.append_resp.term(), 5u);
  EXPECT_EQ(r->term(), 5u);
  EXPECT_EQ(r->last_index(), 3u) << "a stale leader's entries must not be appended";
  EXPECT_EQ(r->commit_index(), 0u) << "a stale leader's commit index must not be followed";
}

TEST(RaftCoreTest, AppendWithMismatchedPrevIsRejectedWithHint) {
  auto r = MakeTermFiveCore();
  // prev 3/4, but node 1 has term 5 at index 3.
  Message m = Append2To1(78, 6, 3, 4, 0);
  r->Step(m);
  Message resp = OnlyResponse(*r, 78);
  EXPECT_FALSE(resp.append_resp.success());
  EXPECT_EQ(resp.append_resp.term(), 6u);
  EXPECT_EQ(resp.append_resp.rejected_index(), 3u);
  EXPECT_EQ(resp.append_resp.conflict_term(), 5u);
  EXPECT_EQ(resp.append_resp.conflict_index(), 3u);
  EXPECT_EQ(r->leader_id(), 2u);
}

// The follower's log has a stale suffix after the entries the leader sent:
// the leader's commit index covers only what the message proved to match.
TEST(RaftCoreTest, FollowerCommitsOnlyUpToLastNewEntry) {
  HardState hs;
  hs.term = 2;
  std::vector<Entry> log = {MakeEntry(1, 1), MakeEntry(2, 2), MakeEntry(3, 2, "stale"),
                            MakeEntry(4, 2, "stale")};
  Raft r(ThreeNodeConfig(1), hs, std::move(log));
  while (r.HasReady()) r.Advance(r.GetReady());
  // Leader 2 of term 3 holds [1/1, 2/2, 3/3, 4/3] with commit 4, and sends
  // only entry 2 (flow control).
  Message m = Append2To1(90, 3, 1, 1, 4, {MakeEntry(2, 2)});
  r.Step(m);
  Message resp = OnlyResponse(r, 90);
  EXPECT_TRUE(resp.append_resp.success());
  EXPECT_EQ(resp.append_resp.match_index(), 2u);
  EXPECT_LE(r.commit_index(), 2u) << "committed the stale entries 3..4";
}

TEST(RaftCoreTest, VoteForOutOfDateLogIsRefused) {
  // Lower last term.
  {
    auto r = MakeTermFiveCore();
    r->Step(VoteRequest(2, 6, 10, 2, false, 11));
    Ready rd;
    Message resp = OnlyResponse(*r, 11, &rd);
    EXPECT_EQ(resp.type, MessageType::kVoteResp);
    EXPECT_FALSE(resp.vote_resp.granted());
    EXPECT_NE(r->vote(), 2u);
    if (rd.hard_state) {
      EXPECT_NE(rd.hard_state->vote, 2u);
    }
  }
  // Same last term, shorter log.
  {
    auto r = MakeTermFiveCore();
    r->Step(VoteRequest(2, 6, 2, 5, false, 12));
    Message resp = OnlyResponse(*r, 12);
    EXPECT_FALSE(resp.vote_resp.granted());
    EXPECT_NE(r->vote(), 2u);
  }
  // PreVote for an out-of-date log: refused, and the term does not move.
  {
    auto r = MakeTermFiveCore();
    r->Step(VoteRequest(2, 6, 10, 2, true, 13));
    Message resp = OnlyResponse(*r, 13);
    EXPECT_FALSE(resp.vote_resp.granted());
    EXPECT_TRUE(resp.vote_resp.pre_vote());
    EXPECT_EQ(r->term(), 5u);
  }
}

TEST(RaftCoreTest, VoteForUpToDateLogIsGrantedAndDurableFirst) {
  auto r = MakeTermFiveCore();
  r->Step(VoteRequest(3, 6, 3, 5, false, 21));
  Ready rd;
  Message resp = OnlyResponse(*r, 21, &rd);
  EXPECT_TRUE(resp.vote_resp.granted());
  EXPECT_EQ(resp.vote_resp.term(), 6u);
  ASSERT_TRUE(rd.hard_state.has_value()) << "the vote must be in the Ready's hard state";
  EXPECT_EQ(rd.hard_state->term, 6u);
  EXPECT_EQ(rd.hard_state->vote, 3u);
  EXPECT_FALSE(rd.SendBeforePersist(resp)) << "a vote may only be sent once durable";
  // A second candidate of the same term is refused.
  r->Step(VoteRequest(2, 6, 3, 5, false, 22));
  Message second = OnlyResponse(*r, 22);
  EXPECT_FALSE(second.vote_resp.granted());
  EXPECT_EQ(r->vote(), 3u);
  // The same candidate asking again (a retry) is granted again.
  r->Step(VoteRequest(3, 6, 3, 5, false, 23));
  EXPECT_TRUE(OnlyResponse(*r, 23).vote_resp.granted());
}

TEST(RaftCoreTest, StaleVoteRequestIsAnsweredWithCurrentTerm) {
  auto r = MakeTermFiveCore();
  r->Step(VoteRequest(2, 4, 10, 4, false, 31));
  Message resp = OnlyResponse(*r, 31);
  EXPECT_FALSE(resp.vote_resp.granted());
  EXPECT_EQ(resp.vote_resp.term(), 5u);
  EXPECT_EQ(r->term(), 5u);
}

TEST(RaftCoreTest, RestartedCoreKeepsDurableVote) {
  HardState hs;
  hs.term = 7;
  hs.vote = 2;
  Raft r(ThreeNodeConfig(1), hs, {MakeEntry(1, 1)});
  EXPECT_EQ(r.term(), 7u);
  EXPECT_EQ(r.vote(), 2u);
  r.Step(VoteRequest(3, 7, 5, 6, false, 41));
  Message resp = OnlyResponse(r, 41);
  EXPECT_FALSE(resp.vote_resp.granted()) << "voted for 2 in term 7 before the restart";
}

TEST(RaftCoreTest, MisroutedRequestIsNotAnswered) {
  auto r = MakeTermFiveCore();
  Message m = VoteRequest(2, 6, 3, 5, false, 51);
  m.to = 3;
  m.vote.set_to(3);
  r->Step(m);
  Ready rd = r->GetReady();
  for (const Message& out : rd.messages) EXPECT_NE(out.rpc_id, 51u) << out.DebugString();
  r->Advance(rd);
  EXPECT_EQ(r->term(), 5u);
}

TEST(RaftCoreTest, FollowerRefusesProposalsAndReads) {
  auto r = MakeTermFiveCore();
  EXPECT_FALSE(r->Propose("x").accepted);
  EXPECT_FALSE(r->ReadIndex(1));
  EXPECT_EQ(r->last_index(), 3u);
}

TEST(RaftCoreTest, SingleNodeElectsItselfAndCommits) {
  Config c;
  c.heartbeat_ticks = 1;  // these tests count heartbeats in ticks
  c.tick_ms = 0;          // cluster time 0 unless a test sets it
  c.id = 1;
  c.voters = {1};
  HardState hs;
  Raft r(c, hs, {});
  for (int i = 0; i < 3 * c.election_ticks && r.role() != Role::kLeader; ++i) {
    r.Tick();
    while (r.HasReady()) r.Advance(r.GetReady());
  }
  ASSERT_EQ(r.role(), Role::kLeader);
  ProposeResult p = r.Propose("hello");
  ASSERT_TRUE(p.accepted);
  std::vector<Entry> applied;
  for (int i = 0; i < 10 && r.HasReady(); ++i) {
    Ready rd = r.GetReady();
    EXPECT_TRUE(rd.messages.empty());
    r.Advance(rd);
    applied.insert(applied.end(), rd.committed.begin(), rd.committed.end());
  }
  EXPECT_EQ(r.commit_index(), p.index);
  ASSERT_FALSE(applied.empty());
  EXPECT_EQ(applied.back().data(), "hello");
}

// A follower that restarts without entries it had acknowledged (recovery cut
// a damaged final record as a torn tail) answers the leader's appends with
// rejections of prev = its old match. The leader must replicate again from
// the follower's real end: it used to take those rejections for stale
// answers (rejected <= match) or clamp its probe to match + 1, so the
// follower never caught up while that leader lived (found by the
// integration test CrashDurability.BitFlipsAreRefused).
TEST(RaftCoreTest, LeaderRepairsFollowerThatLostAcknowledgedEntries) {
  HardState hs;
  hs.term = 1;
  std::vector<Entry> log = {MakeEntry(1, 1), MakeEntry(2, 1), MakeEntry(3, 1)};
  Raft r(ThreeNodeConfig(1), hs, std::move(log));
  auto drain = [&] {
    std::vector<Message> out;
    while (r.HasReady()) {
      Ready rd = r.GetReady();
      out.insert(out.end(), rd.messages.begin(), rd.messages.end());
      r.Advance(rd);
    }
    return out;
  };
  auto vote_resp = [](uint64_t term, bool pre_vote) {
    Message m;
    m.type = MessageType::kVoteResp;
    m.from = 2;
    m.to = 1;
    m.vote_resp.set_term(term);
    m.vote_resp.set_from(2);
    m.vote_resp.set_granted(true);
    m.vote_resp.set_pre_vote(pre_vote);
    return m;
  };
  for (int i = 0; i < 100 && r.role() != Role::kPreCandidate; ++i) {
    r.Tick();
    drain();
  }
  ASSERT_EQ(r.role(), Role::kPreCandidate);
  r.Step(vote_resp(2, true));
  drain();
  ASSERT_EQ(r.role(), Role::kCandidate);
  r.Step(vote_resp(2, false));
  drain();
  ASSERT_EQ(r.role(), Role::kLeader);
  ASSERT_EQ(r.last_index(), 4u);  // the leader's no-op

  auto append_resp = [](bool success, uint64_t match, uint64_t rejected, uint64_t last,
                        uint64_t seq = 0) {
    Message m;
    m.type = MessageType::kAppendResp;
    m.from = 2;
    m.to = 1;
    AppendEntriesResponse& a = m.append_resp;
    a.set_term(2);
    a.set_from(2);
    a.set_success(success);
    a.set_match_index(match);
    a.set_rejected_index(rejected);
    a.set_conflict_index(last + 1);
    a.set_last_log_index(last);
    a.set_seq(seq);
    return m;
  };
  // Member 2 acknowledges everything...
  r.Step(append_resp(true, 4, 0, 4));
  drain();
  // ... and a rejection it sent earlier (of a message sent before that
  // acknowledgement: seq 1) arrives late. Stale: the match stays.
  r.Step(append_resp(false, 0, 4, 3, 1));
  drain();
  ASSERT_NE(r.ProgressOf(2), nullptr);
  EXPECT_EQ(r.ProgressOf(2)->match(), 4u) << "an overtaken rejection lowered the match";
  // It restarts having lost entry 4, and rejects the next heartbeat (prev 4).
  uint64_t heartbeat_seq = 0;
  for (int i = 0; i < 10 && heartbeat_seq == 0; ++i) {
    r.Tick();
    for (const Message& m : drain()) {
      if (m.type == MessageType::kAppend && m.to == 2) heartbeat_seq = m.append.seq();
    }
  }
  ASSERT_GT(heartbeat_seq, 1u);
  r.Step(append_resp(false, 0, 4, 3, heartbeat_seq));
  EXPECT_EQ(r.ProgressOf(2)->match(), 3u);
  std::vector<Message> sent = drain();
  for (int i = 0; i < 10; ++i) {
    r.Tick();
    std::vector<Message> more = drain();
    sent.insert(sent.end(), more.begin(), more.end());
  }
  bool resent = false;
  std::string seen;
  for (const Message& m : sent) {
    if (m.type != MessageType::kAppend || m.to != 2) continue;
    seen += " prev=" + std::to_string(m.append.prev_log_index());
    if (m.append.prev_log_index() == 3 && m.append.entries_size() == 1 &&
        m.append.entries(0).index() == 4) {
      resent = true;
    }
  }
  EXPECT_TRUE(resent) << "appends to member 2 after its rejection:" << seen;
}

// ---- malformed peer messages (found by src/fuzz/fuzz_raft_step) ----

// Node 1 of MakeTermFiveCore() after leader 2 of term 5 committed all of its
// log [1/1, 2/2, 3/5].
std::unique_ptr<Raft> MakeCommittedFollower() {
  auto r = MakeTermFiveCore();
  Message m = Append2To1(1, 5, 3, 5, 3);
  r->Step(m);
  EXPECT_TRUE(OnlyResponse(*r, 1).append_resp.success());
  EXPECT_EQ(r->commit_index(), 3u);
  return r;
}

// An AppendEntries whose entries would replace a committed entry comes from
// a faulty leader: it is refused, and used to hit the CHECK against
// truncating committed entries (a remote crash).
TEST(RaftCoreTest, AppendReplacingACommittedEntryIsRefused) {
  auto r = MakeCommittedFollower();
  // Entry 2/3 would replace the committed entry 2/2.
  Message m = Append2To1(2, 5, 1, 1, 3, {MakeEntry(2, 3, "rewritten")});
  r->Step(m);
  Message resp = OnlyResponse(*r, 2);
  EXPECT_FALSE(resp.append_resp.success());
  EXPECT_EQ(resp.append_resp.conflict_index(), 4u);
  EXPECT_EQ(r->last_index(), 3u);
  EXPECT_EQ(r->TermAt(2), 2u);
  EXPECT_EQ(r->commit_index(), 3u);
}

// Likewise a prev_log_term that contradicts a committed entry (this used to
// hit the CHECK in the log-matching check).
TEST(RaftCoreTest, AppendWhosePrevContradictsACommittedEntryIsRefused) {
  auto r = MakeCommittedFollower();
  // prev 2/1, but the committed entry 2 has term 2.
  Message m = Append2To1(3, 5, 2, 1, 0);
  r->Step(m);
  Message resp = OnlyResponse(*r, 3);
  EXPECT_FALSE(resp.append_resp.success());
  EXPECT_EQ(r->last_index(), 3u);
  EXPECT_EQ(r->commit_index(), 3u);
}

Message AppendWithEntries(uint64_t term, uint64_t prev, uint64_t prev_term,
                          std::vector<Entry> entries) {
  AppendEntriesRequest req;
  req.set_term(term);
  req.set_leader_id(2);
  req.set_to(1);
  req.set_prev_log_index(prev);
  req.set_prev_log_term(prev_term);
  for (Entry& e : entries) *req.add_entries() = std::move(e);
  return AppendRequestMessage(&req);
}

TEST(RaftMessageTest, ConversionsTakeSenderAndRecipient) {
  AppendEntriesRequest append;
  append.set_leader_id(2);
  append.set_to(1);
  append.set_term(4);
  Message m = AppendRequestMessage(&append);
  EXPECT_EQ(m.type, MessageType::kAppend);
  EXPECT_EQ(m.from, 2u);
  EXPECT_EQ(m.to, 1u);
  EXPECT_EQ(m.Term(), 4u);
  RequestVoteRequest vote;
  vote.set_candidate_id(3);
  vote.set_to(1);
  m = VoteRequestMessage(&vote);
  EXPECT_EQ(m.type, MessageType::kVote);
  EXPECT_EQ(m.from, 3u);
  EXPECT_EQ(m.to, 1u);
  // A reply comes from the member called, whatever it claims.
  AppendEntriesResponse append_resp;
  append_resp.set_from(9);
  m = AppendResponseMessage(2, 1, &append_resp);
  EXPECT_EQ(m.type, MessageType::kAppendResp);
  EXPECT_EQ(m.from, 2u);
  EXPECT_EQ(m.to, 1u);
  RequestVoteResponse vote_resp;
  vote_resp.set_from(9);
  m = VoteResponseMessage(3, 1, &vote_resp);
  EXPECT_EQ(m.type, MessageType::kVoteResp);
  EXPECT_EQ(m.from, 3u);
}

TEST(RaftMessageTest, CheckPeerMessageAcceptsWhatLeadersSend) {
  EXPECT_TRUE(CheckPeerMessage(AppendWithEntries(5, 0, 0, {})).ok());
  EXPECT_TRUE(CheckPeerMessage(AppendWithEntries(5, 3, 2, {})).ok());
  EXPECT_TRUE(CheckPeerMessage(AppendWithEntries(5, 0, 0, {MakeEntry(1, 1), MakeEntry(2, 5)})).ok());
  EXPECT_TRUE(CheckPeerMessage(AppendWithEntries(5, 2, 2, {MakeEntry(3, 2), MakeEntry(4, 2)})).ok());
  EXPECT_TRUE(CheckPeerMessage(VoteRequest(2, 6, 3, 5, true, 1)).ok());
}

// Every one of these used to reach the core, where the entries broke the
// log's invariants: a gap or a wrong index hit the CHECK in AppendToLog (a
// remote crash); terms out of order or above the message's term made a log
// the core refuses (CHECK) when the node restarts; terms near 2^64 wrap.
TEST(RaftMessageTest, CheckPeerMessageRefusesMalformedAppends) {
  // Entries that do not follow prev_log_index.
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, 0, 0, {MakeEntry(5, 1)})).ok());
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, 0, 0, {MakeEntry(1, 1), MakeEntry(1, 1)})).ok());
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, 0, 0, {MakeEntry(1, 1), MakeEntry(3, 1)})).ok());
  // Terms: zero, decreasing, below prev_log_term, above the message's term.
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, 0, 0, {MakeEntry(1, 0)})).ok());
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, 0, 0, {MakeEntry(1, 3), MakeEntry(2, 2)})).ok());
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, 1, 4, {MakeEntry(2, 3)})).ok());
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, 0, 0, {MakeEntry(1, 6)})).ok());
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, 1, 6, {})).ok());
  // Index overflow and terms out of range.
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(5, UINT64_MAX, 1, {MakeEntry(0, 1)})).ok());
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(kMaxTerm + 1, 0, 0, {})).ok());
  EXPECT_FALSE(CheckPeerMessage(AppendWithEntries(UINT64_MAX, 0, 0, {})).ok());
  EXPECT_FALSE(CheckPeerMessage(VoteRequest(2, UINT64_MAX, 3, 5, false, 1)).ok());
  EXPECT_FALSE(CheckPeerMessage(VoteRequest(2, 6, 3, 7, false, 1)).ok());  // last_log_term > term
  RequestVoteResponse vote_resp;
  vote_resp.set_term(UINT64_MAX);
  EXPECT_FALSE(CheckPeerMessage(VoteResponseMessage(2, 1, &vote_resp)).ok());
}

// Member 1 of a fresh 3-member cluster, elected leader by member 2's vote,
// with its first Ready (the no-op append) handled.
Raft ElectMember1(Config c = ThreeNodeConfig(1), HardState hs = {}, std::vector<Entry> log = {}) {
  c.pre_vote = false;
  Raft r(c, hs, std::move(log));
  for (int i = 0; i < 3 * c.election_ticks && r.role() != Role::kCandidate; ++i) r.Tick();
  EXPECT_EQ(r.role(), Role::kCandidate);
  Message grant;
  grant.type = MessageType::kVoteResp;
  grant.from = 2;
  grant.to = 1;
  grant.vote_resp.set_term(r.term());
  grant.vote_resp.set_from(2);
  grant.vote_resp.set_granted(true);
  r.Step(grant);
  while (r.HasReady()) r.Advance(r.GetReady());
  return r;
}

// A follower far behind (a new member, one back from a restart) draws at
// most --max_inflight_bytes of entries from the leader at once (plus the
// message that crosses it), not --max_inflight_appends full messages: a
// burst that large, built and sent in one pass of the I/O loop, held up the
// heartbeats to the other followers until they elected another leader.
TEST(RaftCoreTest, AFarBehindFollowerIsSentAtMostTheBytesInFlight) {
  Config c = ThreeNodeConfig(1);
  c.max_append_bytes = 1000;   // two entries per message (500 bytes counted each)
  c.max_inflight_bytes = 4000;  // four messages, of a window of 64
  HardState hs;
  hs.term = 1;
  std::vector<Entry> log;
  for (uint64_t i = 1; i <= 200; ++i) log.push_back(MakeEntry(i, 1, std::string(468, 'x')));
  Raft r = ElectMember1(c, hs, std::move(log));
  ASSERT_EQ(r.role(), Role::kLeader);
  const uint64_t last = r.last_index();  // 201: the leader's no-op
  auto answer = [&](bool success, uint64_t match, uint64_t rejected, uint64_t follower_last) {
    Message m;
    m.type = MessageType::kAppendResp;
    m.from = 2;
    m.to = 1;
    AppendEntriesResponse& a = m.append_resp;
    a.set_term(r.term());
    a.set_from(2);
    a.set_success(success);
    a.set_match_index(match);
    a.set_rejected_index(rejected);
    a.set_conflict_index(follower_last + 1);
    a.set_last_log_index(follower_last);
    r.Step(m);
    uint64_t bytes = 0;
    uint64_t highest = 0;
    while (r.HasReady()) {
      Ready rd = r.GetReady();
      for (const Message& out : rd.messages) {
        if (out.type != MessageType::kAppend || out.to != 2) continue;
        for (const Entry& e : out.append.entries()) {
          bytes += e.data().size();
          highest = std::max(highest, e.index());
        }
      }
      r.Advance(rd);
    }
    return std::make_pair(bytes, highest);
  };
  // Member 2 has nothing: it rejects the probe at prev = last, then accepts
  // the probe at prev 0 and enters the replicate state.
  // (The probe's prev is the last index before or after the no-op: one of
  // these two rejections is stale and ignored.)
  answer(false, 0, last, 0);
  answer(false, 0, last - 1, 0);
  auto [bytes, highest] = answer(true, 0, 0, 0);
  EXPECT_GT(bytes, 0u);
  EXPECT_LE(bytes, 4000u) << "the first burst to a follower 200 entries behind";
  EXPECT_LT(highest, 20u);
  // Each acknowledgement releases about what it acknowledges.
  for (int i = 0; i < 5 && highest < last; ++i) {
    const uint64_t acked = std::min<uint64_t>(highest, 2 * (i + 1));
    auto [more, top] = answer(true, acked, 0, acked);
    EXPECT_LE(more, 1000u) << "after acknowledging " << acked;
    if (top > 0) highest = top;
  }
}

// A leader that receives an AppendEntries of its own term (from a faulty
// member: there is one leader per term) refuses it but still answers: the
// service keeps the RPC, and its reply callback, until the core replies. It
// used to return without a reply (and to LOG(DFATAL), a crash in debug builds).
TEST(RaftCoreTest, LeaderAnswersAnAppendOfItsOwnTerm) {
  Raft r = ElectMember1();
  ASSERT_EQ(r.role(), Role::kLeader);
  Message m = AppendWithEntries(r.term(), 0, 0, {});
  m.from = 3;
  m.append.set_leader_id(3);
  m.rpc_id = 44;
  r.Step(m);
  Message resp = OnlyResponse(r, 44);
  EXPECT_FALSE(resp.append_resp.success());
  EXPECT_EQ(resp.append_resp.term(), r.term());
  EXPECT_EQ(r.role(), Role::kLeader);
}

// A success reply whose match index lies beyond the leader's log is ignored.
// It used to become the follower's match, and with match = 2^64 - 1 the next
// index wrapped to 0: the next probe read the entry before the log's start
// (out of bounds; found by the fuzzer as a UBSan pointer overflow).
TEST(RaftCoreTest, LeaderIgnoresAMatchIndexBeyondItsLog) {
  Raft r = ElectMember1();
  ASSERT_EQ(r.role(), Role::kLeader);
  auto reply = [&](uint64_t match) {
    AppendEntriesResponse resp;
    resp.set_term(r.term());
    resp.set_success(true);
    resp.set_match_index(match);
    r.Step(AppendResponseMessage(2, 1, &resp));
  };
  reply(UINT64_MAX);
  ASSERT_NE(r.ProgressOf(2), nullptr);
  EXPECT_LE(r.ProgressOf(2)->match(), r.last_index());
  r.ReportUnreachable(2);
  reply(r.last_index());  // a genuine reply: the follower holds the no-op
  EXPECT_EQ(r.ProgressOf(2)->match(), r.last_index());
  EXPECT_EQ(r.ProgressOf(2)->next(), r.last_index() + 1);
  r.ReportUnreachable(2);
  r.Tick();  // heartbeat: probes follower 2 from next
  Ready rd = r.GetReady();
  bool probed = false;
  for (const Message& m : rd.messages) {
    if (m.to == 2 && m.type == MessageType::kAppend) {
      probed = true;
      EXPECT_EQ(m.append.prev_log_index(), r.last_index());
    }
  }
  EXPECT_TRUE(probed);
}


Raft ElectSingle(int tick_ms, std::vector<Entry> log) {
  Config c;
  c.heartbeat_ticks = 1;  // these tests count heartbeats in ticks
  c.tick_ms = 0;          // cluster time 0 unless a test sets it
  c.id = 1;
  c.voters = {1};
  c.tick_ms = tick_ms;
  HardState hs;
  if (!log.empty()) {
    hs.term = log.back().term();
    hs.vote = 1;
  }
  Raft r(c, hs, std::move(log));
  for (int i = 0; i < 3 * c.election_ticks && r.role() != Role::kLeader; ++i) {
    r.Tick();
    while (r.HasReady()) r.Advance(r.GetReady());
  }
  return r;
}

// Entries carry the leader's cluster time: it advances with the leader's
// ticks and a new leader continues from its last entry's time, so the time
// never goes back along the log (sessions expire by it on every replica).
TEST(RaftCoreTest, ClusterTimeAdvancesWithLeaderTicksAndSurvivesElections) {
  Raft r = ElectSingle(10, {});
  ASSERT_EQ(r.role(), Role::kLeader);
  const uint64_t noop_time = r.EntryAt(r.last_index()).cluster_time_ms();
  for (int i = 0; i < 7; ++i) r.Tick();
  ASSERT_TRUE(r.Propose("a").accepted);
  EXPECT_EQ(r.EntryAt(r.last_index()).cluster_time_ms(), noop_time + 70);
  for (int i = 0; i < 3; ++i) r.Tick();
  ASSERT_TRUE(r.Propose("b").accepted);
  const uint64_t last_time = r.EntryAt(r.last_index()).cluster_time_ms();
  EXPECT_EQ(last_time, noop_time + 100);
  while (r.HasReady()) r.Advance(r.GetReady());

  // "Restart" with that log: the next leader's no-op starts at last_time.
  std::vector<Entry> log;
  for (uint64_t i = 1; i <= r.last_index(); ++i) log.push_back(r.EntryAt(i));
  Raft next = ElectSingle(10, log);
  ASSERT_EQ(next.role(), Role::kLeader);
  EXPECT_EQ(next.EntryAt(next.last_index()).cluster_time_ms(), last_time);
  uint64_t prev = 0;
  for (uint64_t i = 1; i <= next.last_index(); ++i) {
    EXPECT_GE(next.EntryAt(i).cluster_time_ms(), prev) << "at index " << i;
    prev = next.EntryAt(i).cluster_time_ms();
  }
}


// ---- snapshots, membership, transfer (message level) ----

// Member 1 restarted from a snapshot at 10/3 with entries 11..12 (term 3).
Raft SnapshotFollower() {
  SnapshotRef base;
  base.index = 10;
  base.term = 3;
  base.config = VotersConfig({1, 2, 3});
  HardState hs;
  hs.term = 3;
  Raft r(ThreeNodeConfig(1), hs, base, {MakeEntry(11, 3), MakeEntry(12, 3)});
  while (r.HasReady()) r.Advance(r.GetReady());
  return r;
}

TEST(RaftCoreTest, RestartFromSnapshotKnowsItsBase) {
  Raft r = SnapshotFollower();
  EXPECT_EQ(r.first_index(), 11u);
  EXPECT_EQ(r.last_index(), 12u);
  EXPECT_EQ(r.commit_index(), 10u);
  EXPECT_EQ(r.TermAt(10), 3u);
  EXPECT_EQ(r.TermAt(9), 0u);  // compacted
  EXPECT_EQ(r.voters(), (std::vector<uint64_t>{1, 2, 3}));
}

// An AppendEntries starting inside the follower's snapshot is trimmed to it:
// the covered entries are committed, so they match the leader's.
TEST(RaftCoreTest, AppendStartingInsideTheSnapshotIsTrimmed) {
  Raft r = SnapshotFollower();
  std::vector<Entry> entries;
  for (uint64_t i = 6; i <= 13; ++i) entries.push_back(MakeEntry(i, i <= 12 ? 3 : 4));
  r.Step(Append2To1(7, 4, 5, 2, 13, entries));
  Message resp = OnlyResponse(r, 7);
  EXPECT_TRUE(resp.append_resp.success());
  EXPECT_EQ(resp.append_resp.match_index(), 13u);
  EXPECT_EQ(r.last_index(), 13u);
  EXPECT_EQ(r.commit_index(), 13u);
  // A heartbeat from far below (prev 0) is a success at the snapshot.
  r.Step(Append2To1(8, 4, 0, 0, 0));
  resp = OnlyResponse(r, 8);
  EXPECT_TRUE(resp.append_resp.success());
  EXPECT_GE(resp.append_resp.match_index(), 10u);
}

TEST(RaftCoreTest, SnapshotThatTheLogMatchesKeepsTheLog) {
  Raft r = SnapshotFollower();
  r.Step(SnapshotFrom2(3, 3, 11, 3, {1, 2, 3, 4}));
  Ready rd;
  Message resp = OnlyResponse(r, 3, &rd);
  EXPECT_FALSE(rd.snapshot.has_value());
  EXPECT_TRUE(resp.snapshot_resp.success());
  EXPECT_EQ(resp.snapshot_resp.match_index(), 11u);
  EXPECT_EQ(r.last_index(), 12u);
  EXPECT_EQ(r.commit_index(), 11u);
}

TEST(RaftCoreTest, SnapshotTheLogDoesNotMatchReplacesIt) {
  Raft r = SnapshotFollower();
  r.Step(SnapshotFrom2(3, 5, 20, 5, {1, 2, 3, 4}));
  Ready rd;
  Message resp = OnlyResponse(r, 3, &rd);
  ASSERT_TRUE(rd.snapshot.has_value());
  EXPECT_EQ(rd.snapshot->index, 20u);
  EXPECT_EQ(rd.snapshot->term, 5u);
  ASSERT_TRUE(rd.config.has_value());
  EXPECT_EQ(DescribeMembership(*rd.config), "1v,2v,3v,4v");
  EXPECT_TRUE(rd.committed.empty());  // nothing below the snapshot is applied
  EXPECT_TRUE(resp.snapshot_resp.success());
  EXPECT_EQ(resp.snapshot_resp.match_index(), 20u);
  EXPECT_EQ(r.last_index(), 20u);
  EXPECT_EQ(r.first_index(), 21u);
  EXPECT_EQ(r.commit_index(), 20u);
  // A stale-term snapshot is refused with the current term.
  r.Step(SnapshotFrom2(4, 4, 30, 4, {1, 2, 3, 4}));
  resp = OnlyResponse(r, 4);
  EXPECT_FALSE(resp.snapshot_resp.success());
  EXPECT_EQ(resp.snapshot_resp.term(), 5u);
}

// Found by fuzz_raft_step: an append trimmed to the snapshot used to be
// taken whatever term it gave the snapshot index; entries of a foreign
// history then followed the snapshot (and a restart CHECKed). No correct
// leader sends that: it is refused, and the log is unchanged.
TEST(RaftCoreTest, AppendTrimmedToTheSnapshotWithAForeignTermIsRefused) {
  Raft r = SnapshotFollower();
  std::vector<Entry> entries;
  for (uint64_t i = 9; i <= 13; ++i) entries.push_back(MakeEntry(i, 2));
  r.Step(Append2To1(7, 4, 8, 2, 13, entries));
  Message resp = OnlyResponse(r, 7);
  EXPECT_FALSE(resp.append_resp.success());
  EXPECT_EQ(r.last_index(), 12u);
  EXPECT_EQ(r.TermAt(12), 3u);
  EXPECT_EQ(r.commit_index(), 10u);
}

// Found by fuzz_raft_step: indexes near 2^64 made the core's arithmetic
// (last index + 1) wrap.
TEST(RaftMessageTest, CheckPeerMessageRefusesIndexesOutOfRange) {
  Message ok = SnapshotFrom2(1, 3, 20, 3, {1, 2, 3, 4});
  EXPECT_TRUE(CheckPeerMessage(ok).ok());
  EXPECT_FALSE(CheckPeerMessage(SnapshotFrom2(1, 3, kMaxIndex + 1, 3, {1, 2, 3, 4})).ok());
  EXPECT_FALSE(CheckPeerMessage(SnapshotFrom2(1, 3, UINT64_MAX, 3, {1, 2, 3, 4})).ok());
  EXPECT_FALSE(CheckPeerMessage(Append2To1(1, 3, kMaxIndex, 3, 0, {MakeEntry(kMaxIndex + 1, 3)})).ok());
  EXPECT_TRUE(CheckPeerMessage(Append2To1(1, 3, kMaxIndex - 1, 3, 0, {MakeEntry(kMaxIndex, 3)})).ok());
}

// Found by fuzz_raft_step: requests queued before a configuration change
// (here a pre-vote, then a snapshot whose configuration leaves member 3
// out) went out in the same Ready to a server the service no longer knows.
TEST(RaftCoreTest, QueuedRequestsToServersNoLongerMembersAreDropped) {
  Raft r = SnapshotFollower();
  for (int i = 0; i < 20 && r.role() == Role::kFollower; ++i) r.Tick();
  ASSERT_NE(r.role(), Role::kFollower);  // (pre-)vote requests to 2 and 3 queued
  r.Step(SnapshotFrom2(9, r.term() + 1, 20, r.term() + 1, {1, 2, 4}));
  Ready rd = r.GetReady();
  ASSERT_TRUE(rd.config.has_value());
  for (const Message& out : rd.messages) {
    if (out.IsResponse()) continue;
    EXPECT_NE(out.to, 3u) << out.DebugString();
  }
  bool answered = false;
  for (const Message& out : rd.messages) answered |= out.rpc_id == 9 && out.IsResponse();
  EXPECT_TRUE(answered);
}

// Leader 1 with followers 2 (answers) and 3 (silent); `n` proposals
// committed by 1+2 and applied, so the leader may compact.
void CommitThrough2(Raft& r, int n) {
  for (int i = 0; i < n; ++i) ASSERT_TRUE(r.Propose("v").accepted);
  Ready rd = r.GetReady();
  r.Advance(rd);
  AppendEntriesResponse resp;
  resp.set_term(r.term());
  resp.set_success(true);
  resp.set_match_index(r.last_index());
  r.Step(AppendResponseMessage(2, 1, &resp));
  while (r.HasReady()) r.Advance(r.GetReady());
  ASSERT_EQ(r.commit_index(), r.last_index());
}

TEST(RaftCoreTest, LeaderSendsItsSnapshotWhenTheFollowerNeedsCompactedEntries) {
  Raft r = ElectMember1();
  CommitThrough2(r, 5);
  ASSERT_TRUE(r.Compact(4));
  EXPECT_FALSE(r.Compact(4));                  // not above the snapshot
  EXPECT_FALSE(r.Compact(r.last_index() + 1));  // not applied
  // Member 3 rejects a probe: it has nothing.
  AppendEntriesResponse rej;
  rej.set_term(r.term());
  rej.set_success(false);
  rej.set_rejected_index(r.ProgressOf(3)->next() - 1);
  rej.set_conflict_index(1);
  rej.set_last_log_index(0);
  r.ReportUnreachable(3);
  r.Step(AppendResponseMessage(3, 1, &rej));
  bool sent = false;
  for (int i = 0; i < 3 && !sent; ++i) {
    r.Tick();
    Ready rd = r.GetReady();
    for (const Message& m : rd.messages) {
      if (m.to == 3 && m.type == MessageType::kSnapshot) {
        sent = true;
        EXPECT_EQ(m.snapshot.last_index(), 4u);
        EXPECT_EQ(m.snapshot.last_term(), r.TermAt(4));
      }
      // Never an AppendEntries needing a compacted term.
      if (m.to == 3 && m.type == MessageType::kAppend) {
        EXPECT_TRUE(m.append.prev_log_index() == 0 || m.append.prev_log_index() >= 4);
      }
    }
    r.Advance(rd);
  }
  ASSERT_TRUE(sent);
  EXPECT_EQ(r.ProgressOf(3)->state(), Progress::State::kSnapshot);
  InstallSnapshotResponse ok;
  ok.set_term(r.term());
  ok.set_success(true);
  ok.set_match_index(4);
  r.Step(SnapshotResponseMessage(3, 1, ok));
  EXPECT_EQ(r.ProgressOf(3)->match(), 4u);
  EXPECT_NE(r.ProgressOf(3)->state(), Progress::State::kSnapshot);
}

TEST(RaftCoreTest, MembershipChangeRules) {
  Raft r = ElectMember1();
  // The no-op of this term is not committed yet.
  ProposeResult p = r.ProposeMembershipChange({ChangeType::kAddLearner, 4, "h:4"});
  EXPECT_FALSE(p.accepted);
  EXPECT_NE(p.error.message().find("not committed an entry of its term"), std::string::npos) << p.error;
  CommitThrough2(r, 1);
  p = r.ProposeMembershipChange({ChangeType::kAddLearner, 4, "h:4"});
  ASSERT_TRUE(p.accepted) << p.error;
  EXPECT_EQ(DescribeMembership(r.membership()), "1v,2v,3v,4l");
  EXPECT_NE(r.ProgressOf(4), nullptr);  // replicated to at once
  // One change at a time.
  p = r.ProposeMembershipChange({ChangeType::kRemove, 3, ""});
  EXPECT_FALSE(p.accepted);
  EXPECT_NE(p.error.message().find("not committed yet"), std::string::npos) << p.error;
  CommitThrough2(r, 0);
  // The learner is far behind: promotion refused.
  Config c = ThreeNodeConfig(1);
  for (uint64_t i = 0; i < c.promote_max_lag + 5; ++i) ASSERT_TRUE(r.Propose("v").accepted);
  CommitThrough2(r, 0);
  p = r.ProposeMembershipChange({ChangeType::kPromote, 4, ""});
  EXPECT_FALSE(p.accepted);
  EXPECT_NE(p.error.message().find("behind"), std::string::npos) << p.error;
  // Invalid changes.
  EXPECT_FALSE(r.ProposeMembershipChange({ChangeType::kAddLearner, 2, "h:9"}).accepted);
  EXPECT_FALSE(r.ProposeMembershipChange({ChangeType::kPromote, 2, ""}).accepted);
  EXPECT_FALSE(r.ProposeMembershipChange({ChangeType::kRemove, 9, ""}).accepted);
}

// A leader that removes itself counts only the remaining voters, and once
// the change commits hands over (TimeoutNow) and steps down.
TEST(RaftCoreTest, RemovedLeaderStepsDownAfterCommit) {
  Raft r = ElectMember1();
  CommitThrough2(r, 1);
  ProposeResult p = r.ProposeMembershipChange({ChangeType::kRemove, 1, ""});
  ASSERT_TRUE(p.accepted) << p.error;
  EXPECT_FALSE(r.IsVoter(1));
  Ready rd = r.GetReady();
  r.Advance(rd);
  // Member 2 alone is not a majority of {2, 3}.
  AppendEntriesResponse resp;
  resp.set_term(r.term());
  resp.set_success(true);
  resp.set_match_index(p.index);
  AppendEntriesResponse resp3 = resp;  // AppendResponseMessage swaps it out
  r.Step(AppendResponseMessage(2, 1, &resp));
  EXPECT_EQ(r.role(), Role::kLeader);
  EXPECT_LT(r.commit_index(), p.index);
  r.Step(AppendResponseMessage(3, 1, &resp3));
  EXPECT_GE(r.commit_index(), p.index);
  EXPECT_EQ(r.role(), Role::kFollower);
  rd = r.GetReady();
  bool timeout_now = false;
  for (const Message& m : rd.messages) timeout_now |= m.type == MessageType::kTimeoutNow;
  EXPECT_TRUE(timeout_now);
  // Not a voter: it never campaigns.
  for (int i = 0; i < 100; ++i) r.Tick();
  EXPECT_EQ(r.role(), Role::kFollower);
}

TEST(RaftCoreTest, TransferWaitsForTheTargetThenSendsTimeoutNow) {
  Raft r = ElectMember1();
  CommitThrough2(r, 2);
  EXPECT_FALSE(r.TransferLeadership(1).ok());
  EXPECT_FALSE(r.TransferLeadership(9).ok());
  ASSERT_TRUE(r.TransferLeadership(3).ok());  // 3 is behind: no TimeoutNow yet
  EXPECT_FALSE(r.Propose("x").accepted);
  EXPECT_NE(r.Propose("x").error.message().find("transfer"), std::string::npos);
  Ready rd = r.GetReady();
  for (const Message& m : rd.messages) EXPECT_NE(m.type, MessageType::kTimeoutNow);
  r.Advance(rd);
  AppendEntriesResponse resp;
  resp.set_term(r.term());
  resp.set_success(true);
  resp.set_match_index(r.last_index());
  r.Step(AppendResponseMessage(3, 1, &resp));
  rd = r.GetReady();
  bool sent = false;
  for (const Message& m : rd.messages) sent |= m.type == MessageType::kTimeoutNow && m.to == 3;
  EXPECT_TRUE(sent);
  // Given up after an election timeout: proposals accepted again.
  for (int i = 0; i < 12; ++i) r.Tick();
  EXPECT_EQ(r.transfer_target(), 0u);
  EXPECT_TRUE(r.Propose("y").accepted);
}

// The term-5 leader 2 asks member 1 to take over.
void StepTimeoutNowFrom2InTerm5(Raft& r) {
  TimeoutNowRequest req;
  req.set_term(5);
  req.set_leader_id(2);
  req.set_to(1);
  r.Step(TimeoutNowMessage(req));
}

// The target of TimeoutNow campaigns at once, and voters grant it despite
// hearing from the leader (stickiness does not apply to transfers).
TEST(RaftCoreTest, TimeoutNowStartsAnElectionVotersAccept) {
  auto rp = MakeTermFiveCore();  // member 1, follower
  Raft& r = *rp;
  StepTimeoutNowFrom2InTerm5(r);
  EXPECT_EQ(r.role(), Role::kCandidate);
  EXPECT_EQ(r.term(), 6u);
  Ready rd = r.GetReady();
  int votes = 0;
  for (const Message& m : rd.messages) {
    if (m.type == MessageType::kVote) {
      ++votes;
      EXPECT_TRUE(m.vote.transfer());
      EXPECT_FALSE(m.vote.pre_vote());
    }
  }
  EXPECT_EQ(votes, 2);
  // A voter in lease grants a transfer vote.
  auto vp = MakeTermFiveCore();
  Raft& v = *vp;
  v.Step(Append2To1(1, 5, 3, 5, 3));
  v.Advance(v.GetReady());
  Message vote = VoteRequest(3, 6, 3, 5, false, 9);
  v.Step(vote);
  EXPECT_FALSE(OnlyResponse(v, 9).vote_resp.granted());  // stickiness
  vote.vote.set_transfer(true);
  vote.rpc_id = 10;
  v.Step(vote);
  EXPECT_TRUE(OnlyResponse(v, 10).vote_resp.granted());
}

// A member holding its campaigns (its store refuses writes) lets election
// timeouts pass and ignores TimeoutNow, but still votes; released, it
// campaigns at its next tick.
TEST(RaftCoreTest, HeldCampaignsStartNoElectionButVotesGoOn) {
  auto rp = MakeTermFiveCore();  // member 1, follower in term 5
  Raft& r = *rp;
  r.HoldCampaigns(true);
  EXPECT_TRUE(r.campaigns_held());
  for (int i = 0; i < 4 * Config().election_ticks; ++i) r.Tick();  // twice the longest timeout
  EXPECT_EQ(r.role(), Role::kFollower);
  EXPECT_EQ(r.term(), 5u);
  StepTimeoutNowFrom2InTerm5(r);
  EXPECT_EQ(r.role(), Role::kFollower);
  EXPECT_EQ(r.term(), 5u);
  Ready rd = r.GetReady();
  for (const Message& m : rd.messages) EXPECT_NE(m.type, MessageType::kVote);
  r.Advance(rd);
  // It votes for a candidate whose log is as up to date.
  r.Step(VoteRequest(3, 6, 3, 5, false, 11));
  EXPECT_TRUE(OnlyResponse(r, 11).vote_resp.granted());
  EXPECT_EQ(r.term(), 6u);
  // Released after the timeout passed: it campaigns at the next tick.
  r.HoldCampaigns(false);
  for (int i = 0; i < 100 && r.role() == Role::kFollower; ++i) r.Tick();
  EXPECT_NE(r.role(), Role::kFollower);
}

}  // namespace
}  // namespace raftkv::raft
