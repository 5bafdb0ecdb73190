#include "gtest/raft/sim_cluster.h"

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

[[noreturn]] void OnGlogFailure() {
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

bool SameEntry(const Entry& a, const Entry& b) {
  return a.index() == b.index() && a.term() == b.term() && a.type() == b.type() &&
         a.data() == b.data();
}

std::string U(uint64_t v) { return std::to_string(v); }

}  // namespace

std::string EntryString(const Entry& e) {
  std::string s = U(e.index()) + "/" + U(e.term());
  s += e.type() == ENTRY_NOOP ? " noop" : " cmd '" + e.data().substr(0, 24) + "'";
  return s;
}

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
  g_active = this;
  for (int i = 1; i <= options_.nodes; ++i) {
    const uint64_t id = static_cast<uint64_t>(i);
    ids_.push_back(id);
    nodes_[id].id = id;
    group_[id] = 0;
  }
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

void SimCluster::StartCore(Node& n) {
  ++n.incarnation;
  Config config;
  config.id = n.id;
  config.voters = ids_;
  config.election_ticks = options_.election_ticks;
  config.heartbeat_ticks = options_.heartbeat_ticks;
  config.pre_vote = options_.pre_vote;
  config.check_quorum = options_.check_quorum;
  config.max_inflight_appends = options_.max_inflight_appends;
  config.max_append_entries = options_.max_append_entries;
  config.max_append_bytes = options_.max_append_bytes;
  config.seed = options_.seed * 1000003ull + n.id * 7919ull + n.incarnation * 104729ull;
  n.core = std::make_unique<Raft>(config, n.hs, n.log);
  n.applied.clear();
  n.last_commit = 0;
  n.recorded_commit = 0;
  n.leader_seen_term = 0;
  n.pending_rpcs.clear();
  n.rpcs_in_progress.clear();
  n.crash_at.reset();
  n.inflight.reset();
  // A term that was never durable was never revealed to anyone either.
  n.max_term = n.hs.term;
  Trace("start node " + U(n.id) + " incarnation " + U(n.incarnation) + " hs=" + U(n.hs.term) + "/" +
        U(n.hs.vote) + " log=" + U(n.log.size()));
  if (n.core->term() != n.hs.term || n.core->vote() != n.hs.vote) {
    Violation("node " + U(n.id) + " restarted with term/vote " + U(n.core->term()) + "/" +
              U(n.core->vote()) + " but the durable hard state is " + U(n.hs.term) + "/" +
              U(n.hs.vote));
  }
  if (n.core->last_index() != n.log.size()) {
    Violation("node " + U(n.id) + " restarted with last_index " + U(n.core->last_index()) +
              " but the durable log has " + U(n.log.size()) + " entries");
  }
  ProcessReady(n);
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
        " (durable: hs=" + U(n.hs.term) + "/" + U(n.hs.vote) + " log=" + U(n.log.size()) +
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
      if (keep == 0 && !all.empty() && all.front().index() <= n.log.size()) {
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
  ProposeResult r = n.core->Propose(data);
  Trace("propose at " + U(node) + " '" + data.substr(0, 24) + "' -> " +
        (r.accepted ? "index " + U(r.index) + " term " + U(r.term) : std::string("refused")));
  if (r.accepted) {
    if (n.core->role() != Role::kLeader) {
      Violation("node " + U(node) + " accepted a proposal while " + RoleName(n.core->role()));
    }
    if (r.index != n.core->last_index() || r.term != n.core->term() ||
        n.core->TermAt(r.index) != r.term) {
      Violation("proposal at node " + U(node) + " returned index/term " + U(r.index) + "/" +
                U(r.term) + " but the log ends at " + U(n.core->last_index()) + "/" +
                U(n.core->last_term()) + " in term " + U(n.core->term()));
    }
  } else if (n.core->role() == Role::kLeader) {
    Violation("leader " + U(node) + " refused a proposal");
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
  if (rng_.Chance(options_.drop_prob)) return Drop(env, "lost");

  if (!m.IsResponse()) {
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
      auto [lt, inserted] = leaders_by_term_.emplace(n.core->term(), n.id);
      if (!inserted && lt->second != n.id) {
        Violation("election safety: nodes " + U(lt->second) + " and " + U(n.id) +
                  " are both leader of term " + U(n.core->term()));
      }
    }
    Ready rd = n.core->GetReady();

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
      const MessageType want = call->second.type == MessageType::kAppend ? MessageType::kAppendResp
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
      if (!MessagesBeforePersist(m)) continue;
      if (m.IsResponse()) {
        Violation("MessagesBeforePersist() is true for a response: " + Describe(m));
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

    // 4. Apply.
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
      if (e.index() > committed_.size()) {
        Violation("node " + U(n.id) + " applies " + EntryString(e) +
                  " which no commit index covers (known committed: " + U(committed_.size()) + ")");
      } else if (!SameEntry(e, committed_[e.index() - 1])) {
        Violation("state machine safety: node " + U(n.id) + " applies " + EntryString(e) + " but " +
                  EntryString(committed_[e.index() - 1]) + " was committed there");
      }
      n.applied.push_back(e);
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
      const size_t quorum = ids_.size() / 2 + 1;
      if (1 + call.confirmed.size() < quorum) {
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
  if (first == 0 || first > n.log.size() + 1) {
    Violation("node " + U(n.id) + ": Ready::entries start at " + U(first) +
              " but the durable log ends at " + U(n.log.size()));
    return;
  }
  if (first <= n.log.size()) TruncateDurable(n, first, rd.entries);
  for (const Entry& e : rd.entries) {
    RegisterEntry(n.id, e, n.log.empty() ? 0 : n.log.back().term(), "persisted");
    n.log.push_back(e);
  }
  if (n.log.back().term() > n.hs.term) {
    Violation("node " + U(n.id) + " persists " + EntryString(n.log.back()) +
              " with a term above its durable term " + U(n.hs.term));
  }
}

void SimCluster::TruncateDurable(Node& n, uint64_t first, const std::vector<Entry>& replacement) {
  // A committed entry this node holds must never be removed.
  for (uint64_t i = first; i <= n.log.size(); ++i) {
    if (i > committed_.size()) break;
    if (!SameEntry(n.log[i - 1], committed_[i - 1])) continue;
    const size_t k = static_cast<size_t>(i - first);
    if (k >= replacement.size() || !SameEntry(replacement[k], committed_[i - 1])) {
      Violation("node " + U(n.id) + " truncates its log from " + U(first) +
                ", removing committed entry " + EntryString(committed_[i - 1]));
      break;
    }
  }
  n.log.resize(first - 1);
}

void SimCluster::ValidateOutgoing(Node& n, const Message& m, bool before_persist) {
  if (m.from != n.id) {
    Violation("node " + U(n.id) + " sends a message with from=" + U(m.from) + ": " + Describe(m));
  }
  if (m.to == n.id || nodes_.count(m.to) == 0) {
    Violation("node " + U(n.id) + " sends a message to " + U(m.to) + ": " + Describe(m));
    return;
  }
  switch (m.type) {
    case MessageType::kAppend: {
      const AppendEntriesRequest& a = m.append;
      auto lt = leaders_by_term_.find(a.term());
      if (lt == leaders_by_term_.end() || lt->second != n.id) {
        Violation("node " + U(n.id) + " sends AppendEntries in term " + U(a.term()) +
                  " without having been its leader: " + Describe(m));
      }
      if (a.to() != m.to || a.leader_id() != n.id) {
        Violation("AppendEntries header fields wrong: to=" + U(a.to()) +
                  " leader_id=" + U(a.leader_id()) + ": " + Describe(m));
      }
      uint64_t prev_term = a.prev_log_term();
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
      if (r.success() && r.term() == n.hs.term && r.match_index() > n.log.size()) {
        Violation("node " + U(n.id) + " acknowledges match " + U(r.match_index()) + " but only " +
                  U(n.log.size()) + " entries are durable: " + Describe(m));
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
        auto [g, inserted] = votes_granted_.emplace(std::make_pair(n.id, r.term()), m.to);
        if (!inserted && g->second != m.to) {
          Violation("durable vote: node " + U(n.id) + " granted votes to " + U(g->second) +
                    " and " + U(m.to) + " in term " + U(r.term()));
        }
      }
      break;
    }
  }
  (void)before_persist;
}

void SimCluster::RegisterEntry(uint64_t node, const Entry& e, uint64_t prev_term,
                               const char* where) {
  auto [it, inserted] = entry_registry_.emplace(std::make_pair(e.index(), e.term()),
                                                EntryInfo{e.type(), e.data(), prev_term});
  if (inserted) return;
  const EntryInfo& info = it->second;
  if (info.type != e.type() || info.data != e.data() || info.prev_term != prev_term) {
    Violation(std::string("log matching: node ") + U(node) + " " + where + " " + EntryString(e) +
              " after term " + U(prev_term) + ", but another log has " + U(e.index()) + "/" +
              U(e.term()) +
              (info.type == ENTRY_NOOP ? " noop" : " cmd '" + info.data.substr(0, 24) + "'") +
              " after term " + U(info.prev_term));
  }
}

// ---------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------

void SimCluster::RecordCommit(Node& n) {
  const uint64_t c = n.core->commit_index();
  if (c < n.last_commit) {
    Violation("node " + U(n.id) + " commit index decreased from " + U(n.last_commit) + " to " +
              U(c));
  }
  n.last_commit = std::max(n.last_commit, c);
  if (c > n.core->last_index()) {
    Violation("node " + U(n.id) + " commit index " + U(c) + " beyond its last index " +
              U(n.core->last_index()));
    return;
  }
  for (uint64_t i = n.recorded_commit + 1; i <= c; ++i) {
    const Entry& e = n.core->EntryAt(i);
    if (i <= committed_.size()) {
      if (!SameEntry(e, committed_[i - 1])) {
        Violation("state machine safety: node " + U(n.id) + " has commit index " + U(c) +
                  " covering " + EntryString(e) + " but " + EntryString(committed_[i - 1]) +
                  " was committed at that index");
        break;
      }
    } else {
      committed_.push_back(e);
      committed_obs_term_.push_back(MaxTerm());
    }
  }
  n.recorded_commit = std::max(n.recorded_commit, c);
}

void SimCluster::CheckLeaderCompleteness(Node& n) {
  Raft& r = *n.core;
  if (r.role() != Role::kLeader || r.term() == n.leader_seen_term) return;
  n.leader_seen_term = r.term();
  auto [lt, inserted] = leaders_by_term_.emplace(r.term(), n.id);
  if (!inserted && lt->second != n.id) {
    Violation("election safety: nodes " + U(lt->second) + " and " + U(n.id) +
              " are both leader of term " + U(r.term()));
  }
  for (size_t i = 0; i < committed_.size(); ++i) {
    if (committed_obs_term_[i] >= r.term()) break;
    const uint64_t index = i + 1;
    if (index > r.last_index() || !SameEntry(r.EntryAt(index), committed_[i])) {
      Violation("leader completeness: node " + U(n.id) + " became leader of term " + U(r.term()) +
                " without committed entry " + EntryString(committed_[i]) + " (it has " +
                (index > r.last_index() ? std::string("nothing") : EntryString(r.EntryAt(index))) +
                ")");
      break;
    }
  }
}

void SimCluster::CheckNodeCheap(Node& n) {
  Raft& r = *n.core;
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
  if (n.inflight || r.HasReady()) return;  // a write in progress; checked after it
  if (r.term() != n.hs.term || r.vote() != n.hs.vote) {
    Violation("node " + U(n.id) + " in-memory term/vote " + U(r.term()) + "/" + U(r.vote()) +
              " not durable after its Ready cycle (durable " + U(n.hs.term) + "/" + U(n.hs.vote) +
              ")");
  }
  if (r.last_index() != n.log.size() || (!n.log.empty() && r.last_term() != n.log.back().term())) {
    Violation("node " + U(n.id) + " in-memory log ends at " + U(r.last_index()) + "/" +
              U(r.last_term()) + " but its durable log ends at " + U(n.log.size()) + "/" +
              U(n.log.empty() ? 0 : n.log.back().term()) + " after its Ready cycle");
  }
  if (r.durable_index() > n.log.size()) {
    Violation("node " + U(n.id) + " durable_index " + U(r.durable_index()) + " but only " +
              U(n.log.size()) + " entries are durable");
  }
  if (r.role() == Role::kLeader) {
    // A follower of this term holds the leader's log up to its match.
    for (uint64_t peer : ids_) {
      if (peer == n.id) continue;
      const Progress* pr = r.ProgressOf(peer);
      if (pr == nullptr) {
        Violation("leader " + U(n.id) + " has no progress for " + U(peer));
        continue;
      }
      const Node& p = nodes_.at(peer);
      if (p.hs.term != r.term() || pr->match() == 0) continue;
      if (pr->match() > p.log.size() || p.log[pr->match() - 1].term() != r.TermAt(pr->match())) {
        Violation("leader " + U(n.id) + " believes " + U(peer) + " matches up to " +
                  U(pr->match()) + " but its durable log has " + U(p.log.size()) + " entries" +
                  (pr->match() <= p.log.size()
                       ? " and term " + U(p.log[pr->match() - 1].term()) + " there"
                       : std::string()));
      }
    }
  }
}

void SimCluster::CheckNodeFull(Node& n) {
  Raft& r = *n.core;
  if (n.inflight || r.HasReady() || r.last_index() != n.log.size()) return;
  for (uint64_t i = 1; i <= r.last_index(); ++i) {
    if (!SameEntry(r.EntryAt(i), n.log[i - 1]) || r.TermAt(i) != n.log[i - 1].term()) {
      Violation("node " + U(n.id) + " in-memory entry " + EntryString(r.EntryAt(i)) +
                " differs from its durable " + EntryString(n.log[i - 1]));
      return;
    }
  }
}

void SimCluster::CheckPairwiseLogs() {
  for (size_t a = 0; a < ids_.size(); ++a) {
    for (size_t b = a + 1; b < ids_.size(); ++b) {
      const std::vector<Entry>& la = nodes_[ids_[a]].log;
      const std::vector<Entry>& lb = nodes_[ids_[b]].log;
      size_t i = std::min(la.size(), lb.size());
      while (i > 0 && la[i - 1].term() != lb[i - 1].term()) --i;
      for (size_t j = 0; j < i; ++j) {
        if (!SameEntry(la[j], lb[j])) {
          Violation("log matching: nodes " + U(ids_[a]) + " and " + U(ids_[b]) +
                    " agree on the term at index " + U(i) + " but differ at " + EntryString(la[j]) +
                    " vs " + EntryString(lb[j]));
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
    CheckNodeCheap(n);
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
  uint64_t c = committed_.size();
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
      if (r->term() != l->term() || r->leader_id() != id) {
        stable = false;
        break;
      }
    }
    if (stable) return id;
  }
  return 0;
}

bool SimCluster::Converged() const {
  const uint64_t leader = StableLeader();
  if (leader == 0) return false;
  const Raft* l = core(leader);
  if (l->last_term() != l->term()) return false;
  for (uint64_t id : ids_) {
    const Raft* r = core(id);
    if (r == nullptr) return false;
    if (r->last_index() != l->last_index() || r->last_term() != l->last_term()) return false;
    if (r->commit_index() != l->last_index()) return false;
    if (At(id).applied.size() != r->commit_index()) return false;
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
  }
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
          << r.leader_id() << " commit " << r.commit_index() << " last " << r.last_index() << "/"
          << r.last_term() << " durable_index " << r.durable_index();
    } else {
      out << " DOWN";
    }
    out << " | applied " << n.applied.size() << " durable hs " << n.hs.term << "/" << n.hs.vote
        << " durable log " << n.log.size() << "\n";
  }
  return out.str();
}

std::string SimCluster::Report() const {
  std::ostringstream out;
  out << "seed=" << options_.seed << " nodes=" << options_.nodes << " tick=" << ticks_
      << " event=" << event_ << " known committed=" << committed_.size()
      << "  (rerun: RAFT_SIM_SEED=" << options_.seed << ")\n";
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
