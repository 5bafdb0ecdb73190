#include "raft/core/membership.h"

#include <algorithm>

namespace raftkv::raft {

const char* ChangeTypeName(ChangeType type) {
  switch (type) {
    case ChangeType::kAddLearner: return "add-learner";
    case ChangeType::kPromote: return "promote";
    case ChangeType::kRemove: return "remove";
    case ChangeType::kAddVoter: return "add-voter";
    case ChangeType::kUpdateAddress: return "update-address";
  }
  return "?";
}

MembershipConfig VotersConfig(const std::vector<uint64_t>& ids) {
  std::vector<uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  MembershipConfig config;
  for (uint64_t id : sorted) {
    MemberConfig* m = config.add_members();
    m->set_id(id);
    m->set_voter(true);
  }
  return config;
}

std::vector<uint64_t> VoterIds(const MembershipConfig& config) {
  std::vector<uint64_t> ids;
  for (const MemberConfig& m : config.members()) {
    if (m.voter()) ids.push_back(m.id());
  }
  return ids;
}

std::vector<uint64_t> LearnerIds(const MembershipConfig& config) {
  std::vector<uint64_t> ids;
  for (const MemberConfig& m : config.members()) {
    if (!m.voter()) ids.push_back(m.id());
  }
  return ids;
}

const MemberConfig* FindMember(const MembershipConfig& config, uint64_t id) {
  for (const MemberConfig& m : config.members()) {
    if (m.id() == id) return &m;
  }
  return nullptr;
}

Status CheckMembership(const MembershipConfig& config) {
  uint64_t previous = 0;
  for (const MemberConfig& m : config.members()) {
    if (m.id() == 0) return Status::InvalidArgument("member id 0 is invalid");
    if (m.id() <= previous) {
      return Status::InvalidArgument("member ids must be unique and increasing (" + std::to_string(m.id()) +
                                     " after " + std::to_string(previous) + ")");
    }
    previous = m.id();
  }
  return Status::OK();
}

namespace {

// OK when `change.address` is given and no other member has it.
Status CheckAddressFree(const MembershipConfig& current, const MembershipChange& change) {
  if (change.address.empty()) return Status::InvalidArgument("member " + std::to_string(change.id) + " needs an address");
  for (const MemberConfig& m : current.members()) {
    if (m.id() != change.id && m.address() == change.address) {
      return Status(Status::Code::kFailedPrecondition,
                    "address " + change.address + " is already used by member " + std::to_string(m.id()),
                    Status::Reason::kAddressInUse);
    }
  }
  return Status::OK();
}

Status NotAMember(const std::string& who) {
  return Status(Status::Code::kFailedPrecondition, who + " is not in the configuration",
                Status::Reason::kMemberNotFound);
}

}  // namespace

Status ApplyChange(const MembershipConfig& current, const MembershipChange& change,
                   MembershipConfig* next) {
  if (change.id == 0) return Status::InvalidArgument("member id must be positive");
  const MemberConfig* existing = FindMember(current, change.id);
  const std::string who = "member " + std::to_string(change.id);
  MembershipConfig out = current;
  switch (change.type) {
    case ChangeType::kAddLearner:
    case ChangeType::kAddVoter: {
      if (existing != nullptr) {
        return Status(Status::Code::kFailedPrecondition,
                      who + " is already in the configuration (" + (existing->voter() ? "voter" : "learner") +
                          " at " + existing->address() + ")",
                      Status::Reason::kMemberExists);
      }
      if (Status taken = CheckAddressFree(current, change); !taken.ok()) return taken;
      MemberConfig added;
      added.set_id(change.id);
      added.set_address(change.address);
      added.set_voter(change.type == ChangeType::kAddVoter);
      out.clear_members();
      bool inserted = false;
      for (const MemberConfig& m : current.members()) {
        if (!inserted && m.id() > change.id) {
          *out.add_members() = added;
          inserted = true;
        }
        *out.add_members() = m;
      }
      if (!inserted) *out.add_members() = added;
      break;
    }
    case ChangeType::kUpdateAddress:
      if (existing == nullptr) return NotAMember(who);
      if (Status taken = CheckAddressFree(current, change); !taken.ok()) return taken;
      for (MemberConfig& m : *out.mutable_members()) {
        if (m.id() == change.id) m.set_address(change.address);
      }
      break;
    case ChangeType::kPromote:
      if (existing == nullptr) return NotAMember(who);
      if (existing->voter()) {
        return Status(Status::Code::kFailedPrecondition, who + " is already a voter", Status::Reason::kNotLearner);
      }
      for (MemberConfig& m : *out.mutable_members()) {
        if (m.id() == change.id) m.set_voter(true);
      }
      break;
    case ChangeType::kRemove: {
      if (existing == nullptr) return NotAMember(who);
      if (existing->voter() && VoterIds(current).size() == 1) {
        return Status::FailedPrecondition(who + " is the last voter; it cannot be removed");
      }
      out.clear_members();
      for (const MemberConfig& m : current.members()) {
        if (m.id() != change.id) *out.add_members() = m;
      }
      break;
    }
  }
  *next = std::move(out);
  return Status::OK();
}

bool SameMembership(const MembershipConfig& a, const MembershipConfig& b) {
  if (a.members_size() != b.members_size()) return false;
  for (int i = 0; i < a.members_size(); ++i) {
    const MemberConfig& x = a.members(i);
    const MemberConfig& y = b.members(i);
    if (x.id() != y.id() || x.voter() != y.voter() || x.address() != y.address()) return false;
  }
  return true;
}

std::string DescribeMembership(const MembershipConfig& config) {
  std::string out;
  for (const MemberConfig& m : config.members()) {
    if (!out.empty()) out += ",";
    out += std::to_string(m.id()) + (m.voter() ? "v" : "l");
  }
  return out.empty() ? "(empty)" : out;
}

}  // namespace raftkv::raft
