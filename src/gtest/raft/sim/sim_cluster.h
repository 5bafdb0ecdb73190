// A deterministic simulated cluster of consensus cores for tests.
//
// SimCluster drives N raft::Raft cores the way raftkv-server does (GetReady,
// send the leader's appends, persist hard state and entries, send the other
// messages, Advance, apply), over a simulated network whose every choice
// (delays, drops, duplicates, reordering) comes from one seeded generator, so
// a failing seed replays exactly.
//
// Each node keeps a simulated durable store (the persisted HardState and
// log). Crash() discards the core and everything not in that store; Restart()
// rebuilds the core from the store only. Writes may take time (the core keeps
// stepping meanwhile), and a lost message is reported to the caller with
// ReportUnreachable() after an RPC deadline, as raftkv-server's transport
// does. Every request delivered gets a fresh rpc_id, and the node's next
// Ready must answer it exactly once.
//
// Scripted tests can hold messages back (intercept) and deliver them later
// (Inject), e.g. to replay a stale message after an election.
//
// After every step (a delivered message, a tick of one node, a proposal, a
// read) the Raft safety invariants are checked: each core's with the shared
// raft::MemberInvariants, the cluster's history (election safety, votes, log
// matching, state machine safety, leader completeness) with the shared
// raft::ClusterInvariants (raft/invariants.h), and what only the simulation
// sees (durable stores, messages, state machines) here. Violations are
// collected in violations() (the run stops making progress once one is found)
// and Report() formats them with the seed and the tail of the event trace.
//
// Time: the simulation clock counts units; every `tick_interval` units all
// live nodes Tick() in id order. Messages are delivered between ticks after a
// random delay of [min_delay, max_delay] units.
//
// State machines and snapshots: each node's state machine is the sequence of
// entries it applied (from index 1) plus a running digest. TakeSnapshot()
// (or the automatic policy, every `snapshot_every` applied entries) stores an
// image of it with (index, term, configuration at index) as the node's
// snapshot file snap-<index>-<term> and calls Raft::Compact(index); the
// durable log then starts after that index. A kSnapshot message models the
// service's InstallSnapshot stream: on delivery the sender's file is copied
// into the receiver's snapshot store (if the sender no longer has it, the
// transfer fails and the sender gets ReportUnreachable), then the metadata is
// stepped. A Ready::snapshot restores the state machine from that file and
// resets the durable log (keeping the suffix after the snapshot if the log
// holds its index and term). Restart() rebuilds the core from the latest
// installed snapshot and the durable log after it (the SnapshotRef
// constructor).
//
// Membership: the initial nodes 1..nodes are the bootstrap configuration.
// AddNode() creates a joining server (empty store, bootstrap configuration not
// containing it); ProposeMembershipChange() asks a core for a change. Nodes
// are never deleted from the simulation: a removed member can keep running
// (to test that it cannot disrupt) or be crashed for good.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "raft/core/message.h"
#include "raft/invariants.h"
#include "raft/raft.h"
#include "proto/internal.h"
#include "storage/hard_state_file.h"

namespace raftkv::raft::sim {

// splitmix64: small, fast, and the same on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  uint64_t Uniform(uint64_t n) { return Next() % n; }
  // Uniform in [lo, hi].
  int64_t Range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Uniform(static_cast<uint64_t>(hi - lo + 1)));
  }
  bool Chance(double p) {
    if (p <= 0) return false;
    if (p >= 1) return true;
    return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0) < p;
  }

 private:
  uint64_t state_;
};

struct SimOptions {
  int nodes = 3;
  uint64_t seed = 1;
  // Core configuration (see raft::Config).
  int election_ticks = 10;
  int heartbeat_ticks = 1;
  bool pre_vote = true;
  bool check_quorum = true;
  size_t max_inflight_appends = 64;
  size_t max_append_entries = 4096;
  size_t max_append_bytes = 1 << 20;
  uint64_t max_inflight_bytes = 8 << 20;

  // Network, in simulation time units.
  int tick_interval = 10;
  int min_delay = 1;
  int max_delay = 3;
  double drop_prob = 0;
  double dup_prob = 0;
  // false: messages on one directed link arrive in the order they were sent.
  bool reorder = false;
  // With this probability a message is held up for [1, long_delay_max_ticks]
  // ticks (a stalled connection or server queue): stale messages arrive
  // after elections. Only with reorder on.
  double long_delay_prob = 0;
  int long_delay_max_ticks = 40;
  // A lost request or response is a failed RPC: like raftkv-server's peer
  // client, the transport calls ReportUnreachable(peer) on the caller once
  // the call's deadline passes, [min, max] ticks after the loss. With a
  // probability below 1 some failures go unreported (a lossy transport).
  double report_unreachable_prob = 1.0;
  int rpc_timeout_min_ticks = 1;
  int rpc_timeout_max_ticks = 3;

  // Storage: probability that a Ready's write takes [min, max] units instead
  // of completing within the step; meanwhile the core keeps stepping messages,
  // ticks and proposals (as in raftkv-server, whose I/O thread drops the lock
  // while writing) but gets no new Ready until the write is done.
  double async_persist_prob = 0.5;
  int min_persist_delay = 1;
  int max_persist_delay = 8;

  // Entry-by-entry comparison of every in-memory log with the persisted logs
  // and of all logs pairwise runs every max(this, total log entries / 4)
  // steps; the incremental checks run after every step regardless.
  int full_check_every = 16;
  // Events kept for Report() (RAFT_SIM_TRACE=<n> overrides).
  size_t trace_capacity = 200;

  // Learner promotion bound (raft::Config::promote_max_lag).
  uint64_t promote_max_lag = 1000;
  // Automatic snapshots: a node snapshots its state machine (and compacts its
  // log) once this many entries were applied since its last snapshot. 0:
  // only when a test calls TakeSnapshot().
  uint64_t snapshot_every = 0;
  // Snapshot files kept per node: when a node has more, those older than the
  // one its log is based on are deleted, oldest first (newer ones may be
  // received files waiting to be installed). A transfer of a deleted file
  // fails.
  size_t snapshots_kept = 2;
};

// A state machine: every entry applied, in order (entry i at [i-1]), and a
// digest of that sequence.
struct SmImage {
  std::vector<Entry> entries;
  uint64_t digest = 0;
};

// A snapshot file in a node's snapshot store.
struct SnapshotFile {
  uint64_t index = 0;  // 0: none
  uint64_t term = 0;
  MembershipConfig config;
  std::shared_ptr<const SmImage> image;
  uint64_t origin = 0;  // node that took it
};

struct SimStats {
  uint64_t snapshots_taken = 0;
  uint64_t snapshot_messages_sent = 0;      // kSnapshot sent by cores
  uint64_t snapshot_transfers = 0;          // files copied to a receiver
  uint64_t snapshot_transfer_failures = 0;  // the sender no longer had the file
  uint64_t snapshot_messages_dropped = 0;   // kSnapshot lost, partitioned, or to a down node
  uint64_t snapshots_installed = 0;         // Ready::snapshot restores
  uint64_t timeout_now_sent = 0;
  uint64_t config_changes = 0;              // accepted ProposeMembershipChange
};

// Where, relative to a node's Ready cycle, a crash happens.
enum class CrashPoint {
  kNow,            // between two steps; a write in progress leaves the old state
                   // or the new hard state plus a prefix of its entries
  kBeforePersist,  // at the next Ready with entries or hard state: after the
                   // leader's appends were sent, before anything was persisted
  kAfterPersist,   // at the next such Ready: persisted, but no response sent
};

// A message in flight.
struct Envelope {
  Message msg;
  uint64_t deliver_at = 0;
  uint64_t seq = 0;         // queue order tie-break; unique
  uint64_t send_event = 0;  // event counter when it was sent
  uint64_t from_incarnation = 0;
  // For responses: the requester's incarnation when it sent the request; a
  // response to a call of a previous incarnation is dropped (the call died).
  uint64_t to_incarnation = 0;
  bool duplicate = false;
  // Not a message: the transport reports to msg.to (of incarnation
  // to_incarnation) that its call to msg.from failed.
  bool unreachable_report = false;
  // Not a message: node msg.to's write of its in-progress Ready completes.
  bool io_completion = false;
};

// "1v,2v,3l"
std::string ConfigString(const MembershipConfig& config);

class SimCluster {
 public:
  explicit SimCluster(const SimOptions& options);
  ~SimCluster();
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  const SimOptions& options() const { return options_; }
  uint64_t seed() const { return options_.seed; }
  const std::vector<uint64_t>& ids() const { return ids_; }
  Rng& rng() { return rng_; }

  // ---- driving ----
  // Processes the next event: the earliest due message, or else a tick of all
  // live nodes. Returns false (and does nothing) once a violation was found.
  bool RunOneEvent();
  // Runs until `ticks` more tick rounds have happened.
  void RunTicks(int ticks);
  // Runs until pred() holds (checked after every event) or max_ticks tick
  // rounds have passed; returns whether pred() held.
  bool RunUntil(const std::function<bool()>& pred, int max_ticks);
  // Delivers every in-flight message (and what they cause) without ticking,
  // up to a bound on the number of deliveries.
  void DrainNetwork(int max_deliveries = 100000);
  uint64_t ticks() const { return ticks_; }
  uint64_t now() const { return now_; }
  uint64_t events() const { return event_; }

  // ---- client operations (each is a step: a Ready cycle and checks follow) ----
  ProposeResult Propose(uint64_t node, const std::string& data);
  // Proposes to StableLeader() (or any live leader); 0/false when none.
  ProposeResult ProposeToLeader(const std::string& data, uint64_t* leader_out = nullptr);
  bool ReadIndex(uint64_t node, uint64_t read_id);

  // ---- membership, transfer, snapshots (each is a step) ----
  // The address of member `id` in configurations ("sim-<id>").
  static std::string Address(uint64_t id);
  // A new server: an empty node with the bootstrap configuration (which does
  // not contain it), started at once. Returns its id (one above the highest).
  uint64_t AddNode();
  ProposeResult ProposeMembershipChange(uint64_t node, const MembershipChange& change);
  ProposeResult AddLearner(uint64_t node, uint64_t id) {
    return ProposeMembershipChange(node, MembershipChange{ChangeType::kAddLearner, id, Address(id)});
  }
  ProposeResult Promote(uint64_t node, uint64_t id) {
    return ProposeMembershipChange(node, MembershipChange{ChangeType::kPromote, id, ""});
  }
  ProposeResult RemoveMember(uint64_t node, uint64_t id) {
    return ProposeMembershipChange(node, MembershipChange{ChangeType::kRemove, id, ""});
  }
  // Raft::TransferLeadership on `node`: "" when started.
  std::string TransferLeadership(uint64_t node, uint64_t target);
  // Snapshots the node's state machine at its applied index and compacts the
  // core's log there. False when there is nothing new to snapshot (or the
  // node is down).
  bool TakeSnapshot(uint64_t node);
  // Deletes the snapshot files of `node` older than the one its log is based
  // on.
  void DeleteOldSnapshotFiles(uint64_t node);
  void set_snapshot_every(uint64_t n) { options_.snapshot_every = n; }
  void set_snapshots_kept(size_t n) { options_.snapshots_kept = n; }

  // ---- faults ----
  void Crash(uint64_t node, CrashPoint point = CrashPoint::kNow);
  void Restart(uint64_t node);
  bool alive(uint64_t node) const;
  bool crash_pending(uint64_t node) const;
  // Nodes in different groups cannot talk; a node listed in no group is alone.
  void Partition(const std::vector<std::vector<uint64_t>>& groups);
  void Isolate(uint64_t node);
  void Heal();
  bool CanTalk(uint64_t a, uint64_t b) const;
  void set_drop_prob(double p) { options_.drop_prob = p; }
  void set_dup_prob(double p) { options_.dup_prob = p; }
  void set_reorder(bool r) { options_.reorder = r; }
  void set_report_unreachable_prob(double p) { options_.report_unreachable_prob = p; }
  void set_async_persist_prob(double p) { options_.async_persist_prob = p; }
  void set_delay(int min_delay, int max_delay) {
    options_.min_delay = min_delay;
    options_.max_delay = max_delay;
  }

  // ---- observation ----
  // The core of a live node (nullptr when crashed).
  Raft* core(uint64_t node);
  const Raft* core(uint64_t node) const;
  uint64_t incarnation(uint64_t node) const { return At(node).incarnation; }
  // The live leader with the highest term (0 when none).
  uint64_t Leader() const;
  // A live leader whose term is >= the term of every live node it can talk to
  // and which every such node follows (0 when none).
  uint64_t StableLeader() const;
  // The node's state machine: every entry applied, from index 1 (restored
  // from a snapshot image, then the entries applied since).
  const std::vector<Entry>& applied(uint64_t node) const { return At(node).applied; }
  uint64_t applied_index(uint64_t node) const { return At(node).applied.size(); }
  uint64_t state_digest(uint64_t node) const { return At(node).digest; }
  // The data of the applied COMMAND entries.
  std::vector<std::string> AppliedCommands(uint64_t node) const;
  // The durable log: entries persisted_log_first(node), +1, ...
  const std::vector<Entry>& persisted_log(uint64_t node) const { return At(node).log; }
  uint64_t persisted_log_first(uint64_t node) const { return At(node).log_first; }
  uint64_t persisted_last_index(uint64_t node) const { return DurableLast(At(node)); }
  // The durable entry at `index`, nullptr when not in the durable log.
  const Entry* persisted_entry(uint64_t node, uint64_t index) const;
  // The snapshot the node's durable log is based on (index 0: none).
  const SnapshotFile& durable_snapshot(uint64_t node) const { return At(node).base; }
  bool HasSnapshotFile(uint64_t node, uint64_t index, uint64_t term) const {
    return At(node).files.count({index, term}) != 0;
  }
  // The last configuration the node's core reported in Ready::config.
  const MembershipConfig& reported_config(uint64_t node) const { return At(node).reported_config; }
  const MembershipConfig& bootstrap_config() const { return bootstrap_; }
  // The configuration in effect at `index` of the committed history.
  MembershipConfig CommittedConfigAt(uint64_t index) const;
  const SimStats& stats() const { return stats_; }
  const HardState& persisted_hard_state(uint64_t node) const { return At(node).hs; }
  // Every entry ever known committed, by index from 1 (entry i at [i-1]).
  const std::vector<Entry>& committed() const { return cluster_.committed(); }
  // Reads reported in Ready::reads / failed_reads, by read id, all incarnations.
  const std::map<uint64_t, ReadState>& reads(uint64_t node) const { return At(node).reads; }
  const std::set<uint64_t>& failed_reads(uint64_t node) const { return At(node).failed_reads; }
  // term -> leader id, for every term in which a leader was seen.
  const std::map<uint64_t, uint64_t>& leaders_by_term() const {
    return cluster_.leaders_by_term();
  }
  // The maximum term of any node (live or in its durable store).
  uint64_t MaxTerm() const;
  size_t in_flight() const { return queue_.size(); }
  // True when every member of the stable leader's configuration (voters
  // and learners) is up, has applied everything its commit index covers,
  // holds the leader's log, and has the leader's last index (of its term)
  // as commit index. Nodes outside that configuration are ignored.
  bool Converged() const;
  // The members of the live leader's configuration (voters and learners),
  // or the bootstrap configuration's when there is no leader.
  std::vector<uint64_t> Members() const;

  // Called for every message just before it is stepped into its destination.
  std::function<void(const Envelope&)> on_deliver;
  // Called right after a node's Tick(), before its Ready is taken: in
  // raftkv-server a client call can reach the core between the ticker's
  // Tick() and the I/O loop's next GetReady(). Tests use core(node) here.
  std::function<void(uint64_t node)> after_tick;
  // Called for every message a node sends (after the sim's checks); returning
  // true swallows it: it never reaches the network. Scripted tests use this
  // to hold messages back and Inject() them later.
  std::function<bool(const Envelope&)> intercept;
  // Puts a message on the network (a fresh delay; intercept is not called).
  void Inject(Envelope env);

  // ---- invariants ----
  bool ok() const { return violations_.empty(); }
  const std::vector<std::string>& violations() const { return violations_; }
  // Records a failure found by a test (so it lands in Report()).
  void Fail(const std::string& what);
  // Seed, violations and the last events.
  std::string Report() const;
  // Runs every invariant check now (full: also the entry-by-entry ones).
  void CheckInvariants(bool full);
  // A description of every node's state, for failure messages.
  std::string StateString() const;

 private:
  struct PendingRpc {
    uint64_t requester = 0;
    uint64_t requester_incarnation = 0;
    MessageType type = MessageType::kAppend;
  };
  struct ReadCall {
    uint64_t node = 0;
    uint64_t incarnation = 0;
    uint64_t call_event = 0;
    uint64_t min_index = 0;  // highest commit index known anywhere at the call
    // Causality: peers that received a message the leader sent after the
    // call (with the event of that delivery), and peers that answered after.
    std::map<uint64_t, uint64_t> touched;
    std::set<uint64_t> confirmed;
    // The voters of every configuration the leader had in effect since the
    // call: the read may be confirmed by a majority of any of them.
    std::vector<std::vector<uint64_t>> voter_sets;
    bool done = false;
  };
  struct Node {
    uint64_t id = 0;
    std::unique_ptr<Raft> core;
    uint64_t incarnation = 0;
    MembershipConfig bootstrap;
    // Durable store: hard state, log (entries log_first, log_first + 1, ...;
    // log_first is always base.index + 1), the snapshot the log is based on,
    // and the snapshot files by (index, term).
    HardState hs;
    std::vector<Entry> log;
    uint64_t log_first = 1;
    SnapshotFile base;
    std::map<std::pair<uint64_t, uint64_t>, SnapshotFile> files;
    // This incarnation: the state machine and its digest.
    std::vector<Entry> applied;
    uint64_t digest = 0;
    MembershipConfig reported_config;
    bool config_reported = false;
    MemberInvariants checks;        // this incarnation's core (shared checker)
    uint64_t recorded_commit = 0;   // commit indexes already checked against committed_
    uint64_t leader_seen_term = 0;  // last term in which it was seen leader and checked
    std::map<uint64_t, PendingRpc> pending_rpcs;      // answered in the next Ready
    std::map<uint64_t, PendingRpc> rpcs_in_progress;  // rpc_id -> call, until answered
    std::optional<CrashPoint> crash_at;
    // A Ready whose write is in progress (async persistence), and which of
    // its messages were already sent.
    std::optional<Ready> inflight;
    std::vector<bool> inflight_sent;
    // All incarnations.
    uint64_t max_term = 0;
    std::map<uint64_t, ReadState> reads;
    std::set<uint64_t> failed_reads;
  };
  // A compact event record, formatted only for Report().
  struct TraceEvent {
    uint64_t event = 0;
    uint64_t tick = 0;
    std::string text;
  };

  Node& At(uint64_t node);
  const Node& At(uint64_t node) const;
  void StartCore(Node& n);
  void DoCrash(Node& n);
  void Deliver(Envelope env);
  void Drop(const Envelope& env, const char* why);
  // The RPC that `caller` made to `peer` failed: report it after its deadline.
  void ScheduleUnreachable(uint64_t caller, uint64_t caller_incarnation, uint64_t peer,
                           bool immediate);
  void TickAll();
  // Runs Ready cycles until the core has nothing more to hand out.
  void ProcessReady(Node& n);
  // Persists a Ready, sends the rest of its messages, Advance()s and applies.
  // False if the node crashed on the way.
  bool CompleteReady(Node& n, const Ready& rd, const std::vector<bool>& sent);
  void Persist(Node& n, const Ready& rd);
  // Cuts the durable log before `first`, checking no committed entry is lost
  // (`replacement`: the entries written from `first` on).
  void TruncateDurable(Node& n, uint64_t first, const std::vector<Entry>& replacement);
  void Send(Node& n, const Message& m, bool before_persist);
  void Enqueue(Envelope env);
  void ValidateOutgoing(Node& n, const Message& m, bool before_persist);
  void RegisterEntry(uint64_t node, const Entry& e, uint64_t prev_term, const char* where);
  // Durable log helpers (index 0 and compacted indexes: nullptr / term 0;
  // DurableTermAt knows the base snapshot's term at its index).
  static uint64_t DurableLast(const Node& n) { return n.log_first - 1 + n.log.size(); }
  static const Entry* DurableEntry(const Node& n, uint64_t index);
  static uint64_t DurableTermAt(const Node& n, uint64_t index);
  static uint64_t DurableLastTerm(const Node& n);
  // Whether `e` is in the node's durable log or covered by its base snapshot.
  bool DurablyHas(const Node& n, const Entry& e) const;
  bool DoSnapshot(Node& n);
  void PruneSnapshotFiles(Node& n);
  // Ready::snapshot: the durable part (log reset, base) and the state machine.
  void InstallSnapshotDurably(Node& n, const SnapshotRef& s);
  void RestoreStateMachine(Node& n, const SnapshotRef& s);
  void Applied(Node& n, const Entry& e);
  void CheckDigest(Node& n);
  void CheckLeaderMembership(Node& n);
  void CheckCommitQuorum(Node& n, uint64_t index);
  void RecordCommit(Node& n);
  // Moves what the cluster checker found into violations().
  void FlushClusterViolations();
  void CheckLeaderCompleteness(Node& n);
  // full: the shared member checks walk the whole log too.
  void CheckNodeCheap(Node& n, bool full = false);
  void CheckNodeFull(Node& n);
  void CheckPairwiseLogs();
  void AfterStep();
  void Trace(std::string text);
  void Violation(const std::string& what);
  static std::string Describe(const Message& m);
  uint64_t MaxCommitAnywhere() const;

  SimOptions options_;
  Rng rng_;
  std::vector<uint64_t> ids_;
  std::map<uint64_t, Node> nodes_;
  std::map<uint64_t, int> group_;  // partition group of each node

  std::map<std::pair<uint64_t, uint64_t>, Envelope> queue_;  // (deliver_at, seq)
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> last_delivery_on_link_;
  uint64_t next_seq_ = 1;
  uint64_t next_rpc_id_ = 1;
  uint64_t now_ = 0;
  uint64_t next_tick_at_ = 0;
  uint64_t ticks_ = 0;
  uint64_t event_ = 0;
  uint64_t steps_since_full_check_ = 0;
  std::set<uint64_t> touched_;  // nodes that ran a Ready cycle in this step

  // ---- global history for the invariants ----
  // Leaders by term, votes, entries seen, entries known committed (with the
  // highest term when each was first known committed) and their
  // configurations.
  ClusterInvariants cluster_;
  std::map<uint64_t, uint64_t> digest_at_;  // applied index -> state machine digest
  MembershipConfig bootstrap_;
  SimStats stats_;
  std::map<uint64_t, ReadCall> read_calls_;                            // read id -> call

  std::vector<std::string> violations_;
  std::deque<TraceEvent> trace_;
};

// Seeds for a test: RAFT_SIM_SEED=<n> runs only seed n; RAFT_SIM_SEEDS=<k>
// runs seeds 1..k; RAFT_SIM_SCALE=<m> runs m times the default count (for
// long soak runs); otherwise 1..default_count.
std::vector<uint64_t> TestSeeds(int default_count);

// Human-readable one-liner for an entry.
std::string EntryString(const Entry& e);

}  // namespace raftkv::raft::sim
