#include "gtest/raft/sim/sim_cluster.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace raftkv::raft::sim {
namespace {

// The cluster whose Report() is printed if a CHECK in the core aborts the
// process (so even a crash names the seed and the last events).
SimCluster* g_active = nullptr;

// GNU noreturn, not [[noreturn]]: glog's logging_fail_func_t carries it under
// __GNUC__, and clang makes it part of the function type (no conversion).
#if defined(__GNUC__)
__attribute__((noreturn))
#else
[[noreturn]]
#endif
void OnGlogFailure() {
  if (g_active != nullptr) {
    std::fprintf(stderr, "\n==== core CHECK failed inside the simulation ====\n%s\n",
                 g_active->Report().c_str());
  }
  std::abort();
}

void QuietGlogOnce() {
  static bool done = false;
  if (done) return;
  done = true;
  if (std::getenv("RAFT_SIM_VERBOSE") == nullptr) FLAGS_minloglevel = google::GLOG_ERROR;
  google::InstallFailureFunction(&OnGlogFailure);
}

bool SameEntry(const Entry& a, const Entry& b) { return SameEntryContent(a, b); }

std::string U(uint64_t v) { return std::to_string(v); }

// FNV-1a over an entry, chained: the digest of a state machine is a function
// of the whole sequence of entries it applied.
uint64_t Mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}
uint64_t DigestAfter(uint64_t digest, const Entry& e) {
  uint64_t h = Mix(digest ^ 0xcbf29ce484222325ull, e.index());
  h = Mix(h, e.term());
  h = Mix(h, static_cast<uint64_t>(e.type()));
  for (unsigned char ch : e.data()) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::string ConfigString(const MembershipConfig& config) { return DescribeMembership(config); }

std::string EntryString(const Entry& e) { return DescribeEntry(e); }

std::vector<uint64_t> TestSeeds(int default_count) {
  std::vector<uint64_t> seeds;
  if (const char* one = std::getenv("RAFT_SIM_SEED")) {
    seeds.push_back(std::strtoull(one, nullptr, 10));
    return seeds;
  }
  int count = default_count;
  if (const char* scale = std::getenv("RAFT_SIM_SCALE")) count *= std::max(1, std::atoi(scale));
  if (const char* n = std::getenv("RAFT_SIM_SEEDS")) count = std::atoi(n);
  for (int i = 1; i <= count; ++i) seeds.push_back(static_cast<uint64_t>(i));
  return seeds;
}

// ---------------------------------------------------------------------------
// Construction, crash and restart
// ---------------------------------------------------------------------------

SimCluster::SimCluster(const SimOptions& options) : options_(options), rng_(options.seed) {
  QuietGlogOnce();
  // RAFT_SIM_TRACE=<n>: keep the last n events for Report() (debugging).
  if (const char* trace = std::getenv("RAFT_SIM_TRACE")) {
    options_.trace_capacity = std::strtoull(trace, nullptr, 10);
  }
  g_active = this;
  for (int i = 1; i <= options_.nodes; ++i) {
    const uint64_t id = static_cast<uint64_t>(i);
    ids_.push_back(id);
    nodes_[id].id = id;
    group_[id] = 0;
    MemberConfig* m = bootstrap_.add_members();
    m->set_id(id);
    m->set_address(Address(id));
    m->set_voter(true);
  }
  for (uint64_t id : ids_) nodes_[id].bootstrap = bootstrap_;
  next_tick_at_ = static_cast<uint64_t>(options_.tick_interval);
  for (uint64_t id : ids_) StartCore(nodes_[id]);
  AfterStep();
}

SimCluster::~SimCluster() {
  if (g_active == this) g_active = nullptr;
}

SimCluster::Node& SimCluster::At(uint64_t node) {
  auto it = nodes_.find(node);
  CHECK(it != nodes_.end()) << "no node " << node;
  return it->second;
}

const SimCluster::Node& SimCluster::At(uint64_t node) const {
  auto it = nodes_.find(node);
  CHECK(it != nodes_.end()) << "no node " << node;
  return it->second;
}

Raft* SimCluster::core(uint64_t node) { return At(node).core.get(); }
const Raft* SimCluster::core(uint64_t node) const { return At(node).core.get(); }
bool SimCluster::alive(uint64_t node) const { return At(node).core != nullptr; }
bool SimCluster::crash_pending(uint64_t node) const { return At(node).crash_at.has_value(); }

std::string SimCluster::Address(uint64_t id) { return "sim-" + U(id); }

void SimCluster::StartCore(Node& n) {
  ++n.incarnation;
  Config config;
  config.id = n.id;
  config.bootstrap = n.bootstrap;
  config.voters = VoterIds(n.bootstrap);
  config.promote_max_lag = options_.promote_max_lag;
  config.election_ticks = options_.election_ticks;
  config.heartbeat_ticks = options_.heartbeat_ticks;
  config.pre_vote = options_.pre_vote;
  config.check_quorum = options_.check_quorum;
  config.max_inflight_appends = options_.max_inflight_appends;
  config.max_append_entries = options_.max_append_entries;
  config.max_inflight_bytes = options_.max_inflight_bytes;
  config.max_append_bytes = options_.max_append_bytes;
  config.tick_ms = 0;  // every entry at cluster time 0
  config.seed = options_.seed * 1000003ull + n.id * 7919ull + n.incarnation * 104729ull;
  if (n.log_first != n.base.index + 1) {
    Violation("sim bug: node " + U(n.id) + " durable log starts at " + U(n.log_first) +
              " but its base snapshot is at " + U(n.base.index));
  }
  if (n.base.index == 0) {
    n.core = std::make_unique<Raft>(config, n.hs, n.log);
    n.applied.clear();
    n.digest = 0;
  } else {
    SnapshotRef base;
    base.index = n.base.index;
    base.term = n.base.term;
    base.config = n.base.config;
    n.core = std::make_unique<Raft>(config, n.hs, base, n.log);
    n.applied = n.base.image->entries;
    n.digest = n.base.image->digest;
  }
  n.config_reported = false;
  n.checks.Reset();
  n.recorded_commit = 0;
  n.leader_seen_term = 0;
  n.pending_rpcs.clear();
  n.rpcs_in_progress.clear();
  n.crash_at.reset();
  n.inflight.reset();
  // A term that was never durable was never revealed to anyone either.
  n.max_term = n.hs.term;
  Trace("start node " + U(n.id) + " incarnation " + U(n.incarnation) + " hs=" + U(n.hs.term) + "/" +
        U(n.hs.vote) + " snapshot=" + U(n.base.index) + "/" + U(n.base.term) + " log=" +
        U(n.log_first) + ".." + U(DurableLast(n)));
  if (n.core->term() != n.hs.term || n.core->vote() != n.hs.vote) {
    Violation("node " + U(n.id) + " restarted with term/vote " + U(n.core->term()) + "/" +
              U(n.core->vote()) + " but the durable hard state is " + U(n.hs.term) + "/" +
              U(n.hs.vote));
  }
  if (n.core->last_index() != DurableLast(n)) {
    Violation("node " + U(n.id) + " restarted with last_index " + U(n.core->last_index()) +
              " but the durable log ends at " + U(DurableLast(n)));
  }
  if (n.core->snapshot().index != n.base.index || n.core->snapshot().term != n.base.term ||
      n.core->commit_index() < n.base.index) {
    Violation("node " + U(n.id) + " restarted from snapshot " + U(n.base.index) + "/" +
              U(n.base.term) + " but its core has snapshot " + U(n.core->snapshot().index) + "/" +
              U(n.core->snapshot().term) + " and commit " + U(n.core->commit_index()));
  }
  if (n.base.index > 0 && !SameMembership(n.core->MembershipAt(n.base.index), n.base.config)) {
    Violation("node " + U(n.id) + " restarted from snapshot " + U(n.base.index) +
              " with configuration " + ConfigString(n.base.config) + " but its core has " +
              ConfigString(n.core->MembershipAt(n.base.index)) + " there");
  }
  ProcessReady(n);
}

// ---------------------------------------------------------------------------
// Membership, transfer, snapshots
// ---------------------------------------------------------------------------

uint64_t SimCluster::AddNode() {
  const uint64_t id = *std::max_element(ids_.begin(), ids_.end()) + 1;
  ids_.push_back(id);
  Node& n = nodes_[id];
  n.id = id;
  n.bootstrap = bootstrap_;
  group_[id] = 0;
  ++event_;
  Trace("ADD node " + U(id) + " (joining, bootstrap " + ConfigString(bootstrap_) + ")");
  StartCore(n);
  AfterStep();
  return id;
}

ProposeResult SimCluster::ProposeMembershipChange(uint64_t node, const MembershipChange& change) {
  Node& n = At(node);
  if (!n.core || !ok()) return ProposeResult{};
  ++event_;
  Raft& r = *n.core;
  const MembershipConfig before = r.membership();
  const bool was_leader = r.role() == Role::kLeader;
  const bool config_pending = r.membership_index() > r.commit_index();
  const bool term_committed = r.TermAt(r.commit_index()) == r.term() && r.commit_index() > 0;
  const bool transferring = r.transfer_target() != 0;
  uint64_t lag = 0;
  uint64_t match = 0;
  if (change.type == ChangeType::kPromote && was_leader) {
    const Progress* pr = r.ProgressOf(change.id);
    match = pr != nullptr ? pr->match() : 0;
    lag = r.last_index() - match;
  }
  MembershipConfig expected;
  const std::string invalid = ApplyChange(before, change, &expected).message();
  ProposeResult res = r.ProposeMembershipChange(change);
  const std::string what = std::string(ChangeTypeName(change.type)) + " " + U(change.id);
  Trace("membership change at " + U(node) + " (" + what + ") -> " +
        (res.accepted ? "index " + U(res.index) + " term " + U(res.term)
                      : "refused: " + res.error.message()));
  if (res.accepted) {
    ++stats_.config_changes;
    // (A leader's configuration changes only here: it never truncates.)
    for (auto& [id, rc] : read_calls_) {
      if (!rc.done && rc.node == node && rc.incarnation == n.incarnation) {
        rc.voter_sets.push_back(r.voters());
      }
    }
    if (!was_leader) Violation("node " + U(node) + " accepted " + what + " while not leader");
    if (!invalid.empty()) {
      Violation("leader " + U(node) + " accepted invalid change " + what + " (" + invalid + ")");
    }
    if (config_pending) {
      Violation("leader " + U(node) + " accepted " + what +
                " while an earlier configuration entry is uncommitted (config index " +
                U(r.membership_index()) + ", commit " + U(r.commit_index()) + ")");
    }
    if (!term_committed) {
      Violation("leader " + U(node) + " accepted " + what +
                " before committing an entry of its term " + U(r.term()));
    }
    if (transferring) {
      Violation("leader " + U(node) + " accepted " + what + " during a leadership transfer");
    }
    if (change.type == ChangeType::kPromote && match == 0) {
      Violation("leader " + U(node) + " promoted " + U(change.id) + ", which has acknowledged nothing");
    }
    if (change.type == ChangeType::kPromote && lag > options_.promote_max_lag) {
      Violation("leader " + U(node) + " promoted " + U(change.id) + " lagging " + U(lag) +
                " entries (max " + U(options_.promote_max_lag) + ")");
    }
    if (res.index != r.last_index() || res.term != r.term() || r.TermAt(res.index) != res.term) {
      Violation("membership change at " + U(node) + " returned index/term " + U(res.index) + "/" +
                U(res.term) + " but the log ends at " + U(r.last_index()) + "/" +
                U(r.last_term()));
    } else {
      const Entry& e = r.EntryAt(res.index);
      MembershipConfig in_entry;
      if (e.type() != ENTRY_CONFIG || !in_entry.ParseFromString(e.data()) ||
          (invalid.empty() && !SameMembership(in_entry, expected))) {
        Violation("membership change " + what + " at " + U(node) + " appended " + EntryString(e) +
                  ", want a configuration entry " + ConfigString(expected));
      }
      if (invalid.empty() && (!SameMembership(r.membership(), expected) ||
                              r.membership_index() != res.index)) {
        Violation("after appending " + what + " at index " + U(res.index) + " node " + U(node) +
                  " has configuration " + ConfigString(r.membership()) + " (entry " +
                  U(r.membership_index()) + "), want " + ConfigString(expected));
      }
    }
  } else if (was_leader && res.error.ok()) {
    Violation("leader " + U(node) + " refused " + what + " without saying why");
  }
  ProcessReady(n);
  AfterStep();
  return res;
}

std::string SimCluster::TransferLeadership(uint64_t node, uint64_t target) {
  Node& n = At(node);
  if (!n.core || !ok()) return "node down";
  ++event_;
  Raft& r = *n.core;
  const bool was_leader = r.role() == Role::kLeader;
  const bool target_voter = r.IsVoter(target);
  const std::string err = r.TransferLeadership(target).message();
  Trace("transfer leadership at " + U(node) + " to " + U(target) + " -> " +
        (err.empty() ? std::string("started") : "refused: " + err));
  if (err.empty()) {
    if (!was_leader) Violation("node " + U(node) + " started a transfer while not leader");
    if (!target_voter || target == node) {
      Violation("leader " + U(node) + " started a transfer to " + U(target) +
                ", which is not another voter");
    }
    if (r.role() == Role::kLeader && r.transfer_target() != target) {
      Violation("leader " + U(node) + " started a transfer to " + U(target) +
                " but transfer_target() is " + U(r.transfer_target()));
    }
  }
  ProcessReady(n);
  AfterStep();
  return err;
}

bool SimCluster::TakeSnapshot(uint64_t node) {
  Node& n = At(node);
  if (!n.core || !ok()) return false;
  ++event_;
  const bool done = DoSnapshot(n);
  ProcessReady(n);
  AfterStep();
  return done;
}

bool SimCluster::DoSnapshot(Node& n) {
  Raft& r = *n.core;
  const uint64_t index = n.applied.size();
  if (index == 0 || index <= r.snapshot().index || index <= n.base.index) return false;
  const uint64_t term = r.TermAt(index);
  const MembershipConfig config = r.MembershipAt(index);
  if (term != n.applied.back().term()) {
    Violation("node " + U(n.id) + " applied " + EntryString(n.applied.back()) +
              " but its core says TermAt(" + U(index) + ") = " + U(term));
  }
  const MembershipConfig want = CommittedConfigAt(index);
  if (!SameMembership(config, want)) {
    Violation("node " + U(n.id) + ": MembershipAt(" + U(index) + ") = " + ConfigString(config) +
              " but the committed history has " + ConfigString(want) + " there");
  }
  if (!r.Compact(index)) {
    Violation("node " + U(n.id) + ": Compact(" + U(index) +
              ") refused, but that index is applied (snapshot at " + U(r.snapshot().index) + ")");
    return false;
  }
  if (r.snapshot().index != index || r.snapshot().term != term || r.first_index() != index + 1 ||
      (index > 1 && r.TermAt(index - 1) != 0) || r.TermAt(index) != term) {
    Violation("node " + U(n.id) + " after Compact(" + U(index) + "): snapshot " +
              U(r.snapshot().index) + "/" + U(r.snapshot().term) + ", first_index " +
              U(r.first_index()) + ", TermAt(index-1) " + U(index > 1 ? r.TermAt(index - 1) : 0) +
              " (want " + U(index) + "/" + U(term) + ", " + U(index + 1) + ", 0)");
  }
  SnapshotFile f;
  f.index = index;
  f.term = term;
  f.config = config;
  f.origin = n.id;
  auto image = std::make_shared<SmImage>();
  image->entries = n.applied;
  image->digest = n.digest;
  f.image = std::move(image);
  n.files[{index, term}] = f;
  n.base = f;
  if (DurableLast(n) < index) {
    Violation("node " + U(n.id) + " snapshots at " + U(index) +
              " beyond its durable log (which ends at " + U(DurableLast(n)) + ")");
  }
  // The durable log drops what the snapshot covers (LogStore::CompactPrefix).
  const uint64_t drop = std::min<uint64_t>(index + 1 - n.log_first, n.log.size());
  n.log.erase(n.log.begin(), n.log.begin() + static_cast<std::ptrdiff_t>(drop));
  if (!n.log.empty() && n.log.front().index() != index + 1) {
    Violation("sim bug: node " + U(n.id) + " durable log after compaction starts at " +
              EntryString(n.log.front()));
  }
  n.log_first = index + 1;
  ++stats_.snapshots_taken;
  Trace("SNAPSHOT node " + U(n.id) + " at " + U(index) + "/" + U(term) + " config " +
        ConfigString(config));
  PruneSnapshotFiles(n);
  return true;
}

void SimCluster::PruneSnapshotFiles(Node& n) {
  const size_t keep = std::max<size_t>(1, options_.snapshots_kept);
  while (n.files.size() > keep) {
    // The oldest file, if older than the base (newer ones may be received
    // snapshots waiting to be installed).
    auto victim = n.files.begin();
    if (victim->first.first >= n.base.index) break;
    Trace("node " + U(n.id) + " deletes snapshot file " + U(victim->first.first) + "/" +
          U(victim->first.second));
    n.files.erase(victim);
  }
}

void SimCluster::DeleteOldSnapshotFiles(uint64_t node) {
  Node& n = At(node);
  for (auto it = n.files.begin(); it != n.files.end();) {
    // Newer files may be received snapshots waiting to be installed.
    if (it->first.first >= n.base.index) {
      ++it;
    } else {
      Trace("node " + U(n.id) + " deletes snapshot file " + U(it->first.first) + "/" +
            U(it->first.second));
      it = n.files.erase(it);
    }
  }
}

void SimCluster::InstallSnapshotDurably(Node& n, const SnapshotRef& s) {
  auto it = n.files.find({s.index, s.term});
  if (it == n.files.end()) {
    Violation("node " + U(n.id) + ": Ready::snapshot names snap-" + U(s.index) + "-" + U(s.term) +
              ", which is not in its snapshot store");
    return;
  }
  if (!SameMembership(it->second.config, s.config)) {
    Violation("node " + U(n.id) + ": Ready::snapshot " + U(s.index) + "/" + U(s.term) +
              " has configuration " + ConfigString(s.config) + " but the file says " +
              ConfigString(it->second.config));
  }
  if (s.index <= n.base.index) {
    Violation("node " + U(n.id) + " is told to install snapshot " + U(s.index) + "/" +
              U(s.term) + " but its log is already based on snapshot " + U(n.base.index));
    return;
  }
  // LogStore: keep the entries after the snapshot if the log holds its index
  // and term (CompactPrefix), otherwise start over empty (Reset).
  const bool matches = DurableTermAt(n, s.index) == s.term;
  if (matches) {
    const uint64_t drop = s.index + 1 - n.log_first;
    n.log.erase(n.log.begin(), n.log.begin() + static_cast<std::ptrdiff_t>(drop));
  } else {
    n.log.clear();
  }
  n.log_first = s.index + 1;
  n.base = it->second;
  Trace("node " + U(n.id) + " installs snapshot " + U(s.index) + "/" + U(s.term) +
        (matches ? " (log suffix kept: " + U(n.log.size()) + " entries)"
                 : std::string(" (log reset)")));
}

void SimCluster::RestoreStateMachine(Node& n, const SnapshotRef& s) {
  auto it = n.files.find({s.index, s.term});
  if (it == n.files.end()) return;  // reported by InstallSnapshotDurably
  if (s.index <= n.applied.size()) {
    Violation("node " + U(n.id) + " is told to restore snapshot " + U(s.index) + "/" + U(s.term) +
              " but its state machine already applied " + U(n.applied.size()) +
              " entries (it would go back)");
  }
  n.applied = it->second.image->entries;
  n.digest = it->second.image->digest;
  ++stats_.snapshots_installed;
  CheckDigest(n);
}

void SimCluster::Applied(Node& n, const Entry& e) {
  n.applied.push_back(e);
  n.digest = DigestAfter(n.digest, e);
  CheckDigest(n);
}

void SimCluster::CheckDigest(Node& n) {
  const uint64_t index = n.applied.size();
  if (index == 0) return;
  auto [it, inserted] = digest_at_.emplace(index, n.digest);
  if (!inserted && it->second != n.digest) {
    Violation("state machines differ: node " + U(n.id) + " at applied index " + U(index) +
              " has a state different from another node's at that index (last applied " +
              EntryString(n.applied.back()) + ")");
  }
}

MembershipConfig SimCluster::CommittedConfigAt(uint64_t index) const {
  const MembershipConfig* config = cluster_.CommittedConfigAt(index);
  return config != nullptr ? *config : bootstrap_;
}

const Entry* SimCluster::DurableEntry(const Node& n, uint64_t index) {
  if (index < n.log_first || index > DurableLast(n)) return nullptr;
  return &n.log[index - n.log_first];
}

uint64_t SimCluster::DurableTermAt(const Node& n, uint64_t index) {
  if (index == 0) return 0;
  if (index == n.base.index) return n.base.term;
  const Entry* e = DurableEntry(n, index);
  return e == nullptr ? 0 : e->term();
}

uint64_t SimCluster::DurableLastTerm(const Node& n) {
  return n.log.empty() ? n.base.term : n.log.back().term();
}

bool SimCluster::DurablyHas(const Node& n, const Entry& e) const {
  if (e.index() <= n.base.index) {
    return n.base.image != nullptr && e.index() <= n.base.image->entries.size() &&
           SameEntry(n.base.image->entries[e.index() - 1], e);
  }
  const Entry* d = DurableEntry(n, e.index());
  return d != nullptr && SameEntry(*d, e);
}

const Entry* SimCluster::persisted_entry(uint64_t node, uint64_t index) const {
  return DurableEntry(At(node), index);
}

void SimCluster::Crash(uint64_t node, CrashPoint point) {
  Node& n = At(node);
  if (!n.core) return;
  if (point == CrashPoint::kNow) {
    ++event_;
    DoCrash(n);
    AfterStep();
  } else {
    n.crash_at = point;
    Trace("node " + U(node) + " will crash at its next durable Ready (" +
          (point == CrashPoint::kBeforePersist ? "before persist" : "after persist") + ")");
  }
}

void SimCluster::DoCrash(Node& n) {
  Trace("CRASH node " + U(n.id) + " incarnation " + U(n.incarnation) +
        " (durable: hs=" + U(n.hs.term) + "/" + U(n.hs.vote) + " log=" + U(n.log_first) + ".." +
        U(DurableLast(n)) +
        (n.core ? ", in memory: log=" + U(n.core->last_index()) : std::string()) + ")");
  if (n.inflight) {
    // A write was in progress. The hard state file is saved first; then the log is truncated (if
    // the write starts inside it) and records are appended in order, so a crash leaves the old
    // state, or the new hard state and a prefix of the entries (a torn tail is cut off on
    // recovery).
    Ready partial = std::move(*n.inflight);
    n.inflight.reset();
    if (rng_.Chance(0.3)) {
      Trace("  the in-progress write is lost");
    } else {
      const size_t keep = static_cast<size_t>(rng_.Uniform(partial.entries.size() + 1));
      Trace("  the in-progress write is durable up to " + U(keep) + " of " +
            U(partial.entries.size()) + " entries");
      const std::vector<Entry> all = partial.entries;
      partial.entries.resize(keep);
      Persist(n, partial);
      if (keep == 0 && !all.empty() && all.front().index() <= DurableLast(n)) {
        TruncateDurable(n, all.front().index(), all);  // truncated, nothing appended
      }
    }
  }
  n.core.reset();
  // Calls this node was serving fail at their callers.
  for (const auto& [rpc, call] : n.rpcs_in_progress) {
    ScheduleUnreachable(call.requester, call.requester_incarnation, n.id, true);
  }
  n.pending_rpcs.clear();
  n.rpcs_in_progress.clear();
  n.crash_at.reset();
  for (auto& [id, rc] : read_calls_) {
    if (rc.node == n.id && rc.incarnation == n.incarnation) rc.done = true;
  }
}

void SimCluster::Restart(uint64_t node) {
  Node& n = At(node);
  if (n.core) return;
  ++event_;
  StartCore(n);
  AfterStep();
}

// ---------------------------------------------------------------------------
// Partitions
// ---------------------------------------------------------------------------

void SimCluster::Partition(const std::vector<std::vector<uint64_t>>& groups) {
  for (uint64_t id : ids_) group_[id] = 1000 + static_cast<int>(id);
  std::string text = "PARTITION";
  for (size_t g = 0; g < groups.size(); ++g) {
    text += " {";
    for (uint64_t id : groups[g]) {
      group_[id] = static_cast<int>(g);
      text += " " + U(id);
    }
    text += " }";
  }
  Trace(text);
}

void SimCluster::Isolate(uint64_t node) {
  for (uint64_t id : ids_) group_[id] = 0;
  group_[node] = 1;
  Trace("ISOLATE node " + U(node));
}

void SimCluster::Heal() {
  for (uint64_t id : ids_) group_[id] = 0;
  Trace("HEAL");
}

bool SimCluster::CanTalk(uint64_t a, uint64_t b) const { return group_.at(a) == group_.at(b); }

// ---------------------------------------------------------------------------
// Driving
// ---------------------------------------------------------------------------

bool SimCluster::RunOneEvent() {
  if (!ok()) return false;
  ++event_;
  if (!queue_.empty() && queue_.begin()->first.first < next_tick_at_) {
    Envelope env = std::move(queue_.begin()->second);
    queue_.erase(queue_.begin());
    now_ = std::max(now_, env.deliver_at);
    Deliver(std::move(env));
  } else {
    TickAll();
  }
  return ok();
}

void SimCluster::RunTicks(int ticks) {
  const uint64_t target = ticks_ + static_cast<uint64_t>(ticks);
  while (ticks_ < target && RunOneEvent()) {
  }
}

bool SimCluster::RunUntil(const std::function<bool()>& pred, int max_ticks) {
  if (pred()) return true;
  const uint64_t target = ticks_ + static_cast<uint64_t>(max_ticks);
  while (ticks_ < target) {
    if (!RunOneEvent()) return false;
    if (pred()) return true;
  }
  return false;
}

void SimCluster::DrainNetwork(int max_deliveries) {
  for (int i = 0; i < max_deliveries && !queue_.empty() && ok(); ++i) {
    ++event_;
    Envelope env = std::move(queue_.begin()->second);
    queue_.erase(queue_.begin());
    now_ = std::max(now_, env.deliver_at);
    Deliver(std::move(env));
  }
  const uint64_t interval = static_cast<uint64_t>(options_.tick_interval);
  while (next_tick_at_ <= now_) next_tick_at_ += interval;
}

void SimCluster::TickAll() {
  now_ = next_tick_at_;
  next_tick_at_ += static_cast<uint64_t>(options_.tick_interval);
  ++ticks_;
  Trace("tick " + U(ticks_));
  for (uint64_t id : ids_) {
    Node& n = nodes_[id];
    if (!n.core) continue;
    n.core->Tick();
    if (after_tick) after_tick(id);
    if (!n.core) continue;
    ProcessReady(n);
    AfterStep();
  }
}

// ---------------------------------------------------------------------------
// Client operations
// ---------------------------------------------------------------------------

ProposeResult SimCluster::Propose(uint64_t node, const std::string& data) {
  Node& n = At(node);
  if (!n.core || !ok()) return ProposeResult{};
  ++event_;
  const bool transferring = n.core->role() == Role::kLeader && n.core->transfer_target() != 0;
  ProposeResult r = n.core->Propose(data);
  Trace("propose at " + U(node) + " '" + data.substr(0, 24) + "' -> " +
        (r.accepted ? "index " + U(r.index) + " term " + U(r.term)
                    : "refused" + (r.error.ok() ? std::string() : ": " + r.error.message())));
  if (r.accepted) {
    if (n.core->role() != Role::kLeader) {
      Violation("node " + U(node) + " accepted a proposal while " + RoleName(n.core->role()));
    }
    if (transferring) {
      Violation("leader " + U(node) + " accepted a proposal during a leadership transfer to " +
                U(n.core->transfer_target()));
    }
    if (r.index != n.core->last_index() || r.term != n.core->term() ||
        n.core->TermAt(r.index) != r.term) {
      Violation("proposal at node " + U(node) + " returned index/term " + U(r.index) + "/" +
                U(r.term) + " but the log ends at " + U(n.core->last_index()) + "/" +
                U(n.core->last_term()) + " in term " + U(n.core->term()));
    }
  } else if (n.core->role() == Role::kLeader && !(transferring && !r.error.ok())) {
    Violation("leader " + U(node) + " refused a proposal" +
              (transferring ? " without saying why" : " (no transfer in progress): " + r.error.message()));
  }
  ProcessReady(n);
  AfterStep();
  return r;
}

ProposeResult SimCluster::ProposeToLeader(const std::string& data, uint64_t* leader_out) {
  uint64_t leader = StableLeader();
  if (leader == 0) leader = Leader();
  if (leader_out != nullptr) *leader_out = leader;
  if (leader == 0) return ProposeResult{};
  return Propose(leader, data);
}

bool SimCluster::ReadIndex(uint64_t node, uint64_t read_id) {
  Node& n = At(node);
  if (!n.core || !ok()) return false;
  ++event_;
  const bool accepted = n.core->ReadIndex(read_id);
  Trace("read " + U(read_id) + " at " + U(node) + (accepted ? " accepted" : " refused") +
        " (commit " + U(n.core->commit_index()) + ")");
  if (accepted) {
    if (n.core->role() != Role::kLeader) {
      Violation("node " + U(node) + " accepted ReadIndex while " + RoleName(n.core->role()));
    }
    if (read_calls_.count(read_id) != 0) {
      Fail("test bug: read id " + U(read_id) + " used twice");
    }
    ReadCall& rc = read_calls_[read_id];
    rc.node = node;
    rc.incarnation = n.incarnation;
    rc.call_event = event_;
    rc.min_index = MaxCommitAnywhere();
    rc.voter_sets.push_back(n.core->voters());
  } else if (n.core->role() == Role::kLeader) {
    Violation("leader " + U(node) + " refused ReadIndex");
  }
  ProcessReady(n);
  AfterStep();
  return accepted;
}

// ---------------------------------------------------------------------------
// Network
// ---------------------------------------------------------------------------

void SimCluster::Enqueue(Envelope env) {
  env.seq = next_seq_++;
  uint64_t at = now_ + static_cast<uint64_t>(rng_.Range(options_.min_delay, options_.max_delay));
  if (options_.reorder && rng_.Chance(options_.long_delay_prob)) {
    at += static_cast<uint64_t>(options_.tick_interval) *
          static_cast<uint64_t>(rng_.Range(1, options_.long_delay_max_ticks));
  }
  if (!options_.reorder) {
    uint64_t& last = last_delivery_on_link_[{env.msg.from, env.msg.to}];
    at = std::max(at, last);
    last = at;
  }
  env.deliver_at = at;
  queue_.emplace(std::make_pair(at, env.seq), std::move(env));
}

void SimCluster::Send(Node& n, const Message& m, bool before_persist) {
  ValidateOutgoing(n, m, before_persist);
  Envelope env;
  env.msg = m;
  env.send_event = event_;
  env.from_incarnation = n.incarnation;
  if (env.msg.IsResponse()) {
    auto it = n.rpcs_in_progress.find(env.msg.rpc_id);
    if (it != n.rpcs_in_progress.end()) {
      env.to_incarnation = it->second.requester_incarnation;
      n.rpcs_in_progress.erase(it);
    }
  }
  if (intercept && intercept(env)) {
    Trace("intercepted " + Describe(env.msg));
    return;
  }
  const bool dup = rng_.Chance(options_.dup_prob);
  if (dup) {
    Envelope copy = env;
    copy.duplicate = true;
    Enqueue(std::move(env));
    Enqueue(std::move(copy));
  } else {
    Enqueue(std::move(env));
  }
}

void SimCluster::Inject(Envelope env) {
  Trace("inject " + Describe(env.msg));
  Enqueue(std::move(env));
}

void SimCluster::Drop(const Envelope& env, const char* why) {
  const Message& m = env.msg;
  Trace(std::string("drop (") + why + ") " + Describe(m));
  if (m.type == MessageType::kSnapshot) ++stats_.snapshot_messages_dropped;
  // The failed RPC is reported to the side that made the call.
  if (m.IsResponse()) {
    ScheduleUnreachable(m.to, env.to_incarnation, m.from, false);
  } else {
    ScheduleUnreachable(m.from, env.from_incarnation, m.to, !alive(m.to));
  }
}

void SimCluster::ScheduleUnreachable(uint64_t caller, uint64_t caller_incarnation, uint64_t peer,
                                     bool immediate) {
  if (!rng_.Chance(options_.report_unreachable_prob)) return;
  Envelope env;
  env.unreachable_report = true;
  env.msg.from = peer;
  env.msg.to = caller;
  env.to_incarnation = caller_incarnation;
  env.seq = next_seq_++;
  const uint64_t interval = static_cast<uint64_t>(options_.tick_interval);
  env.deliver_at =
      now_ + (immediate
                  ? 1
                  : interval * static_cast<uint64_t>(rng_.Range(options_.rpc_timeout_min_ticks,
                                                                options_.rpc_timeout_max_ticks)));
  queue_.emplace(std::make_pair(env.deliver_at, env.seq), std::move(env));
}

void SimCluster::Deliver(Envelope env) {
  Message& m = env.msg;
  auto it = nodes_.find(m.to);
  if (it == nodes_.end()) {
    Violation("message to unknown node " + U(m.to) + ": " + Describe(m));
    return;
  }
  Node& dest = it->second;
  if (env.io_completion) {
    if (!dest.core || dest.incarnation != env.to_incarnation || !dest.inflight) return;
    Trace("write done at " + U(dest.id));
    Ready rd = std::move(*dest.inflight);
    std::vector<bool> sent = std::move(dest.inflight_sent);
    dest.inflight.reset();
    if (CompleteReady(dest, rd, sent)) ProcessReady(dest);
    touched_.insert(dest.id);
    AfterStep();
    return;
  }
  if (env.unreachable_report) {
    if (!dest.core || dest.incarnation != env.to_incarnation) return;
    Trace("ReportUnreachable(" + U(m.from) + ") at " + U(m.to));
    dest.core->ReportUnreachable(m.from);
    ProcessReady(dest);
    AfterStep();
    return;
  }
  if (!dest.core) return Drop(env, "destination down");
  if (!CanTalk(m.from, m.to)) return Drop(env, "partitioned");
  if (m.IsResponse() && env.to_incarnation != dest.incarnation) {
    Trace("drop (call of an earlier incarnation) " + Describe(m));
    return;
  }
  if (m.type == MessageType::kSnapshot) {
    // The service streams the file: the stream dies with the sender.
    const Node& src = At(m.from);
    if (!src.core || src.incarnation != env.from_incarnation) {
      Trace("drop (the sender of the snapshot stream restarted) " + Describe(m));
      return;
    }
  }
  if (rng_.Chance(options_.drop_prob)) return Drop(env, "lost");

  if (m.type == MessageType::kSnapshot) {
    // The sender's service opens snap-<index>-<term>; the receiver's stores it.
    const Node& src = At(m.from);
    auto f = src.files.find({m.snapshot.last_index(), m.snapshot.last_term()});
    if (f == src.files.end()) {
      ++stats_.snapshot_transfer_failures;
      Trace("snapshot transfer fails: node " + U(m.from) + " no longer has snap-" +
            U(m.snapshot.last_index()) + "-" + U(m.snapshot.last_term()) + ": " + Describe(m));
      ScheduleUnreachable(m.from, env.from_incarnation, m.to, false);
      return;
    }
    ++stats_.snapshot_transfers;
    dest.files[f->first] = f->second;
    PruneSnapshotFiles(dest);
  }
  if (m.type == MessageType::kTimeoutNow) {
    m.rpc_id = next_rpc_id_++;  // acknowledged by the service; the core answers nothing
  } else if (!m.IsResponse()) {
    const uint64_t rpc = next_rpc_id_++;
    m.rpc_id = rpc;
    PendingRpc call{m.from, env.from_incarnation, m.type};
    dest.pending_rpcs[rpc] = call;
    dest.rpcs_in_progress[rpc] = call;
  }
  // ReadIndex causality: who heard from the leader after the read, and who
  // answered the leader after hearing from it.
  for (auto& [id, rc] : read_calls_) {
    if (rc.done) continue;
    if (m.from == rc.node && env.from_incarnation == rc.incarnation &&
        env.send_event >= rc.call_event) {
      rc.touched.emplace(m.to, event_);
    }
    if (m.to == rc.node && dest.incarnation == rc.incarnation) {
      auto t = rc.touched.find(m.from);
      if (t != rc.touched.end() && env.send_event >= t->second) rc.confirmed.insert(m.from);
    }
  }
  if (on_deliver) on_deliver(env);
  Trace(std::string(env.duplicate ? "deliver(dup) " : "deliver ") + Describe(m) +
        (m.IsResponse() ? "" : " rpc=" + U(m.rpc_id)));
  dest.core->Step(m);
  ProcessReady(dest);
  AfterStep();
}

// ---------------------------------------------------------------------------
// The Ready cycle, as raftkv-server runs it
// ---------------------------------------------------------------------------

void SimCluster::ProcessReady(Node& n) {
  touched_.insert(n.id);
  for (int iter = 0;; ++iter) {
    if (!n.core || n.inflight) return;
    if (n.pending_rpcs.empty() && !n.core->HasReady()) break;
    if (iter >= 1000) {
      Violation("node " + U(n.id) + ": HasReady() stays true after 1000 Ready cycles");
      break;
    }
    // Election safety is recorded before any message of this Ready is checked.
    if (n.core->role() == Role::kLeader) {
      cluster_.RecordLeader(n.id, n.core->term());
      FlushClusterViolations();
    }
    Ready rd = n.core->GetReady();
    if (rd.config) {
      if (!SameMembership(*rd.config, n.core->membership())) {
        Violation("node " + U(n.id) + ": Ready::config " + ConfigString(*rd.config) +
                  " is not the configuration in effect " + ConfigString(n.core->membership()));
      }
      if (!CheckMembership(*rd.config).ok()) {
        Violation("node " + U(n.id) + ": Ready::config is malformed: " +
                  CheckMembership(*rd.config).message());
      }
      n.reported_config = *rd.config;
      n.config_reported = true;
      Trace("node " + U(n.id) + " reports configuration " + ConfigString(*rd.config));
    }
    if (rd.snapshot) {
      if (n.core->role() == Role::kLeader) {
        Violation("leader " + U(n.id) + " hands out Ready::snapshot " + U(rd.snapshot->index));
      }
      Trace("node " + U(n.id) + " Ready::snapshot " + U(rd.snapshot->index) + "/" +
            U(rd.snapshot->term) + " config " + ConfigString(rd.snapshot->config));
    }

    // Every request stepped since the last Ready gets exactly one response.
    std::map<uint64_t, int> responses;
    for (const Message& m : rd.messages) {
      if (!m.IsResponse()) continue;
      ++responses[m.rpc_id];
      auto call = n.pending_rpcs.find(m.rpc_id);
      if (call == n.pending_rpcs.end()) {
        Violation("node " + U(n.id) + " sent a response with rpc_id " + U(m.rpc_id) +
                  " that answers no request stepped since its last Ready: " + Describe(m));
        continue;
      }
      const MessageType want = call->second.type == MessageType::kAppend
                                   ? MessageType::kAppendResp
                                   : call->second.type == MessageType::kSnapshot
                                         ? MessageType::kSnapshotResp
                                         : MessageType::kVoteResp;
      if (m.type != want || m.to != call->second.requester) {
        Violation("node " + U(n.id) + " answered rpc " + U(m.rpc_id) + " (a " +
                  MessageTypeName(call->second.type) + " from " + U(call->second.requester) +
                  ") with " + Describe(m));
      }
    }
    for (const auto& [rpc, call] : n.pending_rpcs) {
      auto r = responses.find(rpc);
      const int count = r == responses.end() ? 0 : r->second;
      if (count != 1) {
        Violation("node " + U(n.id) + " produced " + std::to_string(count) + " responses to rpc " +
                  U(rpc) + " (a " + MessageTypeName(call.type) + " from " + U(call.requester) +
                  ") in the Ready after stepping it; want exactly 1");
      }
    }
    n.pending_rpcs.clear();

    RecordCommit(n);

    // 1. The leader's appends may go out before the write.
    std::vector<bool> sent(rd.messages.size(), false);
    for (size_t i = 0; i < rd.messages.size(); ++i) {
      const Message& m = rd.messages[i];
      if (!rd.SendBeforePersist(m)) continue;
      if (m.IsResponse()) {
        Violation("SendBeforePersist() is true for a response: " + Describe(m));
      }
      sent[i] = true;
      Send(n, m, true);
    }
    // The write may take a while: like raftkv-server's I/O thread, the core
    // is unlocked meanwhile and keeps stepping messages, ticks and proposals;
    // the next GetReady() waits for this Advance().
    if (rng_.Chance(options_.async_persist_prob)) {
      n.inflight = std::move(rd);
      n.inflight_sent = std::move(sent);
      Envelope done;
      done.io_completion = true;
      done.msg.from = n.id;
      done.msg.to = n.id;
      done.to_incarnation = n.incarnation;
      done.seq = next_seq_++;
      done.deliver_at = now_ + static_cast<uint64_t>(rng_.Range(options_.min_persist_delay,
                                                                options_.max_persist_delay));
      queue_.emplace(std::make_pair(done.deliver_at, done.seq), std::move(done));
      return;
    }
    if (!CompleteReady(n, rd, sent)) return;
  }
}

bool SimCluster::CompleteReady(Node& n, const Ready& rd, const std::vector<bool>& sent) {
  {
    const bool durable_work = rd.hard_state.has_value() || !rd.entries.empty();
    if (durable_work && n.crash_at == CrashPoint::kBeforePersist) {
      DoCrash(n);
      return false;
    }
    // 2. Persist.
    Persist(n, rd);
    if (durable_work && n.crash_at == CrashPoint::kAfterPersist) {
      DoCrash(n);
      return false;
    }
    // 3. Everything else reflects durable state.
    for (size_t i = 0; i < rd.messages.size(); ++i) {
      if (!sent[i]) Send(n, rd.messages[i], false);
    }
    n.core->Advance(rd);

    // 4. Apply (a snapshot first: the state machine is restored from it).
    if (rd.snapshot) RestoreStateMachine(n, *rd.snapshot);
    for (const Entry& e : rd.committed) {
      if (e.index() != n.applied.size() + 1) {
        Violation("node " + U(n.id) + " applies index " + U(e.index()) + " after " +
                  U(n.applied.size()) + " (not consecutive)");
        return true;
      }
      if (e.index() > n.core->commit_index()) {
        Violation("node " + U(n.id) + " applies index " + U(e.index()) +
                  " beyond its commit index " + U(n.core->commit_index()));
      }
      if (e.index() > committed().size()) {
        Violation("node " + U(n.id) + " applies " + EntryString(e) +
                  " which no commit index covers (known committed: " + U(committed().size()) + ")");
      } else if (!SameEntry(e, committed()[e.index() - 1])) {
        Violation("state machine safety: node " + U(n.id) + " applies " + EntryString(e) + " but " +
                  EntryString(committed()[e.index() - 1]) + " was committed there");
      }
      Applied(n, e);
    }
    if (options_.snapshot_every > 0 &&
        n.applied.size() >= n.base.index + options_.snapshot_every) {
      DoSnapshot(n);
    }
    for (const ReadState& r : rd.reads) {
      auto rc = read_calls_.find(r.id);
      if (rc == read_calls_.end() || rc->second.node != n.id ||
          rc->second.incarnation != n.incarnation) {
        Violation("node " + U(n.id) + " reports read " + U(r.id) +
                  " that was not registered on this incarnation");
        continue;
      }
      ReadCall& call = rc->second;
      if (call.done) {
        Violation("node " + U(n.id) + " reports read " + U(r.id) + " twice (or after failing it)");
      }
      call.done = true;
      n.reads[r.id] = r;
      if (r.index < call.min_index) {
        Violation("linearizability: read " + U(r.id) + " on node " + U(n.id) + " has index " +
                  U(r.index) + " but index " + U(call.min_index) +
                  " was already committed when it was issued");
      }
      if (r.index > n.core->last_index()) {
        Violation("read " + U(r.id) + " index " + U(r.index) + " beyond the log (" +
                  U(n.core->last_index()) + ")");
      }
      bool quorum_confirmed = false;
      for (const std::vector<uint64_t>& voters : call.voter_sets) {
        size_t confirmed = 0;
        for (uint64_t v : voters) {
          if (v == n.id || call.confirmed.count(v) != 0) ++confirmed;
        }
        if (confirmed >= voters.size() / 2 + 1) quorum_confirmed = true;
      }
      if (!quorum_confirmed) {
        std::string peers;
        for (uint64_t p : call.confirmed) peers += " " + U(p);
        Violation("read " + U(r.id) + " on node " + U(n.id) +
                  " served without a quorum heartbeat round after the call: only {" + peers +
                  " } answered messages sent after it");
      }
    }
    for (uint64_t id : rd.failed_reads) {
      auto rc = read_calls_.find(id);
      if (rc == read_calls_.end() || rc->second.node != n.id) {
        Violation("node " + U(n.id) + " fails read " + U(id) + " it never registered");
        continue;
      }
      if (n.reads.count(id) != 0 || n.failed_reads.count(id) != 0) {
        Violation("node " + U(n.id) + " fails read " + U(id) + " already reported");
      }
      rc->second.done = true;
      n.failed_reads.insert(id);
    }
  }
  return true;
}

void SimCluster::Persist(Node& n, const Ready& rd) {
  if (rd.hard_state) {
    const HardState& hs = *rd.hard_state;
    if (hs.term < n.hs.term) {
      Violation("node " + U(n.id) + " persists term " + U(hs.term) + " after " + U(n.hs.term));
    }
    if (hs.term == n.hs.term && n.hs.vote != 0 && hs.vote != n.hs.vote) {
      Violation("node " + U(n.id) + " changes its durable vote in term " + U(hs.term) + " from " +
                U(n.hs.vote) + " to " + U(hs.vote));
    }
    n.hs = hs;
  }
  if (rd.snapshot) InstallSnapshotDurably(n, *rd.snapshot);
  if (rd.entries.empty()) return;
  const uint64_t first = rd.entries.front().index();
  for (size_t i = 0; i < rd.entries.size(); ++i) {
    if (rd.entries[i].index() != first + i ||
        (i > 0 && rd.entries[i].term() < rd.entries[i - 1].term())) {
      Violation("node " + U(n.id) + ": Ready::entries not contiguous / terms decrease at " +
                EntryString(rd.entries[i]));
      return;
    }
  }
  if (first < n.log_first || first > DurableLast(n) + 1) {
    Violation("node " + U(n.id) + ": Ready::entries start at " + U(first) +
              " but the durable log holds " + U(n.log_first) + ".." + U(DurableLast(n)));
    return;
  }
  if (first <= DurableLast(n)) TruncateDurable(n, first, rd.entries);
  for (const Entry& e : rd.entries) {
    RegisterEntry(n.id, e, DurableLastTerm(n), "persisted");
    n.log.push_back(e);
  }
  if (n.log.back().term() > n.hs.term) {
    Violation("node " + U(n.id) + " persists " + EntryString(n.log.back()) +
              " with a term above its durable term " + U(n.hs.term));
  }
}

void SimCluster::TruncateDurable(Node& n, uint64_t first, const std::vector<Entry>& replacement) {
  // A committed entry this node holds must never be removed.
  for (uint64_t i = first; i <= DurableLast(n); ++i) {
    if (i > committed().size()) break;
    if (!SameEntry(*DurableEntry(n, i), committed()[i - 1])) continue;
    const size_t k = static_cast<size_t>(i - first);
    if (k >= replacement.size() || !SameEntry(replacement[k], committed()[i - 1])) {
      Violation("node " + U(n.id) + " truncates its log from " + U(first) +
                ", removing committed entry " + EntryString(committed()[i - 1]));
      break;
    }
  }
  n.log.resize(first - n.log_first);
}

void SimCluster::ValidateOutgoing(Node& n, const Message& m, bool before_persist) {
  if (m.from != n.id) {
    Violation("node " + U(n.id) + " sends a message with from=" + U(m.from) + ": " + Describe(m));
  }
  if (m.to == n.id || nodes_.count(m.to) == 0) {
    Violation("node " + U(n.id) + " sends a message to " + U(m.to) + ": " + Describe(m));
    return;
  }
  // Durability before sending: a message never carries state this node could
  // forget in a crash. Its term is durable (pre-vote messages carry a
  // prospective term and promise nothing); a vote request carries a durable
  // self-vote and a granted vote a durable vote for the candidate (or the
  // node is durably in a later term, where it can never vote in that one).
  const bool pre_vote = (m.type == MessageType::kVote && m.vote.pre_vote()) ||
                        (m.type == MessageType::kVoteResp && m.vote_resp.pre_vote());
  if (!pre_vote && m.Term() > n.hs.term) {
    Violation("node " + U(n.id) + " sends a message of term " + U(m.Term()) +
              " before that term is durable (durable term " + U(n.hs.term) + ")" +
              (before_persist ? " ahead of its write" : "") + ": " + Describe(m));
  }
  if (m.type == MessageType::kVote && !m.vote.pre_vote() && n.hs.term <= m.vote.term() &&
      (n.hs.term != m.vote.term() || n.hs.vote != n.id)) {
    Violation("node " + U(n.id) + " asks for votes in term " + U(m.vote.term()) +
              " before its own vote is durable (durable " + U(n.hs.term) + "/" + U(n.hs.vote) +
              "): " + Describe(m));
  }
  if (m.type == MessageType::kVoteResp && !m.vote_resp.pre_vote() && m.vote_resp.granted() &&
      n.hs.term <= m.vote_resp.term() && (n.hs.term != m.vote_resp.term() || n.hs.vote != m.to)) {
    Violation("node " + U(n.id) + " grants its vote in term " + U(m.vote_resp.term()) + " to " +
              U(m.to) + " before the vote is durable (durable " + U(n.hs.term) + "/" +
              U(n.hs.vote) + "): " + Describe(m));
  }
  if (m.type == MessageType::kSnapshotResp && m.snapshot_resp.success() &&
      m.snapshot_resp.term() == n.hs.term &&
      m.snapshot_resp.match_index() > std::max(DurableLast(n), n.base.index)) {
    Violation("node " + U(n.id) + " acknowledges a snapshot up to " +
              U(m.snapshot_resp.match_index()) + " but its durable state ends at " +
              U(std::max(DurableLast(n), n.base.index)) + ": " + Describe(m));
  }
  switch (m.type) {
    case MessageType::kAppend: {
      const AppendEntriesRequest& a = m.append;
      if (cluster_.LeaderOf(a.term()) != n.id) {
        Violation("node " + U(n.id) + " sends AppendEntries in term " + U(a.term()) +
                  " without having been its leader: " + Describe(m));
      }
      if (a.to() != m.to || a.leader_id() != n.id) {
        Violation("AppendEntries header fields wrong: to=" + U(a.to()) +
                  " leader_id=" + U(a.leader_id()) + ": " + Describe(m));
      }
      uint64_t prev_term = a.prev_log_term();
      if (a.prev_log_index() > 0 && a.prev_log_term() == 0) {
        Violation("node " + U(n.id) + " sends AppendEntries with prev index " +
                  U(a.prev_log_index()) + " but prev term 0 (compacted or unknown): " +
                  Describe(m));
      } else if (a.prev_log_index() > 0 &&
                 !cluster_.HasEntry(a.prev_log_index(), a.prev_log_term()) &&
                 !(n.core && n.core->TermAt(a.prev_log_index()) == a.prev_log_term())) {
        Violation("node " + U(n.id) + " sends AppendEntries whose prev entry " +
                  U(a.prev_log_index()) + "/" + U(a.prev_log_term()) + " no log ever held: " +
                  Describe(m));
      }
      for (int i = 0; i < a.entries_size(); ++i) {
        const Entry& e = a.entries(i);
        if (e.index() != a.prev_log_index() + 1 + static_cast<uint64_t>(i) ||
            e.term() < prev_term || e.term() > a.term()) {
          Violation("AppendEntries with a malformed entry " + EntryString(e) + ": " + Describe(m));
          break;
        }
        RegisterEntry(n.id, e, prev_term, "sent");
        prev_term = e.term();
      }
      break;
    }
    case MessageType::kAppendResp: {
      const AppendEntriesResponse& r = m.append_resp;
      if (r.from() != n.id) Violation("AppendEntriesResponse.from wrong: " + Describe(m));
      // Only within one term: a node that has since moved to a higher term
      // may have truncated what it acknowledged while still in memory, just
      // as it could after making it durable; the acknowledgement is then
      // merely delayed.
      if (r.success() && r.term() == n.hs.term && r.match_index() > DurableLast(n)) {
        Violation("node " + U(n.id) + " acknowledges match " + U(r.match_index()) +
                  " but its durable log ends at " + U(DurableLast(n)) + ": " + Describe(m));
      }
      break;
    }
    case MessageType::kSnapshot: {
      ++stats_.snapshot_messages_sent;
      const InstallSnapshotRequest& q = m.snapshot;
      if (cluster_.LeaderOf(q.term()) != n.id) {
        Violation("node " + U(n.id) + " sends a snapshot in term " + U(q.term()) +
                  " without having been its leader: " + Describe(m));
      }
      if (q.to() != m.to || q.leader_id() != n.id) {
        Violation("InstallSnapshot header fields wrong: to=" + U(q.to()) +
                  " leader_id=" + U(q.leader_id()) + ": " + Describe(m));
      }
      if (q.last_index() == 0 || q.last_index() > committed().size() ||
          committed()[q.last_index() - 1].term() != q.last_term()) {
        Violation("node " + U(n.id) + " sends snapshot " + U(q.last_index()) + "/" +
                  U(q.last_term()) + ", which is not a committed entry (known committed: " +
                  U(committed().size()) + ")");
      }
      auto f = n.files.find({q.last_index(), q.last_term()});
      if (f != n.files.end() && !SameMembership(f->second.config, q.config())) {
        Violation("node " + U(n.id) + " sends snapshot " + U(q.last_index()) +
                  " with configuration " + ConfigString(q.config()) + " but its file has " +
                  ConfigString(f->second.config));
      }
      if (f == n.files.end() && q.last_index() > n.base.index) {
        Violation("node " + U(n.id) + " sends snapshot " + U(q.last_index()) + "/" +
                  U(q.last_term()) + ", newer than any snapshot it took or installed");
      }
      break;
    }
    case MessageType::kSnapshotResp: {
      const InstallSnapshotResponse& r = m.snapshot_resp;
      if (r.from() != n.id) Violation("InstallSnapshotResponse.from wrong: " + Describe(m));
      if (r.success() && r.term() == n.hs.term && r.match_index() > DurableLast(n)) {
        Violation("node " + U(n.id) + " acknowledges snapshot match " + U(r.match_index()) +
                  " but its durable log ends at " + U(DurableLast(n)) + ": " + Describe(m));
      }
      break;
    }
    case MessageType::kTimeoutNow: {
      ++stats_.timeout_now_sent;
      const TimeoutNowRequest& t = m.timeout_now;
      if (cluster_.LeaderOf(t.term()) != n.id) {
        Violation("node " + U(n.id) + " sends TimeoutNow in term " + U(t.term()) +
                  " without having been its leader: " + Describe(m));
      }
      if (t.to() != m.to || t.leader_id() != n.id) {
        Violation("TimeoutNow header fields wrong: " + Describe(m));
      }
      if (n.core && !n.core->IsVoter(m.to)) {
        Violation("node " + U(n.id) + " sends TimeoutNow to " + U(m.to) +
                  ", not a voter in its configuration " + ConfigString(n.core->membership()));
      }
      break;
    }
    case MessageType::kVote: {
      const RequestVoteRequest& v = m.vote;
      if (v.to() != m.to || v.candidate_id() != n.id) {
        Violation("RequestVote header fields wrong: " + Describe(m));
      }
      // (The term may have moved on since the message was made: a stale
      // request is harmless, an undurable candidacy is not.)
      if (!v.pre_vote() && (n.hs.term < v.term() || (n.hs.term == v.term() && n.hs.vote != n.id))) {
        Violation("node " + U(n.id) + " requests votes for term " + U(v.term()) +
                  " but its durable hard state is " + U(n.hs.term) + "/" + U(n.hs.vote));
      }
      if (v.pre_vote() && v.term() > n.hs.term + 1) {
        Violation("node " + U(n.id) + " pre-votes for term " + U(v.term()) +
                  " more than one above its durable term " + U(n.hs.term));
      }
      break;
    }
    case MessageType::kVoteResp: {
      const RequestVoteResponse& r = m.vote_resp;
      if (r.from() != n.id) Violation("RequestVoteResponse.from wrong: " + Describe(m));
      if (r.granted() && !r.pre_vote()) {
        if (n.hs.term < r.term() || (n.hs.term == r.term() && n.hs.vote != m.to)) {
          Violation("node " + U(n.id) + " grants its vote to " + U(m.to) + " in term " +
                    U(r.term()) + " before that vote is durable (durable: " + U(n.hs.term) + "/" +
                    U(n.hs.vote) + ")");
        }
        cluster_.RecordVote(n.id, r.term(), m.to);
        FlushClusterViolations();
      }
      break;
    }
  }
  (void)before_persist;
}

void SimCluster::RegisterEntry(uint64_t node, const Entry& e, uint64_t prev_term,
                               const char* where) {
  cluster_.RecordEntry(node, e, prev_term, where);
  FlushClusterViolations();
}

// ---------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------

void SimCluster::FlushClusterViolations() {
  std::vector<std::string>* found = cluster_.mutable_violations();
  for (const std::string& what : *found) Violation(what);
  found->clear();
}

// State machine safety, through the shared cluster checker. (Commit never
// going back, and snapshot <= commit <= last index, are member invariants.)
void SimCluster::RecordCommit(Node& n) {
  const Raft& r = *n.core;
  const uint64_t c = r.commit_index();
  const bool advanced = c > n.recorded_commit;
  if (c > r.last_index()) return;  // a member violation (MemberInvariants)
  cluster_.CheckCommitted(r, n.recorded_commit + 1, MaxTerm());
  FlushClusterViolations();
  n.recorded_commit = std::max(n.recorded_commit, c);
  if (advanced && r.role() == Role::kLeader) CheckCommitQuorum(n, c);
}

// A leader advanced its commit index to `index`: that entry must be durable
// on a majority of the voters of the leader's configuration (the latest in
// its log). Learners, removed members and the leader itself when it is not a
// voter do not count.
void SimCluster::CheckCommitQuorum(Node& n, uint64_t index) {
  const Raft& r = *n.core;
  if (index < r.first_index()) return;
  const Entry& e = r.EntryAt(index);
  const std::vector<uint64_t> voters = r.voters();
  std::string holders;
  size_t count = 0;
  for (uint64_t v : voters) {
    auto it = nodes_.find(v);
    if (it == nodes_.end()) continue;
    if (DurablyHas(it->second, e)) {
      ++count;
      holders += " " + U(v);
    }
  }
  if (count < voters.size() / 2 + 1) {
    std::string vs;
    for (uint64_t v : voters) vs += " " + U(v);
    Violation("leader " + U(n.id) + " commits " + EntryString(e) +
              " but only voters {" + holders + " } of {" + vs +
              " } hold it durably (configuration " + ConfigString(r.membership()) + ")");
  }
}

void SimCluster::CheckLeaderCompleteness(Node& n) {
  Raft& r = *n.core;
  if (r.role() != Role::kLeader || r.term() == n.leader_seen_term) return;
  n.leader_seen_term = r.term();
  cluster_.RecordLeader(n.id, r.term());
  FlushClusterViolations();
  if (!r.IsVoter(n.id)) {
    Violation("node " + U(n.id) + " became leader of term " + U(r.term()) +
              " but is not a voter in its configuration " + ConfigString(r.membership()));
  }
  // Its votes came from a majority of its configuration's voters, and it
  // holds every entry committed before its term.
  cluster_.CheckElectionQuorum(r);
  cluster_.CheckLeaderCompleteness(r);
  FlushClusterViolations();
}

// A leader replicates to exactly the members of its configuration, and what
// it believes a follower of its term holds, that follower holds durably.
void SimCluster::CheckLeaderMembership(Node& n) {
  Raft& r = *n.core;
  for (uint64_t peer : ids_) {
    if (peer == n.id) continue;
    const Progress* pr = r.ProgressOf(peer);
    const bool member = FindMember(r.membership(), peer) != nullptr;
    if (!member) {
      if (pr != nullptr) {
        Violation("leader " + U(n.id) + " keeps replication progress for " + U(peer) +
                  ", which is not in its configuration " + ConfigString(r.membership()));
      }
      continue;
    }
    if (pr == nullptr) {
      Violation("leader " + U(n.id) + " has no progress for member " + U(peer) +
                " of its configuration " + ConfigString(r.membership()));
      continue;
    }
    const Node& p = nodes_.at(peer);
    if (p.hs.term != r.term() || pr->match() == 0) continue;
    const uint64_t match = pr->match();
    const uint64_t leader_term = r.TermAt(match);
    if (match > DurableLast(p)) {
      Violation("leader " + U(n.id) + " believes " + U(peer) + " matches up to " + U(match) +
                " but its durable log ends at " + U(DurableLast(p)));
    } else if (leader_term != 0 && match >= p.base.index && DurableTermAt(p, match) != leader_term) {
      Violation("leader " + U(n.id) + " believes " + U(peer) + " matches up to " + U(match) +
                " but its durable log has term " + U(DurableTermAt(p, match)) + " there (leader: " +
                U(leader_term) + ")");
    }
  }
}

void SimCluster::CheckNodeCheap(Node& n, bool full) {
  Raft& r = *n.core;
  // The shared invariants of one member (indexes, terms, roles, a leader's
  // progress; term and commit never going back in an incarnation).
  std::vector<std::string> found;
  n.checks.set_probe_ids(ids_);
  n.checks.Check(r, full, &found);
  for (const std::string& what : found) Violation(what);
  CheckLeaderCompleteness(n);
  if (r.term() < n.max_term) {
    Violation("node " + U(n.id) + " term decreased from " + U(n.max_term) + " to " + U(r.term()));
  }
  n.max_term = std::max(n.max_term, r.term());
  RecordCommit(n);
  if (n.applied.size() > r.commit_index()) {
    Violation("node " + U(n.id) + " applied " + U(n.applied.size()) +
              " entries, beyond its commit " + U(r.commit_index()));
  }
  if (r.role() == Role::kLeader) CheckLeaderMembership(n);
  if (n.inflight || r.HasReady()) return;  // a write in progress; checked after it
  if (r.term() != n.hs.term || r.vote() != n.hs.vote) {
    Violation("node " + U(n.id) + " in-memory term/vote " + U(r.term()) + "/" + U(r.vote()) +
              " not durable after its Ready cycle (durable " + U(n.hs.term) + "/" + U(n.hs.vote) +
              ")");
  }
  if (r.last_index() != DurableLast(n) || r.last_term() != DurableLastTerm(n)) {
    Violation("node " + U(n.id) + " in-memory log ends at " + U(r.last_index()) + "/" +
              U(r.last_term()) + " but its durable log ends at " + U(DurableLast(n)) + "/" +
              U(DurableLastTerm(n)) + " after its Ready cycle");
  }
  if (r.snapshot().index != n.base.index || r.snapshot().term != n.base.term) {
    Violation("node " + U(n.id) + " core is based on snapshot " + U(r.snapshot().index) + "/" +
              U(r.snapshot().term) + " but its durable log on snapshot " + U(n.base.index) + "/" +
              U(n.base.term) + " after its Ready cycle");
  }
  if (r.durable_index() > DurableLast(n)) {
    Violation("node " + U(n.id) + " durable_index " + U(r.durable_index()) +
              " but its durable log ends at " + U(DurableLast(n)));
  }
  if (!n.config_reported || !SameMembership(n.reported_config, r.membership())) {
    Violation("node " + U(n.id) + " has configuration " + ConfigString(r.membership()) +
              " but reported " +
              (n.config_reported ? ConfigString(n.reported_config) : std::string("none")) +
              " in Ready::config");
  }
}

void SimCluster::CheckNodeFull(Node& n) {
  Raft& r = *n.core;
  if (n.inflight || r.HasReady() || r.last_index() != DurableLast(n)) return;
  for (uint64_t i = std::max(r.first_index(), n.log_first); i <= r.last_index(); ++i) {
    const Entry& d = *DurableEntry(n, i);
    if (!SameEntry(r.EntryAt(i), d) || r.TermAt(i) != d.term()) {
      Violation("node " + U(n.id) + " in-memory entry " + EntryString(r.EntryAt(i)) +
                " differs from its durable " + EntryString(d));
      return;
    }
  }
  // The configuration in effect is the latest in the log (or the base's).
  MembershipConfig want = n.base.index > 0 ? n.base.config : n.bootstrap;
  uint64_t want_index = n.base.index;
  for (const Entry& e : n.log) {
    MembershipConfig c;
    if (e.type() == ENTRY_CONFIG && c.ParseFromString(e.data()) && CheckMembership(c).ok()) {
      want = c;
      want_index = e.index();
    }
  }
  if (!SameMembership(want, r.membership()) || r.membership_index() != want_index) {
    Violation("node " + U(n.id) + " has configuration " + ConfigString(r.membership()) +
              " (entry " + U(r.membership_index()) + ") but the latest in its log is " +
              ConfigString(want) + " (entry " + U(want_index) + ")");
  }
}

void SimCluster::CheckPairwiseLogs() {
  for (size_t a = 0; a < ids_.size(); ++a) {
    for (size_t b = a + 1; b < ids_.size(); ++b) {
      const Node& na = nodes_[ids_[a]];
      const Node& nb = nodes_[ids_[b]];
      const uint64_t lo = std::max(na.log_first, nb.log_first);
      uint64_t i = std::min(DurableLast(na), DurableLast(nb));
      while (i >= lo && DurableEntry(na, i)->term() != DurableEntry(nb, i)->term()) --i;
      for (uint64_t j = lo; j <= i; ++j) {
        const Entry& x = *DurableEntry(na, j);
        const Entry& y = *DurableEntry(nb, j);
        if (!SameEntry(x, y)) {
          Violation("log matching: nodes " + U(ids_[a]) + " and " + U(ids_[b]) +
                    " agree on the term at index " + U(i) + " but differ at " + EntryString(x) +
                    " vs " + EntryString(y));
          return;
        }
      }
    }
  }
}

void SimCluster::CheckInvariants(bool full) {
  for (uint64_t id : ids_) {
    Node& n = nodes_[id];
    if (!n.core) continue;
    CheckNodeCheap(n, full);
    if (full) CheckNodeFull(n);
  }
  if (full) CheckPairwiseLogs();
}

void SimCluster::AfterStep() {
  // The entry-by-entry checks cost O(total log size): space them so that
  // they cost a few entries per step on average.
  uint64_t total_entries = 0;
  for (const auto& [id, n] : nodes_) total_entries += n.log.size();
  const uint64_t every =
      std::max(static_cast<uint64_t>(options_.full_check_every), total_entries / 4);
  if (++steps_since_full_check_ >= every) {
    steps_since_full_check_ = 0;
    touched_.clear();
    CheckInvariants(true);
    return;
  }
  // A step changes only the nodes that ran a Ready cycle in it; the others'
  // invariants were checked when they last changed.
  for (uint64_t id : touched_) {
    Node& n = nodes_[id];
    if (n.core) CheckNodeCheap(n);
  }
  touched_.clear();
}

uint64_t SimCluster::MaxTerm() const {
  uint64_t t = 0;
  for (const auto& [id, n] : nodes_) {
    t = std::max(t, n.hs.term);
    if (n.core) t = std::max(t, n.core->term());
  }
  return t;
}

uint64_t SimCluster::MaxCommitAnywhere() const {
  uint64_t c = committed().size();
  for (const auto& [id, n] : nodes_) {
    if (n.core) c = std::max(c, n.core->commit_index());
  }
  return c;
}

uint64_t SimCluster::Leader() const {
  uint64_t best = 0, best_term = 0;
  for (uint64_t id : ids_) {
    const Raft* r = core(id);
    if (r != nullptr && r->role() == Role::kLeader && (best == 0 || r->term() > best_term)) {
      best = id;
      best_term = r->term();
    }
  }
  return best;
}

uint64_t SimCluster::StableLeader() const {
  for (uint64_t id : ids_) {
    const Raft* l = core(id);
    if (l == nullptr || l->role() != Role::kLeader) continue;
    bool stable = true;
    for (uint64_t p : ids_) {
      const Raft* r = core(p);
      if (p == id || r == nullptr || !CanTalk(id, p)) continue;
      if (FindMember(l->membership(), p) == nullptr) continue;  // not replicated to
      if (r->term() != l->term() || r->leader_id() != id) {
        stable = false;
        break;
      }
    }
    if (stable) return id;
  }
  return 0;
}

std::vector<uint64_t> SimCluster::Members() const {
  const uint64_t leader = Leader();
  const MembershipConfig& config = leader != 0 ? core(leader)->membership() : bootstrap_;
  std::vector<uint64_t> out;
  for (const MemberConfig& m : config.members()) out.push_back(m.id());
  return out;
}

bool SimCluster::Converged() const {
  const uint64_t leader = StableLeader();
  if (leader == 0) return false;
  const Raft* l = core(leader);
  if (l->last_term() != l->term()) return false;
  if (l->commit_index() != l->last_index()) return false;
  if (At(leader).applied.size() != l->commit_index()) return false;
  for (const MemberConfig& m : l->membership().members()) {
    const Raft* r = core(m.id());
    if (r == nullptr) return false;
    if (r->last_index() != l->last_index() || r->last_term() != l->last_term()) return false;
    if (r->commit_index() != l->last_index()) return false;
    if (At(m.id()).applied.size() != r->commit_index()) return false;
  }
  return true;
}

std::vector<std::string> SimCluster::AppliedCommands(uint64_t node) const {
  std::vector<std::string> out;
  for (const Entry& e : At(node).applied) {
    if (e.type() == ENTRY_COMMAND) out.push_back(e.data());
  }
  return out;
}

// ---------------------------------------------------------------------------
// Reporting
// ---------------------------------------------------------------------------

void SimCluster::Trace(std::string text) {
  if (options_.trace_capacity == 0) return;
  trace_.push_back(TraceEvent{event_, ticks_, std::move(text)});
  while (trace_.size() > options_.trace_capacity) trace_.pop_front();
}

void SimCluster::Violation(const std::string& what) {
  std::string text =
      "[seed " + U(options_.seed) + " tick " + U(ticks_) + " event " + U(event_) + "] " + what;
  Trace("VIOLATION " + what);
  if (violations_.size() < 20) violations_.push_back(std::move(text));
}

void SimCluster::Fail(const std::string& what) { Violation(what); }

std::string SimCluster::Describe(const Message& m) {
  std::string s =
      std::string(MessageTypeName(m.type)) + " " + U(m.from) + "->" + U(m.to) + " t" + U(m.Term());
  switch (m.type) {
    case MessageType::kAppend: {
      const AppendEntriesRequest& a = m.append;
      s += " prev=" + U(a.prev_log_index()) + "/" + U(a.prev_log_term()) +
           " n=" + U(static_cast<uint64_t>(a.entries_size()));
      if (a.entries_size() > 0) {
        s += "[" + U(a.entries(0).index()) + ".." + U(a.entries(a.entries_size() - 1).index()) +
             " t" + U(a.entries(a.entries_size() - 1).term()) + "]";
      }
      s += " commit=" + U(a.leader_commit()) + " round=" + U(a.read_round());
      break;
    }
    case MessageType::kAppendResp: {
      const AppendEntriesResponse& r = m.append_resp;
      if (r.success()) {
        s += " ok match=" + U(r.match_index());
      } else {
        s += " REJECT prev=" + U(r.rejected_index()) + " conflict=" + U(r.conflict_term()) + "@" +
             U(r.conflict_index());
      }
      s += " last=" + U(r.last_log_index()) + " round=" + U(r.read_round()) + " rpc=" + U(m.rpc_id);
      break;
    }
    case MessageType::kVote: {
      const RequestVoteRequest& v = m.vote;
      s += std::string(v.pre_vote() ? " PRE" : "") + " last=" + U(v.last_log_index()) + "/" +
           U(v.last_log_term());
      break;
    }
    case MessageType::kVoteResp: {
      const RequestVoteResponse& r = m.vote_resp;
      s += std::string(r.pre_vote() ? " PRE" : "") + (r.granted() ? " granted" : " denied") +
           " rpc=" + U(m.rpc_id);
      break;
    }
    case MessageType::kSnapshot: {
      const InstallSnapshotRequest& q = m.snapshot;
      s += " snap=" + U(q.last_index()) + "/" + U(q.last_term()) + " config " +
           ConfigString(q.config());
      break;
    }
    case MessageType::kSnapshotResp: {
      const InstallSnapshotResponse& r = m.snapshot_resp;
      s += std::string(r.success() ? " ok match=" + U(r.match_index()) : std::string(" REFUSED")) +
           " last=" + U(r.last_log_index()) + " rpc=" + U(m.rpc_id);
      break;
    }
    case MessageType::kTimeoutNow:
      break;
  }
  if (m.type == MessageType::kVote && m.vote.transfer()) s += " TRANSFER";
  return s;
}

std::string SimCluster::StateString() const {
  std::ostringstream out;
  for (uint64_t id : ids_) {
    const Node& n = At(id);
    out << "  node " << id << " inc " << n.incarnation << " group " << group_.at(id);
    if (n.core) {
      const Raft& r = *n.core;
      out << " " << RoleName(r.role()) << " term " << r.term() << " vote " << r.vote() << " leader "
          << r.leader_id() << " commit " << r.commit_index() << " snap " << r.snapshot().index
          << "/" << r.snapshot().term << " last " << r.last_index() << "/" << r.last_term()
          << " durable_index " << r.durable_index() << " config "
          << ConfigString(r.membership()) << "@" << r.membership_index();
      if (r.role() == Role::kLeader) {
        out << " transfer " << r.transfer_target() << " progress";
        for (uint64_t p : ids_) {
          if (const Progress* pr = r.ProgressOf(p)) {
            out << " " << p << ":" << ProgressStateName(pr->state()) << "/m" << pr->match() << "/n"
                << pr->next();
          }
        }
      }
    } else {
      out << " DOWN";
    }
    out << " | applied " << n.applied.size() << " durable hs " << n.hs.term << "/" << n.hs.vote
        << " durable snapshot " << n.base.index << "/" << n.base.term << " durable log "
        << n.log_first << ".." << DurableLast(n) << " files " << n.files.size() << "\n";
  }
  return out.str();
}

std::string SimCluster::Report() const {
  std::ostringstream out;
  out << "seed=" << options_.seed << " nodes=" << options_.nodes << " tick=" << ticks_
      << " event=" << event_ << " known committed=" << committed().size()
      << "  (rerun: RAFT_SIM_SEED=" << options_.seed << ")\n";
  out << "snapshots: taken " << stats_.snapshots_taken << " sent " << stats_.snapshot_messages_sent
      << " transferred " << stats_.snapshot_transfers << " failed " << stats_.snapshot_transfer_failures
      << " dropped " << stats_.snapshot_messages_dropped << " installed "
      << stats_.snapshots_installed << "; config changes " << stats_.config_changes
      << "; TimeoutNow sent " << stats_.timeout_now_sent << "\n";
  if (!violations_.empty()) {
    out << "violations:\n";
    for (const std::string& v : violations_) out << "  " << v << "\n";
  }
  out << "state:\n" << StateString();
  out << "last " << trace_.size() << " events:\n";
  for (const TraceEvent& e : trace_) {
    out << "  #" << e.event << " t" << e.tick << " " << e.text << "\n";
  }
  return out.str();
}

}  // namespace raftkv::raft::sim
