// Durability before sending: no message that carries a term (or a vote, or
// an acknowledgement) may leave a node before the state it reflects is
// durable. The simulator checks the rule for every message
// (SimCluster::ValidateOutgoing); these tests drive the paths where it was
// or could be broken into a crash at the worst moment.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gtest/raft/sim/sim_cluster.h"
#include "gtest/raft/sim/sim_test_util.h"

namespace raftkv::raft::sim {
namespace {

SimOptions DOptions(int nodes, uint64_t seed) {
  SimOptions o;
  o.nodes = nodes;
  o.seed = seed;
  return o;
}

// Adds a learner at the leader and waits until the cluster converged.
uint64_t AddLearnerAndSettle(SimCluster& c) {
  const uint64_t leader = AwaitLeader(c, 100);
  if (leader == 0) return 0;
  c.RunUntil([&] { return c.core(leader)->TermAt(c.core(leader)->commit_index()) ==
                          c.core(leader)->term(); },
             50);
  const uint64_t learner = c.AddNode();
  const ProposeResult r = c.AddLearner(leader, learner);
  if (!r.accepted) {
    c.Fail("add learner refused: " + r.error.message());
    return 0;
  }
  if (!AwaitConverged(c)) return 0;
  return learner;
}

// The durable logs of `a` and `b` hold the same entries wherever both have one.
void ExpectDurableLogsAgree(const SimCluster& c, uint64_t a, uint64_t b) {
  const uint64_t first = std::max(c.persisted_log_first(a), c.persisted_log_first(b));
  const uint64_t last = std::min(c.persisted_last_index(a), c.persisted_last_index(b));
  for (uint64_t i = first; i <= last; ++i) {
    const Entry* ea = c.persisted_entry(a, i);
    const Entry* eb = c.persisted_entry(b, i);
    ASSERT_NE(ea, nullptr);
    ASSERT_NE(eb, nullptr);
    EXPECT_TRUE(ea->term() == eb->term() && ea->data() == eb->data())
        << "nodes " << a << " and " << b << " differ at index " << i << ": " << EntryString(*ea)
        << " vs " << EntryString(*eb) << "\n"
        << c.Report();
  }
}

// The Ready contract at the level of one core: a single voter elects itself
// inside one tick, and the Ready that carries its new term holds its
// AppendEntries back until the term is durable; the next Ready (term
// durable) lets them go ahead of the write again.
TEST(RaftDurabilityTest, ReadyHoldsMessagesBackWhileItsTermIsNotDurable) {
  Config config;
  config.id = 1;
  config.election_ticks = 3;
  MemberConfig* voter = config.bootstrap.add_members();
  voter->set_id(1);
  voter->set_voter(true);
  MemberConfig* learner = config.bootstrap.add_members();
  learner->set_id(2);
  learner->set_voter(false);
  Raft r(config, HardState{4, 1}, {});
  for (int i = 0; i < 10 && r.role() != Role::kLeader; ++i) r.Tick();
  ASSERT_EQ(r.role(), Role::kLeader);
  Ready rd = r.GetReady();
  ASSERT_TRUE(rd.hard_state.has_value());
  EXPECT_EQ(rd.hard_state->term, 5u);
  bool append = false;
  for (const Message& m : rd.messages) {
    append = append || m.type == MessageType::kAppend;
    EXPECT_FALSE(rd.SendBeforePersist(m)) << m.DebugString() << " would leave before term 5 is durable";
  }
  EXPECT_TRUE(append) << "the new leader replicates to its learner";
  r.Advance(rd);
  EXPECT_TRUE(r.Propose("x").accepted);
  Ready next = r.GetReady();
  EXPECT_FALSE(next.hard_state.has_value());
  for (const Message& m : next.messages) {
    if (m.type == MessageType::kAppend) {
      EXPECT_TRUE(next.SendBeforePersist(m)) << m.DebugString();
    }
  }
}

// One voter and one learner (a cluster being grown from a single server).
// The voter restarts and elects itself inside one tick; a client write
// reaches it before its first Ready as leader; it crashes after sending the
// leader's AppendEntries and before persisting anything. When that Ready
// carried the new term's AppendEntries, the restarted voter won the same
// term again and wrote a different entry at the same index and term, which
// the learner kept (a follower skips entries whose term matches): the
// replicas diverged.
TEST(RaftDurabilityTest, SingleVoterNewTermIsDurableBeforeItsFirstAppend) {
  ForEachSeed(10, [&](uint64_t seed) {
    SimOptions o = DOptions(1, seed);
    o.async_persist_prob = 0;  // the crash point, not a random write delay, decides
    SimCluster c(o);
    ASSERT_EQ(AwaitLeader(c, 50), 1u) << c.Report();
    ProposeMany(c, 1, "a", 5);
    const uint64_t learner = AddLearnerAndSettle(c);
    ASSERT_NE(learner, 0u) << c.Report();
    ASSERT_TRUE(c.ok()) << c.Report();

    c.Crash(1);
    c.Restart(1);
    c.Crash(1, CrashPoint::kBeforePersist);
    bool proposed = false;
    c.after_tick = [&](uint64_t node) {
      Raft* core = c.core(node);
      if (node != 1 || proposed || core == nullptr || core->role() != Role::kLeader) return;
      proposed = core->Propose("lost-write").accepted;
    };
    ASSERT_TRUE(c.RunUntil([&] { return !c.alive(1); }, 100)) << c.Report();
    c.after_tick = nullptr;
    c.RunTicks(3);  // whatever the crashed incarnation sent arrives
    c.Restart(1);
    ASSERT_EQ(AwaitLeader(c, 100), 1u) << c.Report();
    ProposeMany(c, 1, "after", 3);
    EXPECT_TRUE(AwaitConverged(c)) << c.Report();
    ExpectDurableLogsAgree(c, 1, learner);
    EXPECT_EQ(c.AppliedCommands(learner), c.AppliedCommands(1)) << c.Report();
    EXPECT_TRUE(c.ok()) << c.Report();
  });
}

// The same crash with three voters: the candidate's vote requests wait for
// its durable self-vote, so a crashed candidate's requests never carry a
// term it may not remember.
TEST(RaftDurabilityTest, CandidateCrashBeforePersistingItsTermSendsNoVoteRequest) {
  ForEachSeed(10, [&](uint64_t seed) {
    SimOptions o = DOptions(3, seed);
    o.async_persist_prob = 0;
    SimCluster c(o);
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    ProposeMany(c, leader, "a", 5);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    const uint64_t follower = leader == 1 ? 2 : 1;
    c.Isolate(leader);
    c.Crash(follower, CrashPoint::kBeforePersist);
    c.RunUntil([&] { return !c.alive(follower); }, 100);
    c.Heal();
    c.Restart(follower);
    EXPECT_NE(AwaitLeader(c), 0u) << c.Report();
    EXPECT_TRUE(AwaitConverged(c)) << c.Report();
    EXPECT_TRUE(c.ok()) << c.Report();
  });
}

// A follower that grants a vote (or acknowledges entries, or a snapshot)
// and crashes before persisting must not have answered: the answer leaves
// only after the Ready that produced it is durable. Crashes before and
// after persisting, on every node in turn, under elections and load.
TEST(RaftDurabilityTest, AnswersNeverPrecedeTheStateTheyReflect) {
  ForEachSeed(20, [&](uint64_t seed) {
    SimOptions o = DOptions(3, seed);
    o.snapshot_every = 7;
    o.drop_prob = 0.02;
    SimCluster c(o);
    for (int round = 0; round < 12 && c.ok(); ++round) {
      const uint64_t victim = 1 + (seed + static_cast<uint64_t>(round)) % 3;
      if (c.alive(victim)) {
        c.Crash(victim, round % 2 == 0 ? CrashPoint::kBeforePersist : CrashPoint::kAfterPersist);
      }
      for (int i = 0; i < 5; ++i) {
        uint64_t l = 0;
        c.ProposeToLeader("r" + std::to_string(round) + "-" + std::to_string(i), &l);
        c.RunTicks(1);
      }
      c.RunTicks(5);
      for (uint64_t id : c.ids()) {
        if (!c.alive(id)) c.Restart(id);
      }
    }
    // Crashes still armed happen at the nodes' next durable Ready.
    for (int i = 0; i < 20; ++i) {
      bool armed = false;
      for (uint64_t id : c.ids()) armed = armed || c.crash_pending(id);
      c.RunTicks(5);
      for (uint64_t id : c.ids()) {
        if (!c.alive(id)) c.Restart(id);
      }
      if (!armed) break;
    }
    c.set_drop_prob(0);
    EXPECT_NE(AwaitLeader(c, 300), 0u) << c.Report();
    EXPECT_TRUE(AwaitConverged(c, 500)) << c.Report();
    EXPECT_TRUE(c.ok()) << c.Report();
  });
}

}  // namespace
}  // namespace raftkv::raft::sim
