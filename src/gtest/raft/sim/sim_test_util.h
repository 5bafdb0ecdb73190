// Helpers shared by the simulation tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/raft/sim/sim_cluster.h"

namespace raftkv::raft::sim {

// Number of failed assertions recorded so far in the running test.
inline int FailedParts() {
  const ::testing::TestResult* result =
      ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int failed = 0;
  for (int i = 0; i < result->total_part_count(); ++i) {
    if (result->GetTestPartResult(i).failed()) ++failed;
  }
  return failed;
}

// Runs body(seed) for every test seed (see TestSeeds) plus `offset`, each
// failure message naming the seed; stops after three failing seeds.
// RAFT_SIM_SEED=<n> runs exactly seed n (the number the failure printed).
template <typename Body>
void ForEachSeed(int default_count, Body body, uint64_t offset = 0) {
  int failing_seeds = 0;
  std::vector<uint64_t> seeds = TestSeeds(default_count);
  if (std::getenv("RAFT_SIM_SEED") == nullptr) {
    for (uint64_t& s : seeds) s += offset;
  }
  for (uint64_t seed : seeds) {
    SCOPED_TRACE("seed=" + std::to_string(seed) +
                 " (rerun with RAFT_SIM_SEED=" + std::to_string(seed) + " --gtest_filter=" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "." +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name() + ")");
    const int before = FailedParts();
    body(seed);
    if (FailedParts() > before && ++failing_seeds >= 3) {
      ADD_FAILURE() << "stopping after 3 failing seeds";
      return;
    }
  }
}

// ---- helpers for the membership, snapshot and transfer tests ----

// Waits for a stable leader; 0 (after recording a failure in the cluster)
// if none within max_ticks.
inline uint64_t AwaitLeader(SimCluster& c, int max_ticks = 150) {
  if (!c.RunUntil([&] { return c.StableLeader() != 0; }, max_ticks)) {
    c.Fail("no stable leader within " + std::to_string(max_ticks) + " ticks");
    return 0;
  }
  return c.StableLeader();
}

inline bool AwaitConverged(SimCluster& c, int max_ticks = 300) {
  if (c.RunUntil([&] { return c.Converged(); }, max_ticks)) return true;
  c.Fail("cluster did not converge within " + std::to_string(max_ticks) + " ticks");
  return false;
}

// Waits until `node` is up and its commit index covers `index`.
inline bool AwaitCommitted(SimCluster& c, uint64_t node, uint64_t index, int max_ticks = 50) {
  return c.RunUntil(
      [&] { return c.alive(node) && c.core(node)->commit_index() >= index; }, max_ticks);
}

// Processes up to `n` events (deliveries, write completions, ticks).
inline void RunEvents(SimCluster& c, int n) {
  for (int i = 0; i < n && c.RunOneEvent(); ++i) {
  }
}

// Proposes `count` commands "<prefix><i>" to `leader`; returns how many were
// accepted.
inline int ProposeMany(SimCluster& c, uint64_t leader, const std::string& prefix, int count,
                       int ticks_every = 0) {
  int accepted = 0;
  for (int i = 0; i < count; ++i) {
    if (c.Propose(leader, prefix + std::to_string(i)).accepted) ++accepted;
    if (ticks_every > 0 && i % ticks_every == ticks_every - 1) c.RunTicks(1);
  }
  return accepted;
}

inline bool IsMemberOf(const MembershipConfig& config, uint64_t id) {
  return FindMember(config, id) != nullptr;
}
inline bool IsVoterOf(const MembershipConfig& config, uint64_t id) {
  const MemberConfig* m = FindMember(config, id);
  return m != nullptr && m->voter();
}

// After convergence: every member of the leader's configuration has the same
// configuration, and its state machine is exactly the committed history
// (nothing committed lost, nothing else applied).
inline void ExpectMembersAgree(const SimCluster& c) {
  const uint64_t leader = c.StableLeader();
  ASSERT_NE(leader, 0u) << c.Report();
  const MembershipConfig& config = c.core(leader)->membership();
  const std::vector<Entry>& committed = c.committed();
  for (const MemberConfig& m : config.members()) {
    ASSERT_TRUE(c.alive(m.id())) << "member " << m.id() << " is down\n" << c.Report();
    EXPECT_TRUE(SameMembership(c.core(m.id())->membership(), config))
        << "member " << m.id() << " has configuration "
        << ConfigString(c.core(m.id())->membership()) << ", leader " << ConfigString(config);
    const std::vector<Entry>& applied = c.applied(m.id());
    ASSERT_GE(applied.size(), committed.size())
        << "member " << m.id() << " lost committed entries\n" << c.Report();
    for (size_t i = 0; i < committed.size(); ++i) {
      ASSERT_EQ(applied[i].term(), committed[i].term()) << "member " << m.id() << " index " << i + 1;
      ASSERT_EQ(applied[i].type(), committed[i].type()) << "member " << m.id() << " index " << i + 1;
      ASSERT_EQ(applied[i].data(), committed[i].data()) << "member " << m.id() << " index " << i + 1;
    }
    EXPECT_EQ(c.state_digest(m.id()), c.state_digest(leader)) << "member " << m.id();
    EXPECT_EQ(applied.size(), c.applied(leader).size()) << "member " << m.id();
  }
}

inline std::string VotersString(const Raft* r) {
  return r == nullptr ? std::string("down") : ConfigString(r->membership());
}

}  // namespace raftkv::raft::sim
