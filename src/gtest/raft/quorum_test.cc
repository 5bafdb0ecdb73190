// The majority arithmetic (raft/core/quorum.h), table-driven as etcd's
// quorum/testdata: one row per case, the expected answer beside it.
#include "raft/core/quorum.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace raftkv::raft {
namespace {

TEST(QuorumTest, MajoritySize) {
  const std::vector<std::pair<size_t, size_t>> rows = {
      {0, 1}, {1, 1}, {2, 2}, {3, 2}, {4, 3}, {5, 3}, {6, 4}, {7, 4}};
  for (const auto& [voters, want] : rows) {
    EXPECT_EQ(MajoritySize(voters), want) << voters << " voters";
    EXPECT_TRUE(IsMajority(want, voters));
    EXPECT_FALSE(IsMajority(want - 1, voters));
  }
}

TEST(QuorumTest, MajorityValue) {
  struct Row {
    std::vector<uint64_t> values;
    size_t voters;
    uint64_t want;
  };
  const std::vector<Row> rows = {
      {{}, 1, 0},                  // nobody reported
      {{7}, 1, 7},                 // a single voter decides alone
      {{7, 3}, 2, 3},              // two voters: both are needed
      {{7}, 2, 0},                 // one of two is not a majority
      {{9, 7, 3}, 3, 7},           // the middle one
      {{3, 9, 7}, 3, 7},           // order does not matter
      {{9, 3}, 3, 3},              // a voter missing counts as nothing
      {{9}, 3, 0},
      {{5, 5, 5}, 3, 5},           // ties
      {{10, 8, 6, 4}, 4, 6},       // 3 of 4 must have it: the third highest
      {{10, 8, 6, 4, 2}, 5, 6},
      {{10, 8, 0, 0, 0}, 5, 0},
      {{10, 8, 6}, 5, 6},          // 3 of 5 reported: just a majority
  };
  for (const Row& r : rows) {
    std::string values;
    for (uint64_t v : r.values) values += std::to_string(v) + " ";
    EXPECT_EQ(MajorityValue(r.values, r.voters), r.want)
        << "values {" << values << "} of " << r.voters << " voters";
  }
}

TEST(QuorumTest, TallyVotes) {
  struct Row {
    size_t voters, granted, rejected;
    VoteResult want;
  };
  const std::vector<Row> rows = {
      {1, 1, 0, VoteResult::kWon},  // a single voter elects itself
      {1, 0, 0, VoteResult::kPending},
      {3, 1, 0, VoteResult::kPending},
      {3, 2, 0, VoteResult::kWon},
      {3, 1, 1, VoteResult::kPending},
      {3, 1, 2, VoteResult::kLost},
      {4, 2, 2, VoteResult::kPending},  // even split: neither
      {4, 3, 1, VoteResult::kWon},
      {4, 1, 3, VoteResult::kLost},
      {5, 3, 2, VoteResult::kWon},
      {5, 2, 3, VoteResult::kLost},
      {5, 2, 2, VoteResult::kPending},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(TallyVotes(r.voters, r.granted, r.rejected), r.want)
        << r.granted << " granted, " << r.rejected << " rejected of " << r.voters;
  }
}

}  // namespace
}  // namespace raftkv::raft
