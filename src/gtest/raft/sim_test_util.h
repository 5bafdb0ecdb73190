// Helpers shared by the simulation tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/raft/sim_cluster.h"

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

}  // namespace raftkv::raft::sim
