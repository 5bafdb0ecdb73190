#include "raft/core/quorum.h"

#include <algorithm>
#include <functional>

namespace raftkv::raft {

size_t MajoritySize(size_t voters) { return voters / 2 + 1; }

uint64_t MajorityValue(std::vector<uint64_t> values, size_t voters) {
  const size_t majority = MajoritySize(voters);
  if (values.size() < majority) return 0;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(majority - 1),
                   values.end(), std::greater<uint64_t>());
  return values[majority - 1];
}

VoteResult TallyVotes(size_t voters, size_t granted, size_t rejected) {
  if (IsMajority(granted, voters)) return VoteResult::kWon;
  if (IsMajority(rejected, voters)) return VoteResult::kLost;
  return VoteResult::kPending;
}

}  // namespace raftkv::raft
