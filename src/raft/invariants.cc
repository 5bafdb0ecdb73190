#include "raft/invariants.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <set>

#include "raft/core/membership.h"

namespace raftkv::raft {
namespace {

std::string U(uint64_t v) { return std::to_string(v); }

std::string Member(const Raft& r) { return "member " + U(r.id()) + ": "; }

// The configuration an ENTRY_CONFIG entry carries, if the core is to use it
// (it parses and is well formed; otherwise every member ignores it).
std::optional<MembershipConfig> ConfigOf(const Entry& e) {
  if (e.type() != ENTRY_CONFIG) return std::nullopt;
  MembershipConfig c;
  if (!c.ParseFromString(e.data()) || !CheckMembership(c).ok()) return std::nullopt;
  return c;
}

}  // namespace

bool SameEntryContent(const Entry& a, const Entry& b) {
  return a.index() == b.index() && a.term() == b.term() && a.type() == b.type() &&
         a.data() == b.data();
}

std::string DescribeEntry(const Entry& e) {
  std::string s = U(e.index()) + "/" + U(e.term());
  if (e.type() == ENTRY_NOOP) {
    s += " noop";
  } else if (e.type() == ENTRY_CONFIG) {
    MembershipConfig c;
    s += " config[" +
         (c.ParseFromString(e.data()) ? DescribeMembership(c) : std::string("unparsable")) + "]";
  } else {
    s += " cmd '" + e.data().substr(0, 24) + "'";
  }
  return s;
}

// ---------------------------------------------------------------------------
// MemberInvariants
// ---------------------------------------------------------------------------

void MemberInvariants::Reset() {
  started_ = false;
  leader_term_ = 0;
  leader_commit_ = 0;
  committed_.clear();
}

void MemberInvariants::Check(const Raft& r, bool full, std::vector<std::string>* out) {
  CheckState(r, out);
  if (r.role() == Role::kLeader) CheckLeader(r, out);
  if (full) CheckLog(r, out);
  CheckHistory(r, full, out);
}

// Indexes, terms, votes and roles: O(1) (plus the configuration's size).
void MemberInvariants::CheckState(const Raft& r, std::vector<std::string>* out) const {
  const std::string who = Member(r);
  const SnapshotRef& snap = r.snapshot();
  // The core computes last_index() + 1 and snapshot().index + 1.
  if (r.last_index() == UINT64_MAX || r.first_index() != snap.index + 1) {
    out->push_back(who + "log indexes: snapshot " + U(snap.index) + ", first " +
                   U(r.first_index()) + ", last " + U(r.last_index()));
  }
  if (snap.index > r.commit_index() || r.commit_index() > r.last_index()) {
    out->push_back(who + "snapshot <= commit <= last index: snapshot " + U(snap.index) +
                   " commit " + U(r.commit_index()) + " last " + U(r.last_index()));
  }
  if (r.durable_index() > r.last_index()) {
    out->push_back(who + "durable index " + U(r.durable_index()) + " beyond the last index " +
                   U(r.last_index()));
  }
  if (r.last_term() > r.term()) {
    out->push_back(who + "last log term " + U(r.last_term()) + " above the term " + U(r.term()));
  }
  if (snap.index > 0 && (r.TermAt(snap.index - 1) != 0 || r.TermAt(snap.index) != snap.term)) {
    out->push_back(who + "TermAt around snapshot " + U(snap.index) + "/" + U(snap.term) + ": " +
                   U(r.TermAt(snap.index - 1)) + ", " + U(r.TermAt(snap.index)));
  }
  if (r.membership_index() > r.last_index() ||
      (snap.index > 0 && r.membership_index() < snap.index)) {
    out->push_back(who + "configuration entry " + U(r.membership_index()) +
                   " outside snapshot " + U(snap.index) + " .. last index " + U(r.last_index()));
  }
  const bool campaigning = r.role() == Role::kCandidate || r.role() == Role::kPreCandidate;
  if (campaigning && !r.IsVoter(r.id())) {
    out->push_back(who + RoleName(r.role()) + " without a vote in " +
                   DescribeMembership(r.membership()));
  }
  // A candidate, and a leader, voted for itself in its term.
  if ((r.role() == Role::kCandidate || r.role() == Role::kLeader) && r.vote() != r.id()) {
    out->push_back(who + RoleName(r.role()) + " of term " + U(r.term()) + " voted for " +
                   U(r.vote()));
  }
  if (r.transfer_target() != 0 &&
      (r.role() != Role::kLeader || !r.IsVoter(r.transfer_target()))) {
    out->push_back(who + "transfer to " + U(r.transfer_target()) + " as " + RoleName(r.role()));
  }
}

// A leader: who it is, whom it tracks, what its Progress says.
void MemberInvariants::CheckLeader(const Raft& r, std::vector<std::string>* out) const {
  const std::string who = Member(r);
  if (r.leader_id() != r.id()) {
    out->push_back(who + "leader with leader_id " + U(r.leader_id()));
  }
  // It leaves when the configuration removing it commits.
  if (!r.IsVoter(r.id()) && r.commit_index() >= r.membership_index()) {
    out->push_back(who + "leader not a voter of the committed configuration " +
                   DescribeMembership(r.membership()) + " at " + U(r.membership_index()));
  }
  // It tracks the progress of exactly the other members.
  std::set<uint64_t> ids(probe_ids_.begin(), probe_ids_.end());
  ids.insert(0);
  ids.insert(r.id());
  for (const MemberConfig& m : r.membership().members()) ids.insert(m.id());
  for (uint64_t id : ids) {
    const Progress* pr = r.ProgressOf(id);
    const bool member = id != r.id() && FindMember(r.membership(), id) != nullptr;
    if ((pr != nullptr) != member) {
      out->push_back(who + "leader progress of " + U(id) + ": " + U(pr != nullptr) + " in " +
                     DescribeMembership(r.membership()));
      continue;
    }
    if (pr == nullptr) continue;
    if (pr->match() >= pr->next() || pr->match() > r.last_index()) {
      out->push_back(who + "progress of " + U(id) + ": match " + U(pr->match()) + " next " +
                     U(pr->next()) + " last index " + U(r.last_index()));
    }
  }
}

// The in-memory log: contiguous after the snapshot, terms non-decreasing from
// the snapshot's, and the configuration in effect is its latest valid
// ENTRY_CONFIG (else the snapshot's).
void MemberInvariants::CheckLog(const Raft& r, std::vector<std::string>* out) const {
  const std::string who = Member(r);
  uint64_t previous = r.snapshot().term;
  for (uint64_t i = r.first_index(); i <= r.last_index(); ++i) {
    const Entry& e = r.EntryAt(i);
    if (e.index() != i || e.term() < previous) {
      out->push_back(who + "log position " + U(i) + " holds " + DescribeEntry(e) +
                     " after term " + U(previous));
      return;
    }
    previous = e.term();
  }
  // (At index 0 the snapshot is the bootstrap configuration.)
  uint64_t config_index = r.snapshot().index;
  MembershipConfig expected = r.snapshot().config;
  for (uint64_t i = r.last_index(); i >= r.first_index() && i > 0; --i) {
    if (std::optional<MembershipConfig> c = ConfigOf(r.EntryAt(i))) {
      expected = *c;
      config_index = i;
      break;
    }
  }
  if (!SameMembership(expected, r.membership()) || config_index != r.membership_index()) {
    out->push_back(who + "configuration in effect " + DescribeMembership(r.membership()) +
                   " at " + U(r.membership_index()) + ", the log says " +
                   DescribeMembership(expected) + " at " + U(config_index));
  }
}

// Across checks of one incarnation.
void MemberInvariants::CheckHistory(const Raft& r, bool full, std::vector<std::string>* out) {
  const std::string who = Member(r);
  if (started_ && r.term() < last_term_) {
    out->push_back(who + "term went back from " + U(last_term_) + " to " + U(r.term()));
  }
  if (started_ && r.commit_index() < last_commit_) {
    out->push_back(who + "commit index went back from " + U(last_commit_) + " to " +
                   U(r.commit_index()));
  }
  if (r.role() == Role::kLeader) {
    if (r.term() == leader_term_ && r.commit_index() > leader_commit_) {
      // Commit advanced while leading: an entry of this term, durable on a
      // quorum of the voters in effect (its own durable index and its
      // followers' match).
      if (r.TermAt(r.commit_index()) != r.term()) {
        out->push_back(who + "leader committed " + U(r.commit_index()) + " of term " +
                       U(r.TermAt(r.commit_index())) + " in term " + U(r.term()));
      }
      std::vector<uint64_t> durable;
      for (uint64_t v : r.voters()) {
        const Progress* pr = r.ProgressOf(v);
        durable.push_back(v == r.id() ? r.durable_index() : pr != nullptr ? pr->match() : 0);
      }
      std::sort(durable.begin(), durable.end(), std::greater<uint64_t>());
      const size_t quorum = durable.size() / 2 + 1;
      if (durable.size() < quorum || r.commit_index() > durable[quorum - 1]) {
        out->push_back(who + "leader commit " + U(r.commit_index()) +
                       " beyond what a quorum of " + DescribeMembership(r.membership()) +
                       " holds");
      }
    }
    leader_term_ = r.term();
    leader_commit_ = r.commit_index();
  } else {
    leader_term_ = 0;
  }
  // Entries seen committed never change (those compacted away are gone).
  // Those below the in-memory log are dropped: they can no longer be read,
  // and a long-running member keeps no more than its log.
  committed_.erase(committed_.begin(), committed_.lower_bound(r.first_index()));
  const uint64_t commit = std::min(r.commit_index(), r.last_index());
  const uint64_t from = committed_.empty() ? 0 : committed_.rbegin()->first;
  for (uint64_t i = std::max(from + 1, r.first_index()); i <= commit; ++i) {
    committed_[i] = r.EntryAt(i).SerializeAsString();
  }
  if (full) {
    for (auto it = committed_.lower_bound(r.first_index()); it != committed_.end(); ++it) {
      if (it->first > r.last_index() || r.EntryAt(it->first).SerializeAsString() != it->second) {
        out->push_back(who + "committed entry " + U(it->first) + " changed in the log");
        break;
      }
    }
  }
  started_ = true;
  last_term_ = r.term();
  last_commit_ = r.commit_index();
}

// ---------------------------------------------------------------------------
// ClusterInvariants
// ---------------------------------------------------------------------------

void ClusterInvariants::RecordLeader(uint64_t member, uint64_t term) {
  auto [lt, inserted] = leaders_by_term_.emplace(term, member);
  if (!inserted && lt->second != member) {
    Violation("election safety: nodes " + U(lt->second) + " and " + U(member) +
              " are both leader of term " + U(term));
  }
}

std::optional<uint64_t> ClusterInvariants::LeaderOf(uint64_t term) const {
  auto it = leaders_by_term_.find(term);
  if (it == leaders_by_term_.end()) return std::nullopt;
  return it->second;
}

void ClusterInvariants::RecordVote(uint64_t voter, uint64_t term, uint64_t candidate) {
  auto [g, inserted] = votes_.emplace(std::make_pair(voter, term), candidate);
  if (!inserted && g->second != candidate) {
    Violation("durable vote: node " + U(voter) + " granted votes to " + U(g->second) + " and " +
              U(candidate) + " in term " + U(term));
  }
}

bool ClusterInvariants::VotedFor(uint64_t voter, uint64_t term, uint64_t candidate) const {
  auto g = votes_.find({voter, term});
  return g != votes_.end() && g->second == candidate;
}

void ClusterInvariants::CheckElectionQuorum(const Raft& r) {
  const std::vector<uint64_t> voters = r.voters();
  size_t granted = 0;
  std::string from;
  for (uint64_t v : voters) {
    if (v == r.id() || VotedFor(v, r.term(), r.id())) {
      ++granted;
      from += " " + U(v);
    }
  }
  if (granted < voters.size() / 2 + 1) {
    Violation("node " + U(r.id()) + " became leader of term " + U(r.term()) +
              " with votes only from {" + from + " } of its configuration " +
              DescribeMembership(r.membership()));
  }
}

void ClusterInvariants::RecordEntry(uint64_t member, const Entry& e, uint64_t prev_term,
                                    const char* where) {
  auto [it, inserted] = entries_.emplace(std::make_pair(e.index(), e.term()),
                                         EntryInfo{e.type(), e.data(), prev_term});
  if (inserted) return;
  const EntryInfo& info = it->second;
  if (info.type != e.type() || info.data != e.data() || info.prev_term != prev_term) {
    Violation(std::string("log matching: node ") + U(member) + " " + where + " " +
              DescribeEntry(e) + " after term " + U(prev_term) + ", but another log has " +
              U(e.index()) + "/" + U(e.term()) +
              (info.type == ENTRY_NOOP ? " noop" : " cmd '" + info.data.substr(0, 24) + "'") +
              " after term " + U(info.prev_term));
  }
}

void ClusterInvariants::CheckCommitted(const Raft& r, uint64_t from, uint64_t observed_term) {
  const uint64_t c = r.commit_index();
  const uint64_t snap = r.snapshot().index;
  if (from <= snap && snap <= c) {
    // Covered by the snapshot the core is based on: only its last entry's
    // term is known here.
    if (snap > committed_.size()) {
      Violation("node " + U(r.id()) + " is based on snapshot " + U(snap) + "/" +
                U(r.snapshot().term) + " beyond every index known committed (" +
                U(committed_.size()) + ")");
    } else if (committed_[snap - 1].term() != r.snapshot().term) {
      Violation("state machine safety: node " + U(r.id()) + " is based on snapshot " + U(snap) +
                "/" + U(r.snapshot().term) + " but " + DescribeEntry(committed_[snap - 1]) +
                " was committed at that index");
    }
    from = snap + 1;
  }
  for (uint64_t i = std::max(from, r.first_index()); i <= c; ++i) {
    const Entry& e = r.EntryAt(i);
    if (i <= committed_.size()) {
      if (!SameEntryContent(e, committed_[i - 1])) {
        Violation("state machine safety: node " + U(r.id()) + " has commit index " + U(c) +
                  " covering " + DescribeEntry(e) + " but " + DescribeEntry(committed_[i - 1]) +
                  " was committed at that index");
        break;
      }
    } else if (i == committed_.size() + 1) {
      committed_.push_back(e);
      committed_obs_term_.push_back(observed_term);
      if (std::optional<MembershipConfig> config = ConfigOf(e)) committed_configs_[i] = *config;
    } else {
      Violation("node " + U(r.id()) + " commits " + DescribeEntry(e) + " but index " +
                U(committed_.size() + 1) + " was never seen committed");
      break;
    }
  }
}

void ClusterInvariants::CheckLeaderCompleteness(const Raft& r) {
  const uint64_t snap = r.snapshot().index;
  for (size_t i = 0; i < committed_.size(); ++i) {
    if (committed_obs_term_[i] >= r.term()) break;
    const uint64_t index = i + 1;
    if (index < snap) continue;
    if (index == snap) {
      if (r.snapshot().term != committed_[i].term()) {
        Violation("leader completeness: node " + U(r.id()) + " became leader of term " +
                  U(r.term()) + " based on snapshot " + U(snap) + "/" + U(r.snapshot().term) +
                  " but " + DescribeEntry(committed_[i]) + " was committed");
        break;
      }
      continue;
    }
    if (index > r.last_index() || !SameEntryContent(r.EntryAt(index), committed_[i])) {
      const std::string has =
          index > r.last_index() ? std::string("nothing") : DescribeEntry(r.EntryAt(index));
      Violation("leader completeness: node " + U(r.id()) + " became leader of term " +
                U(r.term()) + " without committed entry " + DescribeEntry(committed_[i]) +
                " (it has " + has + ")");
      break;
    }
  }
}

const MembershipConfig* ClusterInvariants::CommittedConfigAt(uint64_t index) const {
  auto it = committed_configs_.upper_bound(index);
  if (it == committed_configs_.begin()) return nullptr;
  return &std::prev(it)->second;
}

}  // namespace raftkv::raft
