// Crashes, restarts and randomized chaos on the simulated network. The
// invariants are checked by SimCluster after every step; at the end every
// fault is healed and the cluster must converge to one applied sequence that
// contains every entry ever known committed.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gtest/raft/sim/sim_cluster.h"
#include "gtest/raft/sim/sim_test_util.h"

namespace raftkv::raft::sim {
namespace {

CrashPoint RandomCrashPoint(Rng& rng) {
  switch (rng.Uniform(3)) {
    case 0:
      return CrashPoint::kNow;
    case 1:
      return CrashPoint::kBeforePersist;
    default:
      return CrashPoint::kAfterPersist;
  }
}

// Heals everything, restarts every node and waits for convergence; then every
// node's applied sequence is the whole committed history.
void HealAndCheckConvergence(SimCluster& c, int max_ticks) {
  c.Heal();
  c.set_drop_prob(0);
  c.set_dup_prob(0);
  for (uint64_t id : c.ids()) {
    if (c.crash_pending(id)) c.Crash(id, CrashPoint::kNow);
    c.Restart(id);
  }
  ASSERT_TRUE(c.ok()) << c.Report();
  const bool converged = c.RunUntil([&] { return c.Converged(); }, max_ticks);
  ASSERT_TRUE(c.ok()) << c.Report();
  ASSERT_TRUE(converged) << "no convergence within " << max_ticks << " ticks after healing\n"
                         << c.Report();
  c.CheckInvariants(true);
  ASSERT_TRUE(c.ok()) << c.Report();
  const std::vector<Entry>& committed = c.committed();
  for (uint64_t id : c.ids()) {
    const std::vector<Entry>& applied = c.applied(id);
    ASSERT_GE(applied.size(), committed.size()) << "node " << id << " lost committed entries\n"
                                                << c.Report();
    for (size_t i = 0; i < committed.size(); ++i) {
      ASSERT_EQ(applied[i].term(), committed[i].term()) << "node " << id << " index " << i + 1;
      ASSERT_EQ(applied[i].data(), committed[i].data()) << "node " << id << " index " << i + 1;
    }
    ASSERT_EQ(applied.size(), c.applied(c.ids().front()).size());
  }
}

// A stream of proposals while nodes crash at random points of their Ready
// cycle (at most a minority down at a time) and restart later.
void CrashRestartTest(int nodes, int seeds) {
  ForEachSeed(seeds, [&](uint64_t seed) {
    SimOptions o;
    o.nodes = nodes;
    o.seed = seed;
    o.max_delay = 5;
    o.reorder = true;
    SimCluster c(o);
    Rng& rng = c.rng();
    std::vector<uint64_t> down_since(nodes + 1, 0);
    std::set<std::string> acknowledged;  // proposals whose entry was seen applied
    int counter = 0;
    for (int tick = 0; tick < 300 && c.ok(); ++tick) {
      if (uint64_t leader = c.StableLeader()) {
        for (int k = 0; k < 3; ++k) c.Propose(leader, "c" + std::to_string(counter++));
      }
      int down = 0;
      for (uint64_t id : c.ids()) down += !c.alive(id) || c.crash_pending(id);
      if (rng.Chance(0.04) && down < (nodes - 1) / 2 + ((nodes - 1) / 2 == 0)) {
        // Prefer the leader now and then: that is where uncommitted state is.
        uint64_t victim = c.ids()[rng.Uniform(c.ids().size())];
        if (rng.Chance(0.4) && c.Leader() != 0) victim = c.Leader();
        if (c.alive(victim) && !c.crash_pending(victim)) {
          c.Crash(victim, RandomCrashPoint(rng));
          down_since[victim] = c.ticks();
        }
      }
      for (uint64_t id : c.ids()) {
        if (!c.alive(id) && c.ticks() - down_since[id] > 5 + rng.Uniform(30)) c.Restart(id);
      }
      c.RunTicks(1);
    }
    ASSERT_TRUE(c.ok()) << c.Report();
    HealAndCheckConvergence(c, 500);
  });
}

TEST(RaftChaosTest, CrashRestartDuringProposalsLosesNoCommittedEntryThreeNodes) {
  CrashRestartTest(3, 40);
}
TEST(RaftChaosTest, CrashRestartDuringProposalsLosesNoCommittedEntryFiveNodes) {
  CrashRestartTest(5, 30);
}

// Every node crashes at once (a power loss) in the middle of a stream.
TEST(RaftChaosTest, WholeClusterPowerLoss) {
  ForEachSeed(40, [&](uint64_t seed) {
    SimOptions o;
    o.nodes = seed % 2 ? 3 : 5;
    o.seed = seed;
    SimCluster c(o);
    Rng& rng = c.rng();
    int counter = 0;
    for (int round = 0; round < 3; ++round) {
      for (int tick = 0; tick < 40 + static_cast<int>(rng.Uniform(40)); ++tick) {
        if (uint64_t leader = c.StableLeader()) {
          c.Propose(leader, "p" + std::to_string(counter++));
        }
        c.RunTicks(1);
      }
      for (uint64_t id : c.ids()) c.Crash(id, RandomCrashPoint(rng));
      c.RunTicks(2);
      for (uint64_t id : c.ids()) c.Crash(id, CrashPoint::kNow);
      for (uint64_t id : c.ids()) c.Restart(id);
      ASSERT_TRUE(c.ok()) << c.Report();
    }
    HealAndCheckConvergence(c, 500);
  });
}

// Random partitions, loss, duplication, reordering, long delays, crashes at
// random points of the Ready cycle, restarts, proposals to whoever believes
// it is leader (stale leaders included) and reads.
void ChaosRun(uint64_t seed, int chaos_ticks) {
  Rng setup(seed ^ 0xC4A05ull);
  SimOptions o;
  o.seed = seed;
  o.nodes = setup.Chance(0.5) ? 3 : 5;
  o.pre_vote = !setup.Chance(0.25);
  o.check_quorum = !setup.Chance(0.25);
  o.reorder = true;
  o.min_delay = 1;
  o.max_delay = setup.Chance(0.3) ? 25 : 8;  // sometimes longer than a tick or two
  o.dup_prob = setup.Chance(0.5) ? 0.05 : 0;
  o.long_delay_prob = setup.Chance(0.3) ? 0.01 : 0;  // stale messages across elections
  if (setup.Chance(0.3)) {
    o.max_inflight_appends = 1 + setup.Uniform(3);
    o.max_append_entries = 1 + setup.Uniform(4);
  }
  SimCluster c(o);
  Rng& rng = c.rng();
  const std::vector<uint64_t>& ids = c.ids();
  auto any = [&] { return ids[rng.Uniform(ids.size())]; };
  int counter = 0;
  uint64_t read_id = 1;
  for (int tick = 0; tick < chaos_ticks && c.ok(); ++tick) {
    if (rng.Chance(0.04)) {
      std::vector<std::vector<uint64_t>> groups(2 + rng.Uniform(2));
      for (uint64_t id : ids) groups[rng.Uniform(groups.size())].push_back(id);
      c.Partition(groups);
    }
    if (rng.Chance(0.05)) c.Heal();
    if (rng.Chance(0.03)) {
      const double drops[] = {0, 0, 0.05, 0.2, 0.5};
      c.set_drop_prob(drops[rng.Uniform(5)]);
    }
    if (rng.Chance(0.03)) {
      const uint64_t victim = rng.Chance(0.5) && c.Leader() != 0 ? c.Leader() : any();
      c.Crash(victim, RandomCrashPoint(rng));
    }
    if (rng.Chance(0.08)) c.Restart(any());
    if (rng.Chance(0.6)) {
      // Any node that thinks it leads, stale ones included.
      std::vector<uint64_t> leaders;
      for (uint64_t id : ids) {
        if (c.alive(id) && c.core(id)->role() == Role::kLeader) leaders.push_back(id);
      }
      if (!leaders.empty()) {
        const uint64_t l = leaders[rng.Uniform(leaders.size())];
        for (uint64_t k = 0, n = 1 + rng.Uniform(3); k < n; ++k) {
          c.Propose(l, "x" + std::to_string(counter++));
        }
      }
    }
    if (rng.Chance(0.15)) {
      const uint64_t node = any();
      if (c.alive(node)) c.ReadIndex(node, read_id++);
    }
    c.RunTicks(1);
  }
  ASSERT_TRUE(c.ok()) << c.Report();
  HealAndCheckConvergence(c, 600);
  if (::testing::Test::HasFatalFailure()) return;
  // Reads issued after convergence are served.
  const uint64_t leader = c.StableLeader();
  ASSERT_TRUE(c.ReadIndex(leader, read_id));
  ASSERT_TRUE(c.RunUntil([&] { return c.reads(leader).count(read_id) != 0; }, 20)) << c.Report();
  ASSERT_TRUE(c.ok()) << c.Report();
}

TEST(RaftChaosTest, RandomizedChaos) {
  ForEachSeed(200, [&](uint64_t seed) { ChaosRun(seed, 200); });
}

TEST(RaftChaosTest, LongRandomizedChaos) {
  ForEachSeed(
      5, [&](uint64_t seed) { ChaosRun(seed, 1500); }, 100000);
}

// ---------------------------------------------------------------------------
// Chaos with membership changes, leadership transfers and snapshots
// ---------------------------------------------------------------------------

// On top of partitions, loss, duplication, reordering, crashes and restarts:
// learners added (new servers), promoted and removed, voters removed (the
// leader too; never below 3 voters), leadership transfers, snapshots taken
// on demand and automatically (with compaction, and old files deleted). A
// member removed by a committed configuration is sometimes left running for
// a while (it must not disrupt), then shut down for good. At the end every
// remaining member converges to the committed history and to one
// configuration, the latest committed one.
void MembershipChaosRun(uint64_t seed, int chaos_ticks) {
  Rng setup(seed ^ 0x3E3BE25ull);
  SimOptions o;
  o.seed = seed;
  o.nodes = setup.Chance(0.5) ? 3 : 4;
  o.pre_vote = !setup.Chance(0.2);
  o.reorder = true;
  o.max_delay = setup.Chance(0.3) ? 15 : 6;
  o.dup_prob = setup.Chance(0.5) ? 0.03 : 0;
  o.long_delay_prob = setup.Chance(0.3) ? 0.01 : 0;
  o.snapshot_every = setup.Chance(0.7) ? 4 + setup.Uniform(20) : 0;
  o.snapshots_kept = 1 + setup.Uniform(2);
  o.promote_max_lag = 3 + setup.Uniform(30);
  if (setup.Chance(0.3)) {
    o.max_inflight_appends = 1 + setup.Uniform(3);
    o.max_append_entries = 1 + setup.Uniform(4);
  }
  SimCluster c(o);
  Rng& rng = c.rng();
  std::set<uint64_t> joined;   // appeared in a committed configuration
  std::set<uint64_t> retired;  // removed by a committed configuration and shut down
  auto pick = [&](const std::vector<uint64_t>& v) { return v[rng.Uniform(v.size())]; };
  auto live_ids = [&] {
    std::vector<uint64_t> out;
    for (uint64_t id : c.ids()) {
      if (retired.count(id) == 0) out.push_back(id);
    }
    return out;
  };
  auto retire_removed = [&](double p) {
    const MembershipConfig committed_config = c.CommittedConfigAt(c.committed().size());
    for (const MemberConfig& m : committed_config.members()) joined.insert(m.id());
    for (uint64_t id : c.ids()) {
      if (retired.count(id) != 0 || joined.count(id) == 0) continue;
      if (FindMember(committed_config, id) != nullptr || !rng.Chance(p)) continue;
      c.Crash(id, CrashPoint::kNow);
      retired.insert(id);
    }
  };
  int counter = 0;
  uint64_t read_id = 1;
  for (int tick = 0; tick < chaos_ticks && c.ok(); ++tick) {
    const std::vector<uint64_t> ids = live_ids();
    if (rng.Chance(0.03)) {
      std::vector<std::vector<uint64_t>> groups(2 + rng.Uniform(2));
      for (uint64_t id : ids) groups[rng.Uniform(groups.size())].push_back(id);
      c.Partition(groups);
    }
    if (rng.Chance(0.06)) c.Heal();
    if (rng.Chance(0.03)) {
      const double drops[] = {0, 0, 0.05, 0.2, 0.3};
      c.set_drop_prob(drops[rng.Uniform(5)]);
    }
    if (rng.Chance(0.025)) {
      const uint64_t victim = rng.Chance(0.4) && c.Leader() != 0 ? c.Leader() : pick(ids);
      c.Crash(victim, RandomCrashPoint(rng));
    }
    if (rng.Chance(0.1)) c.Restart(pick(ids));
    std::vector<uint64_t> leaders;
    for (uint64_t id : ids) {
      if (c.alive(id) && c.core(id)->role() == Role::kLeader) leaders.push_back(id);
    }
    if (!leaders.empty() && rng.Chance(0.6)) {
      const uint64_t l = pick(leaders);
      for (uint64_t k = 0, n = 1 + rng.Uniform(3); k < n; ++k) {
        c.Propose(l, "m" + std::to_string(counter++));
      }
    }
    if (rng.Chance(0.1)) {
      const uint64_t node = pick(ids);
      if (c.alive(node)) c.ReadIndex(node, read_id++);
    }
    if (rng.Chance(0.05)) c.TakeSnapshot(pick(ids));
    if (rng.Chance(0.02)) c.DeleteOldSnapshotFiles(pick(ids));
    // (A leader picked above may have crashed since, at a pending crash point.)
    if (!leaders.empty() && rng.Chance(0.08) && c.alive(leaders.front())) {
      const uint64_t l = leaders.front();
      const MembershipConfig config = c.core(l)->membership();
      const std::vector<uint64_t> voters = VoterIds(config);
      const std::vector<uint64_t> learners = LearnerIds(config);
      const double r = static_cast<double>(rng.Uniform(1000)) / 1000;
      if (!learners.empty() && r < 0.4) {
        c.Promote(l, pick(learners));
      } else if (voters.size() > 3 && r < 0.7) {
        c.RemoveMember(l, pick(voters));  // the leader itself now and then
      } else if (!learners.empty() && r < 0.8) {
        c.RemoveMember(l, pick(learners));
      } else if (config.members_size() < 6) {
        // A server that never joined, or a new one.
        uint64_t candidate = 0;
        for (uint64_t id : ids) {
          if (joined.count(id) == 0 && FindMember(config, id) == nullptr) candidate = id;
        }
        if (candidate == 0 && ids.size() < 8) candidate = c.AddNode();
        if (candidate != 0) c.AddLearner(l, candidate);
      }
    }
    if (!leaders.empty() && rng.Chance(0.03) && c.alive(leaders.back())) {
      const uint64_t l = leaders.back();
      std::vector<uint64_t> voters = c.core(l)->voters();
      c.TransferLeadership(l, pick(voters));  // sometimes itself: refused
    }
    retire_removed(0.3);
    c.RunTicks(1);
  }
  ASSERT_TRUE(c.ok()) << c.Report();
  // Heal: every removed member shut down, every other server up.
  c.Heal();
  c.set_drop_prob(0);
  c.set_dup_prob(0);
  retire_removed(1.0);
  for (uint64_t id : live_ids()) {
    if (c.crash_pending(id)) c.Crash(id, CrashPoint::kNow);
    c.Restart(id);
  }
  ASSERT_TRUE(c.ok()) << c.Report();
  bool converged = false;
  for (int round = 0; round < 6 && !converged && c.ok(); ++round) {
    converged = c.RunUntil([&] { return c.Converged(); }, 100);
    // A configuration removing a member may have committed meanwhile.
    retire_removed(1.0);
  }
  ASSERT_TRUE(c.ok()) << c.Report();
  ASSERT_TRUE(converged) << "no convergence after healing\n" << c.Report();
  ExpectMembersAgree(c);
  if (::testing::Test::HasFatalFailure()) return;
  // A transfer started in the chaos completes or is given up.
  ASSERT_TRUE(c.RunUntil(
      [&] { return c.Converged() && c.core(c.StableLeader())->transfer_target() == 0; },
      3 * o.election_ticks))
      << c.Report();
  const uint64_t leader = c.StableLeader();
  EXPECT_TRUE(SameMembership(c.core(leader)->membership(), c.CommittedConfigAt(c.committed().size())))
      << "converged on " << ConfigString(c.core(leader)->membership()) << " but the committed "
      << "history ends with " << ConfigString(c.CommittedConfigAt(c.committed().size()));
  EXPECT_GE(c.core(leader)->voters().size(), 3u);
  // Still working: a write commits and a read is served.
  const ProposeResult p = c.Propose(leader, "final");
  ASSERT_TRUE(p.accepted) << c.Report();
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged(); }, 50)) << c.Report();
  ASSERT_TRUE(c.ReadIndex(leader, read_id));
  ASSERT_TRUE(c.RunUntil([&] { return c.reads(leader).count(read_id) != 0; }, 20)) << c.Report();
  ASSERT_TRUE(c.ok()) << c.Report();
}

TEST(RaftChaosTest, MembershipTransferSnapshotChaos) {
  ForEachSeed(12, [&](uint64_t seed) { MembershipChaosRun(seed, 300); }, 5000);
}

TEST(RaftChaosTest, LongMembershipTransferSnapshotChaos) {
  ForEachSeed(3, [&](uint64_t seed) { MembershipChaosRun(seed, 1500); }, 105000);
}

}  // namespace
}  // namespace raftkv::raft::sim
