// Leadership transfer (Raft thesis 3.10) on the simulated network: to an
// up-to-date voter, to a lagging one (caught up first, then TimeoutNow),
// proposals refused while it is under way and accepted again once it is
// given up, and the refusals (self, learners, non-members, followers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "gtest/raft/sim/sim_cluster.h"
#include "gtest/raft/sim/sim_test_util.h"

namespace raftkv::raft::sim {
namespace {

SimOptions TOptions(int nodes, uint64_t seed) {
  SimOptions o;
  o.nodes = nodes;
  o.seed = seed;
  return o;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

uint64_t SomeFollower(const SimCluster& c, uint64_t leader, uint64_t seed) {
  std::vector<uint64_t> voters = c.core(leader)->voters();
  voters.erase(std::remove(voters.begin(), voters.end(), leader), voters.end());
  return voters[seed % voters.size()];
}

// The target is up to date: it becomes leader of the next term within a few
// ticks (the other voters grant it although they hear from the leader), and
// the old leader follows it.
TEST(RaftTransferTest, UpToDateTargetTakesOverInTheNextTerm) {
  ForEachSeed(20, [&](uint64_t seed) {
    SimCluster c(TOptions(seed % 2 ? 3 : 5, seed));
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    ProposeMany(c, leader, "a", 10);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    c.RunTicks(static_cast<int>(seed % 5));  // some phase of the heartbeat cycle
    ASSERT_EQ(c.StableLeader(), leader) << c.Report();
    const uint64_t term = c.core(leader)->term();
    const uint64_t target = SomeFollower(c, leader, seed);
    const std::string err = c.TransferLeadership(leader, target);
    ASSERT_EQ(err, "") << c.Report();
    EXPECT_EQ(c.core(leader)->transfer_target(), target);
    const uint64_t start = c.ticks();
    ASSERT_TRUE(c.RunUntil([&] { return c.core(target)->role() == Role::kLeader; }, 20))
        << "target " << target << " did not become leader\n"
        << c.Report();
    EXPECT_LE(c.ticks() - start, 3u) << "the transfer took " << c.ticks() - start << " ticks\n"
                                     << c.Report();
    EXPECT_EQ(c.core(target)->term(), term + 1) << c.Report();
    EXPECT_EQ(c.leaders_by_term().at(term + 1), target);
    EXPECT_GE(c.stats().timeout_now_sent, 1u);
    ASSERT_TRUE(c.RunUntil(
        [&] {
          const Raft* old = c.core(leader);
          return old->role() == Role::kFollower && old->leader_id() == target;
        },
        5))
        << "the old leader does not follow the new one\n"
        << c.Report();
    ProposeMany(c, target, "b", 5);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    EXPECT_EQ(c.StableLeader(), target);
    ExpectMembersAgree(c);
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

// The target missed entries: the leader first brings it up to date, and only
// then sends TimeoutNow.
TEST(RaftTransferTest, LaggingTargetIsCaughtUpBeforeTimeoutNow) {
  ForEachSeed(20, [&](uint64_t seed) {
    SimOptions o = TOptions(seed % 2 ? 3 : 5, seed);
    o.max_append_entries = 1 + seed % 8;  // catching up takes a few round trips
    SimCluster c(o);
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    ProposeMany(c, leader, "a", 5);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    const uint64_t target = SomeFollower(c, leader, seed);
    c.Isolate(target);
    ProposeMany(c, leader, "b", 30, 10);
    ASSERT_TRUE(c.RunUntil(
        [&] { return c.core(leader)->commit_index() == c.core(leader)->last_index(); }, 20))
        << c.Report();
    const uint64_t term = c.core(leader)->term();
    const uint64_t last = c.core(leader)->last_index();
    ASSERT_LT(c.persisted_last_index(target), last);
    std::string early;
    int timeout_nows = 0;
    c.intercept = [&](const Envelope& env) {
      if (env.msg.type != MessageType::kTimeoutNow || env.msg.from != leader) return false;
      ++timeout_nows;
      const Raft* l = c.core(leader);
      const Progress* pr = l->ProgressOf(target);
      if (early.empty() && (pr == nullptr || pr->match() != l->last_index() ||
                            c.persisted_last_index(target) < l->last_index())) {
        early = "TimeoutNow sent with the target's match " +
                std::to_string(pr == nullptr ? 0 : pr->match()) + ", durable log up to " +
                std::to_string(c.persisted_last_index(target)) + ", leader's last index " +
                std::to_string(l->last_index());
      }
      return false;
    };
    c.Heal();
    ASSERT_EQ(c.TransferLeadership(leader, target), "") << c.Report();
    const uint64_t start = c.ticks();
    ASSERT_TRUE(c.RunUntil([&] { return c.core(target)->role() == Role::kLeader; }, 25))
        << "lagging target " << target << " did not become leader\n"
        << c.Report();
    c.intercept = nullptr;
    EXPECT_EQ(early, "") << c.Report();
    EXPECT_GE(timeout_nows, 1);
    EXPECT_LE(c.ticks() - start, static_cast<uint64_t>(o.election_ticks)) << c.Report();
    EXPECT_EQ(c.core(target)->term(), term + 1);
    EXPECT_GE(c.core(target)->last_index(), last);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    ExpectMembersAgree(c);
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

// While a transfer is under way the leader refuses proposals (saying why);
// a transfer to a target that is down is given up after an election timeout,
// and proposals are accepted again.
TEST(RaftTransferTest, ProposalsRefusedDuringTransferAcceptedAfterItIsGivenUp) {
  ForEachSeed(20, [&](uint64_t seed) {
    SimCluster c(TOptions(seed % 2 ? 3 : 5, seed));
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    ProposeMany(c, leader, "a", 5);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    const uint64_t term = c.core(leader)->term();
    const uint64_t target = SomeFollower(c, leader, seed);
    c.Crash(target);
    ASSERT_EQ(c.TransferLeadership(leader, target), "") << c.Report();
    const ProposeResult refused = c.Propose(leader, "during");
    EXPECT_FALSE(refused.accepted) << "proposal accepted during a leadership transfer";
    EXPECT_NE(Lower(refused.error.message()).find("transfer"), std::string::npos)
        << "the refusal should say a transfer is in progress: \"" << refused.error << "\"";
    // Membership changes are refused too.
    const ProposeResult change = c.RemoveMember(leader, target);
    EXPECT_FALSE(change.accepted);
    EXPECT_FALSE(change.error.ok());
    const uint64_t start = c.ticks();
    ASSERT_TRUE(c.RunUntil([&] { return c.core(leader)->transfer_target() == 0; },
                           3 * c.options().election_ticks))
        << "the transfer to a down target was never given up\n"
        << c.Report();
    EXPECT_LE(c.ticks() - start, static_cast<uint64_t>(2 * c.options().election_ticks + 1))
        << c.Report();
    EXPECT_EQ(c.core(leader)->role(), Role::kLeader) << c.Report();
    EXPECT_EQ(c.core(leader)->term(), term);
    const ProposeResult accepted = c.Propose(leader, "after");
    EXPECT_TRUE(accepted.accepted) << accepted.error << "\n" << c.Report();
    c.Restart(target);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    ExpectMembersAgree(c);
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

TEST(RaftTransferTest, TransferToSelfNonVoterOrFromFollowerIsRefused) {
  ForEachSeed(5, [&](uint64_t seed) {
    SimCluster c(TOptions(3, seed));
    const uint64_t leader = AwaitLeader(c);
    ASSERT_NE(leader, 0u) << c.Report();
    const uint64_t learner = c.AddNode();
    ASSERT_TRUE(c.RunUntil(
        [&] { return c.core(leader)->TermAt(c.core(leader)->commit_index()) == c.core(leader)->term(); },
        20));
    const ProposeResult add = c.AddLearner(leader, learner);
    ASSERT_TRUE(add.accepted) << add.error;
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    const uint64_t follower = SomeFollower(c, leader, seed);
    EXPECT_NE(c.TransferLeadership(leader, leader), "") << "transfer to self";
    EXPECT_NE(c.TransferLeadership(leader, learner), "") << "transfer to a learner";
    EXPECT_NE(c.TransferLeadership(leader, 42), "") << "transfer to a non-member";
    EXPECT_NE(c.TransferLeadership(follower, leader), "") << "transfer asked of a follower";
    EXPECT_EQ(c.core(leader)->transfer_target(), 0u);
    EXPECT_TRUE(c.Propose(leader, "still-accepted").accepted);
    c.RunTicks(30);
    EXPECT_EQ(c.StableLeader(), leader) << c.Report();
    EXPECT_EQ(c.stats().timeout_now_sent, 0u);
    ASSERT_TRUE(AwaitConverged(c)) << c.Report();
    ASSERT_TRUE(c.ok()) << c.Report();
  });
}

}  // namespace
}  // namespace raftkv::raft::sim
