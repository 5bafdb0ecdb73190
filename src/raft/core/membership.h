// Cluster configurations (MembershipConfig) and single-server changes.
//
// raftkv changes membership one server at a time (Raft thesis 4.1-4.3): any
// two configurations that differ by one voter have overlapping majorities, so
// a configuration can take effect as soon as it is appended to a member's log
// (no joint consensus). The leader refuses a change while a previous one is
// uncommitted or before it has committed an entry of its own term (the fix
// for the single-server-change bug described by Ongaro in 2015). New servers
// join as learners (non-voting; they receive the log and snapshots but are
// not counted for commit, votes or CheckQuorum) and are promoted to voters
// by a second change once caught up. A voter may also be added directly (as
// etcd's `member add`): the leader then refuses unless the voters it hears
// from stay a majority of the larger set. A member's address may change (the
// peers dial the new one from the entry on).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/internal.h"

namespace raftkv::raft {

enum class ChangeType { kAddLearner, kPromote, kRemove, kAddVoter, kUpdateAddress };
const char* ChangeTypeName(ChangeType type);

struct MembershipChange {
  ChangeType type = ChangeType::kAddLearner;
  uint64_t id = 0;
  std::string address;  // kAddLearner, kAddVoter, kUpdateAddress
};

// Builds a configuration of voters `ids` (addresses empty), for tests and
// for a bootstrap given as a plain list.
MembershipConfig VotersConfig(const std::vector<uint64_t>& ids);

std::vector<uint64_t> VoterIds(const MembershipConfig& config);
std::vector<uint64_t> LearnerIds(const MembershipConfig& config);
// nullptr when `id` is not a member.
const MemberConfig* FindMember(const MembershipConfig& config, uint64_t id);

// OK if well formed (ids positive, unique, increasing); otherwise
// InvalidArgument saying what is wrong. An empty configuration is well
// formed (a joining node before it learns the cluster's).
Status CheckMembership(const MembershipConfig& config);

// Applies `change` to `current`. On success returns OK and fills *next
// (members kept in id order); otherwise why the change is invalid:
// InvalidArgument for a bad id or a missing address, FailedPrecondition for
// what the configuration does not allow (adding an existing id or address,
// promoting a voter or a non-member, removing a non-member or the last
// voter, giving a non-member an address or a member another's address).
Status ApplyChange(const MembershipConfig& current, const MembershipChange& change, MembershipConfig* next);

// The same members, in the same order, with the same roles and addresses.
bool SameMembership(const MembershipConfig& a, const MembershipConfig& b);
std::string DescribeMembership(const MembershipConfig& config);  // "1v,2v,3v,4l"

}  // namespace raftkv::raft
