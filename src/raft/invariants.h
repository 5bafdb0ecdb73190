// Invariants of the consensus core, checked by the simulated-network tests,
// the fuzzer and (in debug builds) the node: one checker, so every harness
// checks the same properties with the same words.
//
// Two levels:
//  * MemberInvariants: one member's state, through the public observers of
//    Raft only. Some properties hold at any moment (commit <= last index, a
//    leader tracks exactly the other members, ...), others across successive
//    checks of one incarnation (term and commit never go back, an entry seen
//    committed never changes, a leader's commit advance is covered by a
//    quorum).
//  * ClusterInvariants: the history of several members, fed by the harness
//    that sees them all (election safety, one vote per member and term, log
//    matching, state machine safety, leader completeness).
//
// Like Raft itself: deterministic, no I/O, no threads, no clocks. A check
// never changes the core; it appends one line per violation, naming the
// member, the invariant and the values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "raft/raft.h"

namespace raftkv::raft {

// Checks one member (one incarnation: Reset() when the core is rebuilt).
class MemberInvariants {
 public:
  // The core was rebuilt from storage: its commit index starts over at its
  // snapshot and the entries above it may be replaced.
  void Reset();
  // Ids the leader must not track unless they are members of its
  // configuration (besides 0 and itself, always checked): the harness's
  // other servers, or a range of ids it makes messages from.
  void set_probe_ids(std::vector<uint64_t> ids) { probe_ids_ = std::move(ids); }

  // Runs the checks; appends a line per violation to `out`. `full`: also the
  // ones that walk the whole in-memory log (O(log size)).
  void Check(const Raft& r, bool full, std::vector<std::string>* out);

 private:
  void CheckState(const Raft& r, std::vector<std::string>* out) const;
  void CheckLeader(const Raft& r, std::vector<std::string>* out) const;
  void CheckLog(const Raft& r, std::vector<std::string>* out) const;
  void CheckHistory(const Raft& r, bool full, std::vector<std::string>* out);

  std::vector<uint64_t> probe_ids_;
  bool started_ = false;      // a check ran since Reset()
  uint64_t last_term_ = 0;    // at the previous check
  uint64_t last_commit_ = 0;  // at the previous check
  uint64_t leader_term_ = 0;    // term it led at the previous check (0: it did not)
  uint64_t leader_commit_ = 0;  // its commit index then
  // Serialized entries seen committed in this incarnation, by index.
  std::map<uint64_t, std::string> committed_;
};

// The history of a cluster: what its members did, as the harness observes
// it. Violations accumulate in violations().
class ClusterInvariants {
 public:
  // `member` leads `term`: at most one leader per term (election safety).
  void RecordLeader(uint64_t member, uint64_t term);
  // The leader of `term` recorded so far (nullopt: none).
  std::optional<uint64_t> LeaderOf(uint64_t term) const;
  // term -> leader, for every term in which a leader was recorded.
  const std::map<uint64_t, uint64_t>& leaders_by_term() const { return leaders_by_term_; }
  // `voter` granted its vote in `term` to `candidate` (a granted vote sent,
  // or a vote persisted): never to another candidate of that term.
  void RecordVote(uint64_t voter, uint64_t term, uint64_t candidate);
  bool VotedFor(uint64_t voter, uint64_t term, uint64_t candidate) const;
  // A leader of `r.term()` won with votes of a majority of the voters of its
  // configuration (itself included), as recorded by RecordVote.
  void CheckElectionQuorum(const Raft& r);
  // Log matching: `member` holds (persisted, or sent) `e` after an entry of
  // term `prev_term`. Two entries of one index and term carry the same
  // content after the same term. `where` says how it was seen.
  void RecordEntry(uint64_t member, const Entry& e, uint64_t prev_term, const char* where);
  // Some member was seen holding an entry of `index` and `term`.
  bool HasEntry(uint64_t index, uint64_t term) const { return entries_.count({index, term}) > 0; }

  // State machine safety: what `r`'s commit index covers above `from` (its
  // snapshot, then its entries) is the entry committed there before; the
  // first commit of an index records it, with `observed_term` (the highest
  // term any member has then) for CheckLeaderCompleteness.
  void CheckCommitted(const Raft& r, uint64_t from, uint64_t observed_term);
  // Leader completeness: a leader of r.term() holds every entry known
  // committed before that term began.
  void CheckLeaderCompleteness(const Raft& r);
  // Entries known committed: index i + 1 at position i.
  const std::vector<Entry>& committed() const { return committed_; }
  // The latest valid committed ENTRY_CONFIG at or below `index` (nullptr:
  // none).
  const MembershipConfig* CommittedConfigAt(uint64_t index) const;

  void Violation(std::string what) { violations_.push_back(std::move(what)); }
  const std::vector<std::string>& violations() const { return violations_; }
  std::vector<std::string>* mutable_violations() { return &violations_; }

 private:
  struct EntryInfo {
    EntryType type;
    std::string data;
    uint64_t prev_term;
  };
  std::map<uint64_t, uint64_t> leaders_by_term_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> votes_;  // (voter, term) -> candidate
  std::map<std::pair<uint64_t, uint64_t>, EntryInfo> entries_;  // (index, term)
  std::vector<Entry> committed_;
  std::vector<uint64_t> committed_obs_term_;  // observed_term when entry i was first committed
  std::map<uint64_t, MembershipConfig> committed_configs_;  // index -> config entry
  std::vector<std::string> violations_;
};

// Same index, term, type and data.
bool SameEntryContent(const Entry& a, const Entry& b);
// "index/term noop", "index/term cmd '<data prefix>'" or "index/term config".
std::string DescribeEntry(const Entry& e);

}  // namespace raftkv::raft
