// Majority arithmetic over the voters of one configuration, in one place (as
// etcd's quorum/majority.go): the commit index, ReadIndex confirmation,
// elections and CheckQuorum all count the same way. Learners are never
// passed in: callers count voters only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace raftkv::raft {

// How many of `voters` make a majority: voters / 2 + 1 (1 for none, so that
// an empty configuration never decides anything with zero votes).
size_t MajoritySize(size_t voters);

// Whether `count` of `voters` are a majority.
inline bool IsMajority(size_t count, size_t voters) { return count >= MajoritySize(voters); }

// The highest value a majority of the voters has reached: `values` holds one
// value per voter that reported (a match index, the leader's own durable
// index among them; a confirmed read round), at most one per voter. Sorted in
// descending order, it is the MajoritySize(voters)-th value; 0 when fewer
// than a majority reported.
uint64_t MajorityValue(std::vector<uint64_t> values, size_t voters);

enum class VoteResult {
  kPending,  // neither side has a majority yet
  kWon,      // a majority granted
  kLost,     // a majority refused: the election cannot be won
};
// The state of an election among `voters` with `granted` and `rejected`
// distinct votes so far.
VoteResult TallyVotes(size_t voters, size_t granted, size_t rejected);

}  // namespace raftkv::raft
