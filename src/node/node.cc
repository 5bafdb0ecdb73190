#include "node/node.h"

#include <glog/logging.h>

#include <algorithm>
#include <random>
#include <utility>

#include "raft/core/membership.h"
#include "storage/bootstrap_file.h"
#include "common/thread_name.h"

namespace raftkv {

namespace {

// The core's settings; its configuration at index 0 is the data
// directory's bootstrap record, never the cluster file.
raft::Config CoreConfig(const NodeOptions& options, const MembershipConfig& bootstrap,
                        uint64_t applied) {
  raft::Config config = options.core;
  config.id = options.id;
  config.applied = applied;
  config.bootstrap = bootstrap;
  config.voters.clear();
  for (const MemberConfig& m : bootstrap.members()) {
    if (m.voter()) config.voters.push_back(m.id());
  }
  config.seed = std::random_device{}();
  return config;
}

}  // namespace

Status RaftNode::Open(const NodeOptions& options, std::unique_ptr<RaftNode>* node) {
  RecoveredState r;
  Status s = RecoverNode(options, &r);
  if (!s.ok()) return s;
  node->reset(new RaftNode(options, std::move(r)));
  // The log owns the membership: the cluster file only supplies the
  // addresses of members the configuration does not name.
  const MembershipConfig config = (*node)->Membership();
  const std::string differs = DescribeClusterFileDifference(options.cluster, config);
  if (!differs.empty()) {
    LOG(WARNING) << "member " << options.id << ": the cluster file disagrees with the membership in "
                 << options.data_dir << " " << raft::DescribeMembership(config) << ": " << differs
                 << ". Using the data directory's; change the membership with raftkvctl member "
                    "add/remove, not by editing the cluster file";
  }
  return Status::OK();
}

RaftNode::RaftNode(const NodeOptions& options, RecoveredState r)
    : options_(options),
      lock_(std::move(r.lock)),
      log_(std::move(r.log)),
      hard_state_file_(std::move(r.hard_state_file)),
      kv_stores_(std::move(r.kv_stores)),
      state_machine_(std::move(r.state_machine)),
      raft_(CoreConfig(options, r.bootstrap, r.applied), r.hard_state, r.base, std::move(r.entries)),
      applied_index_(r.applied),
      cluster_id_(r.cluster_id),
      bootstrap_config_(r.bootstrap),
      snapshots_(options_, std::move(r.snapshots), std::move(r.checkpoints), r.base, state_machine_.get(), log_.get(),
                 &metrics_,
                 SnapshotManager::Hooks{
                     [this](uint64_t index, std::string* config) {
                       MutexLock lock(&mu_);
                       // The core knows the configuration at any index from
                       // its own snapshot on.
                       if (index < raft_.snapshot().index) return false;
                       *config = raft_.MembershipAt(index).SerializeAsString();
                       return true;
                     },
                     [this] { WakeIoLoop(); }}),
      apply_([this](const std::deque<Entry>& entries, Completions* out) { ApplyEntries(entries, out); },
             &metrics_.apply_wakeups) {
  log_->set_sync_observer(&metrics_);
  metrics_.log_bytes.store(log_->SizeBytes(), std::memory_order_relaxed);
}

Status RaftNode::CheckClusterId(uint64_t id, uint64_t from, bool adopt) {
  uint64_t mine = cluster_id();
  if (id == 0 || id == mine) return Status::OK();
  if (mine == 0 && adopt) {
    MutexLock lock(&cluster_id_mu_);
    mine = cluster_id();
    if (mine == 0) {
      Status s = BootstrapFile(options_.data_dir + "/bootstrap").Save(bootstrap_config_, id);
      if (!s.ok()) return Status::IOError("cannot record the cluster id: " + s.ToString());
      cluster_id_.store(id, std::memory_order_release);
      LOG(INFO) << "member " << options_.id << " joined cluster " << ClusterIdHex(id)
                << " (told by member " << from << ")";
      return Status::OK();
    }
    if (id == mine) return Status::OK();
  }
  if (mine == 0) return Status::OK();  // not known yet: the leader's messages will tell
  return Status::FailedPrecondition(
      "member " + std::to_string(from) + " belongs to cluster " + ClusterIdHex(id) + ", member " +
      std::to_string(options_.id) + " to cluster " + ClusterIdHex(mine) +
      ": a member of another cluster (or of an earlier one on the same addresses) reached this "
      "one; check the cluster files, --initial_cluster_token and the data directories");
}

RaftNode::~RaftNode() {
  Stop();
  lock_.Unlock();
}

void RaftNode::Start(PeerSender* sender) {
  sender_ = sender;
  MembershipConfig members;
  {
    MutexLock lock(&mu_);
    members = raft_.membership();
  }
  // The configuration recovered from the snapshot and log may name members
  // the cluster file does not.
  sender_->UpdateMembers(members);
  apply_.Start();
  io_thread_ = std::thread([this] {
    SetThreadName("raftkv-io");
    IoLoop();
  });
  tick_thread_ = std::thread([this] {
    SetThreadName("raftkv-tick");
    TickLoop();
  });
}

void RaftNode::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.SignalAll();
  stop_signal_.SignalAll();
  state_machine_->StopRetrying();  // an apply waiting for its store gives up
  if (io_thread_.joinable()) io_thread_.join();
  if (tick_thread_.joinable()) tick_thread_.join();
  // After the I/O loop (which may be waiting for it to drain): completions
  // already handed over still run; entries not applied yet are not (their
  // calls are failed below).
  apply_.Stop();
  Completions completions;
  snapshots_.Stop(&completions);
  std::vector<ReplyCallback> replies;
  {
    MutexLock lock(&mu_);
    calls_.FailAll(&completions, &replies);
  }
  RunAll(&completions);
  for (auto& reply : replies) reply(nullptr);
}

void RaftNode::WakeIoLoop() {
  // Taking mu_ orders this with the I/O loop's check of its wake-up
  // condition: it either sees the new work or is already waiting.
  { MutexLock lock(&mu_); }
  wake_.Signal();
}

// ---------------------------------------------------------------------------
// Calls (gRPC threads)
// ---------------------------------------------------------------------------

std::string RaftNode::AddressOfLocked(uint64_t id) const {
  if (id == 0) return "";
  if (const MemberConfig* m = raft::FindMember(raft_.membership(), id); m && !m->address().empty()) {
    return m->address();
  }
  if (const Member* m = options_.cluster.Find(id)) return m->address;
  if (id == options_.id) return options_.self_address;
  return "";
}

std::string RaftNode::AddressOf(uint64_t id) const {
  MutexLock lock(&mu_);
  return AddressOfLocked(id);
}

void RaftNode::CheckInvariantsLocked() {
#ifndef NDEBUG
  std::vector<std::string> violations;
  invariants_.Check(raft_, /*full=*/false, &violations);
  for (const std::string& v : violations) LOG(DFATAL) << "consensus invariant broken: " << v;
#endif
}

Outcome RaftNode::NotLeaderLocked() const {
  Outcome out;
  out.leader_id = raft_.leader_id();
  const std::string address = AddressOfLocked(out.leader_id);
  if (out.leader_id != 0 && !address.empty()) {
    out.leader_address = address;
    out.status = Status(Status::Code::kFailedPrecondition,
                        "not leader; the leader is member " + std::to_string(out.leader_id) + " at " + address,
                        Status::Reason::kNotLeader);
  } else {
    out.leader_id = 0;
    out.status = Status(Status::Code::kUnavailable,
                        "no leader yet (member " + std::to_string(options_.id) + " is " +
                            raft::RoleName(raft_.role()) + " in term " + std::to_string(raft_.term()) +
                            "); retry shortly",
                        Status::Reason::kNoLeader);
  }
  return out;
}

Outcome RaftNode::NotLeader() const {
  MutexLock lock(&mu_);
  return NotLeaderLocked();
}

void RaftNode::Propose(std::string command, Clock::time_point deadline, OutcomeCallback done) {
  Outcome refusal;
  {
    MutexLock lock(&mu_);
    if (stopping_) {
      refusal = Failure(Status::Code::kUnavailable, "server is shutting down", Status::Reason::kStopped);
    } else {
      raft::ProposeResult r = raft_.Propose(std::move(command));
      if (r.accepted) {
        metrics_.proposals.fetch_add(1, std::memory_order_relaxed);
        calls_.AddWrite(r.index, r.term, deadline, std::move(done));
        wake_.Signal();
        return;
      }
      if (!r.error.ok() && raft_.role() == raft::Role::kLeader) {
        // A leader refusing proposals (a leadership transfer in progress):
        // the new leader will take them shortly; clients retry UNAVAILABLE.
        refusal = Failure(Status::Code::kUnavailable, r.error.message());
      } else {
        refusal = NotLeaderLocked();
      }
    }
  }
  refusal.not_applied = true;  // never proposed
  metrics_.proposals_refused.fetch_add(1, std::memory_order_relaxed);
  done(std::move(refusal));
}

void RaftNode::ChangeMembership(const raft::MembershipChange& change, Clock::time_point deadline,
                                OutcomeCallback done) {
  Outcome refusal;
  {
    MutexLock lock(&mu_);
    if (stopping_) {
      refusal = Failure(Status::Code::kUnavailable, "server is shutting down", Status::Reason::kStopped);
    } else {
      raft::ProposeResult r = raft_.ProposeMembershipChange(change);
      if (r.accepted) {
        LOG(INFO) << "member " << options_.id << " proposed " << raft::ChangeTypeName(change.type)
                  << " of member " << change.id << " at index " << r.index << " (term " << r.term
                  << ")";
        calls_.AddWrite(r.index, r.term, deadline, std::move(done));
        wake_.Signal();
        return;
      }
      if (!r.error.ok()) {
        refusal = Failure(Status::Code::kFailedPrecondition,
                          std::string(raft::ChangeTypeName(change.type)) + " of member " +
                              std::to_string(change.id) + " refused: " + r.error.message(),
                          r.error.reason());
      } else {
        refusal = NotLeaderLocked();
      }
    }
  }
  refusal.not_applied = true;
  done(std::move(refusal));
}

void RaftNode::TransferLeadership(uint64_t target, Clock::time_point deadline, OutcomeCallback done) {
  Outcome refusal;
  {
    MutexLock lock(&mu_);
    if (stopping_) {
      refusal = Failure(Status::Code::kUnavailable, "server is shutting down", Status::Reason::kStopped);
    } else if (raft_.role() != raft::Role::kLeader) {
      refusal = NotLeaderLocked();
    } else {
      const Status error = raft_.TransferLeadership(target);
      if (error.ok()) {
        LOG(INFO) << "member " << options_.id << " transfers leadership of term " << raft_.term()
                  << " to member " << target;
        calls_.AddTransfer(target, raft_.term(), deadline, std::move(done));
        if (raft_.HasReady()) wake_.Signal();
        return;
      }
      refusal = Failure(Status::Code::kFailedPrecondition,
                        "leadership transfer to member " + std::to_string(target) +
                            " refused: " + error.message());
    }
  }
  done(std::move(refusal));
}

void RaftNode::ReadIndex(Clock::time_point deadline, OutcomeCallback done) {
  Outcome refusal;
  {
    MutexLock lock(&mu_);
    if (stopping_) {
      refusal = Failure(Status::Code::kUnavailable, "server is shutting down", Status::Reason::kStopped);
    } else {
      const uint64_t id = calls_.NextReadId();
      if (raft_.ReadIndex(id)) {
        calls_.AddRead(id, deadline, std::move(done));
        wake_.Signal();
        return;
      }
      refusal = NotLeaderLocked();
    }
  }
  done(std::move(refusal));
}

void RaftNode::StepRequest(raft::Message request, ReplyCallback reply) {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      if (request.type == raft::MessageType::kAppend && request.append.entries_size() > 0) {
        metrics_.append_entries_received.Observe(request.append.entries_size());
      }
      request.rpc_id = calls_.AddReply(std::move(reply));
      raft_.Step(request);
      wake_.Signal();
      return;
    }
  }
  reply(nullptr);
}

void RaftNode::StepOneWay(const raft::Message& request) {
  MutexLock lock(&mu_);
  if (stopping_) return;
  raft_.Step(request);
  if (raft_.HasReady()) wake_.Signal();
}

void RaftNode::StepResponse(const raft::Message& response) {
  MutexLock lock(&mu_);
  if (stopping_) return;
  raft_.Step(response);
  if (raft_.HasReady()) wake_.Signal();
}

void RaftNode::ReportUnreachable(uint64_t peer) {
  MutexLock lock(&mu_);
  if (stopping_) return;
  raft_.ReportUnreachable(peer);
  if (raft_.HasReady()) wake_.Signal();
}

Status RaftNode::BeginReceiveSnapshot(uint64_t last_index, uint64_t last_term, SnapshotFormat format,
                                      std::unique_ptr<SnapshotSink>* out) {
  return snapshots_.BeginReceive(last_index, last_term, format, out);
}

Status RaftNode::OpenSnapshotSource(uint64_t last_index, uint64_t last_term,
                                    std::unique_ptr<SnapshotSource>* out) {
  return snapshots_.OpenSource(last_index, last_term, out);
}

Status RaftNode::OpenSnapshotFile(uint64_t last_index, uint64_t last_term,
                                  std::unique_ptr<SnapshotFileSource>* out) {
  return snapshots_.OpenFile(last_index, last_term, out);
}

void RaftNode::TakeSnapshot(std::function<void(Status, SnapshotInfo)> done) {
  snapshots_.Request(std::move(done));
}

MembershipConfig RaftNode::Membership() const {
  MutexLock lock(&mu_);
  return raft_.membership();
}

NodeStatus RaftNode::GetStatus() const {
  MutexLock lock(&mu_);
  NodeStatus st;
  st.id = options_.id;
  st.address = AddressOfLocked(options_.id);
  st.role = raft_.role();
  st.term = raft_.term();
  st.commit_index = raft_.commit_index();
  st.applied_index = applied_index_;
  st.leader_id = raft_.leader_id();
  st.leader_address = AddressOfLocked(st.leader_id);
  st.last_log_index = raft_.last_index();
  st.durable_index = raft_.durable_index();
  st.voters = raft_.voters();
  st.sessions = state_machine_->SessionCount();
  st.revision = state_machine_->Revision();
  const bool leader = raft_.role() == raft::Role::kLeader;
  for (const MemberConfig& m : raft_.membership().members()) {
    MemberInfo info;
    info.id = m.id();
    info.address = m.address().empty() ? AddressOfLocked(m.id()) : m.address();
    info.voter = m.voter();
    if (leader) {
      if (m.id() == options_.id) {
        info.state = "self";
        info.match_index = raft_.durable_index();
      } else if (const raft::Progress* pr = raft_.ProgressOf(m.id())) {
        info.state = raft::ProgressStateName(pr->state());
        info.match_index = pr->match();
      }
    }
    st.members.push_back(std::move(info));
  }
  st.config_index = raft_.membership_index();
  st.config_committed = st.config_index <= raft_.commit_index();
  const raft::SnapshotRef newest = snapshots_.newest();
  st.snapshot_index = newest.index;
  st.snapshot_term = newest.term;
  st.first_log_index = raft_.first_index();
  return st;
}

// ---------------------------------------------------------------------------
// The I/O loop
// ---------------------------------------------------------------------------

void RaftNode::IoLoop() {
  Completions completions;
  for (;;) {
    raft::Ready rd;
    bool have_ready = false;
    std::optional<SnapshotManager::Result> finished;
    uint64_t applied_index = 0;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && !raft_.HasReady() && !snapshots_.HasWork(applied_index_)) {
        wake_.Wait(&mu_);
      }
      if (stopping_) return;
      metrics_.io_loop_cycles.fetch_add(1, std::memory_order_relaxed);
      finished = snapshots_.TakeFinished(&completions);
      // Compact the core between two Readys (never with one in flight): the
      // file is durable, so the entries up to its index may go from memory;
      // followers that still need them get the snapshot.
      if (finished && finished->written && !raft_.Compact(finished->info.last_index)) {
        LOG(INFO) << "core not compacted to snapshot " << finished->info.last_index
                  << " (its snapshot is at " << raft_.snapshot().index << ")";
      }
      if (raft_.HasReady()) {
        rd = raft_.GetReady();
        have_ready = true;
      }
      applied_index = applied_index_;
      known_leader_.store(raft_.leader_id(), std::memory_order_relaxed);
      known_term_.store(raft_.term(), std::memory_order_relaxed);
      if (raft_.leader_id() != 0 && raft_.leader_id() != last_leader_seen_) {
        last_leader_seen_ = raft_.leader_id();
        metrics_.leader_changes.fetch_add(1, std::memory_order_relaxed);
      }
    }
    CycleTimes times;
    times.start = Clock::now();
    if (finished) snapshots_.Finish(*finished);
    times.snapshot_done = Clock::now();
    std::vector<Entry> committed;
    if (have_ready) {
      committed = std::move(rd.committed);
      ProcessReady(rd, &completions, &times);
    }
    apply_.Hand(std::move(committed), &completions);
    snapshots_.MaybeStart(applied_index);
    ReportSlowCycle(times, Clock::now());
    // After appends, a snapshot's compaction or an installed snapshot: the
    // log is this thread's alone, so its size reaches the scrapes this way.
    if (have_ready || finished) {
      metrics_.log_bytes.store(log_->SizeBytes(), std::memory_order_relaxed);
    }
  }
}

void RaftNode::ReportSlowCycle(const CycleTimes& t, Clock::time_point end) {
  // Heartbeats leave on this thread: a pass as long as half the shortest
  // election timeout lets followers campaign against a healthy leader.
  const auto limit = std::chrono::milliseconds(options_.core.tick_ms * options_.core.election_ticks / 2);
  if (end - t.start < limit) return;
  metrics_.slow_io_cycles.fetch_add(1, std::memory_order_relaxed);
  if (end - last_slow_cycle_log_ < std::chrono::seconds(5)) {
    ++slow_cycles_muted_;
    return;
  }
  last_slow_cycle_log_ = end;
  auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  const Clock::time_point installed = std::max(t.installed, t.snapshot_done);
  const Clock::time_point sent = std::max(t.sent, installed);
  const Clock::time_point persisted = std::max(t.persisted, sent);
  const Clock::time_point answered = std::max(t.answered, persisted);
  LOG(WARNING) << "member " << options_.id << ": one pass of the I/O loop took " << ms(end - t.start)
               << " ms (heartbeats and replies wait for it): snapshot bookkeeping "
               << ms(t.snapshot_done - t.start) << " ms, installing the leader's snapshot "
               << ms(installed - t.snapshot_done) << " ms, sending " << t.messages_sent << " message(s) with "
               << t.entry_bytes_sent << " entry bytes " << ms(sent - installed) << " ms, persisting "
               << t.entries_persisted << " entries " << ms(persisted - sent) << " ms, answering "
               << ms(answered - persisted) << " ms, the rest " << ms(end - answered) << " ms"
               << (slow_cycles_muted_ > 0 ? " (" + std::to_string(slow_cycles_muted_) +
                                                " more slow passes since the last report)"
                                          : "");
  slow_cycles_muted_ = 0;
}

void RaftNode::ProcessReady(raft::Ready& rd, Completions* completions, CycleTimes* times) {
  std::vector<std::pair<ReplyCallback, const raft::Message*>> replies;
  // 0. A new configuration: peers are dialed at their addresses before any
  //    message of this Ready is sent.
  if (rd.config) sender_->UpdateMembers(*rd.config);
  // 0'. A snapshot from the leader replaces the state before anything else.
  if (rd.snapshot && !InstallSnapshot(*rd.snapshot, completions)) return;  // stopping
  times->installed = Clock::now();
  // 1. The leader's AppendEntries go out before its own fsync, so followers
  //    write in parallel with the leader (unless this Ready changes the
  //    term: see Ready::SendBeforePersist).
  for (raft::Message& m : rd.messages) {
    if (m.type == raft::MessageType::kAppend && m.append.entries_size() > 0) {
      metrics_.append_entries_sent.Observe(m.append.entries_size());
    } else if (m.type == raft::MessageType::kSnapshot) {
      metrics_.snapshots_sent.fetch_add(1, std::memory_order_relaxed);
    }
    if (rd.SendBeforePersist(m)) {
      if (m.type == raft::MessageType::kAppend) {
        for (const Entry& e : m.append.entries()) times->entry_bytes_sent += e.data().size();
      }
      ++times->messages_sent;
      sender_->Send(std::move(m));
    }
  }
  times->sent = Clock::now();
  // 2. Persist: hard state first (term/vote before any vote is answered),
  //    then the entries with a single fsync for the whole batch.
  if (!PersistReady(rd)) return;  // stopping: nothing of this Ready is answered
  times->persisted = Clock::now();
  times->entries_persisted = rd.entries.size();
  // 3. Everything else reflects durable state and may go now.
  {
    MutexLock lock(&mu_);
    for (const raft::Message& m : rd.messages) {
      if (rd.SendBeforePersist(m) || !m.IsResponse()) continue;
      if (ReplyCallback reply = calls_.TakeReply(m.rpc_id)) replies.emplace_back(std::move(reply), &m);
    }
    raft_.Advance(rd);
    CheckInvariantsLocked();
  }
  for (auto& [reply, m] : replies) reply(m);
  replies.clear();
  for (raft::Message& m : rd.messages) {
    if (!rd.SendBeforePersist(m) && !m.IsResponse()) sender_->Send(std::move(m));
  }
  times->answered = Clock::now();
  // 4. The committed entries go to the apply thread (IoLoop); reads
  //    confirmed by a quorum wait for it to reach their index.
  {
    MutexLock lock(&mu_);
    for (const raft::ReadState& r : rd.reads) calls_.ReadConfirmed(r.id, r.index);
    for (uint64_t id : rd.failed_reads) calls_.ReadFailed(id, completions);
    calls_.ReleaseReads(applied_index_, completions);
  }
}

bool RaftNode::PersistReady(const raft::Ready& rd) {
  if (!rd.hard_state && rd.entries.empty()) return true;
  bool hard_state_saved = !rd.hard_state;
  return UntilWritten([&](const char** what) {
    Status s;
    *what = "its hard state";
    if (!hard_state_saved) s = hard_state_file_->Save(*rd.hard_state);
    hard_state_saved = s.ok();  // a retry after a refused log write does not save it again
    if (s.ok() && !rd.entries.empty()) {
      *what = "log entries";
      s = log_->Append(rd.entries);
      if (s.ok()) s = log_->Sync();
    }
    return s;
  });
}

bool RaftNode::UntilWritten(const std::function<Status(const char** what)>& write) {
  uint64_t failures = 0;
  Clock::time_point first_failure;  // taken only when a write fails
  std::chrono::milliseconds backoff(10);
  for (;;) {
    const char* what = "";
    const Status s = write(&what);
    if (s.ok()) break;
    // A failed fdatasync loses pages nobody can name: only recovery from
    // what is on disk is safe. Nothing of this Ready was acknowledged.
    LOG_IF(FATAL, log_->failed()) << "member " << options_.id << " cannot persist " << what << ": "
                                  << s.ToString() << "; restart it to recover from the disk";
    metrics_.storage_errors.fetch_add(1, std::memory_order_relaxed);
    if (failures++ == 0) {
      first_failure = Clock::now();
      metrics_.storage_stalled.store(1, std::memory_order_relaxed);
      LOG(ERROR) << "member " << options_.id << " cannot persist " << what << ": " << s.ToString()
                 << "; it acknowledges nothing and retries until the disk takes the write";
    }
    MutexLock lock(&mu_);
    if (!stopping_) stop_signal_.WaitFor(&mu_, backoff);
    if (stopping_) return false;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  if (failures > 0) {
    metrics_.storage_stalled.store(0, std::memory_order_relaxed);
    LOG(WARNING) << "member " << options_.id << " persisted again after " << failures
                 << " refused writes in "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - first_failure).count()
                 << " ms";
  }
  return true;
}

bool RaftNode::InstallSnapshot(const raft::SnapshotRef& snap, Completions* completions) {
  // Committed entries handed to the apply thread are all below the snapshot
  // (the core installs one only beyond its commit index): let it finish
  // them, so the state machine is idle while it is replaced.
  apply_.WaitApplied();
  snapshots_.Install(snap);
  // Stopping before the log restarted: the restart finds the snapshot and
  // a log that does not continue it, and discards that log (recovery.h).
  if (!UntilWritten([&](const char** what) {
        *what = "the log's restart after the leader's snapshot";
        return snapshots_.FinishInstall(snap);
      })) {
    return false;
  }
  if (apply_observer_) apply_observer_();
  MutexLock lock(&mu_);
  applied_index_ = snap.index;
  // Writes waiting at or below the snapshot cannot be matched with their
  // entries any more (only a deposed leader has any): outcome unknown.
  calls_.FailWritesUpTo(snap.index, completions);
  calls_.ReleaseReads(applied_index_, completions);
  return true;
}

// ---------------------------------------------------------------------------
// The apply thread and the ticker
// ---------------------------------------------------------------------------

void RaftNode::ApplyEntries(const std::deque<Entry>& committed, Completions* completions) {
  std::vector<ApplyResult> results;
  // False only when Stop() ended a wait for the store: the entries are not
  // applied, and Stop() fails their calls.
  if (!state_machine_->ApplyAll(committed, &results)) return;
  metrics_.applied_entries.fetch_add(results.size(), std::memory_order_relaxed);
  if (apply_observer_) apply_observer_();
  MutexLock lock(&mu_);
  applied_index_ = committed.back().index();
  calls_.WritesApplied(committed, results, completions);
  calls_.ReleaseReads(applied_index_, completions);
  if (snapshots_.HasWork(applied_index_)) wake_.Signal();
}

void RaftNode::TickLoop() {
  const auto period = std::chrono::milliseconds(options_.core.tick_ms);
  auto next = Clock::now() + period;
  Completions completions;
  const int64_t leaderless_ticks =
      int64_t{kLeaderlessElectionTimeouts} * options_.core.election_ticks;
  Clock::time_point last_late_log;
  for (;;) {
    bool leaderless_changed = false;
    int64_t without_leader_ms = 0;
    Clock::duration late{};
    {
      MutexLock lock(&mu_);
      while (!stopping_ && Clock::now() < next) stop_signal_.WaitUntil(&mu_, next);
      if (stopping_) return;
      late = Clock::now() - next;
      HoldCampaignsWhileStalledLocked();
      raft_.Tick();
      const bool leaderless = raft_.ticks_since_leader() >= leaderless_ticks;
      if (leaderless != leaderless_) {
        leaderless_ = leaderless;
        leaderless_changed = true;
        without_leader_ms = raft_.ticks_since_leader() * options_.core.tick_ms;
      }
      const Clock::time_point now = Clock::now();
      calls_.ExpireDeadlines(now, &completions);
      // CheckTransfers calls the lambda with mu_ still held.
      calls_.CheckTransfers(raft_, options_.id,
                            [this](uint64_t id) {
                              mu_.AssertHeld();
                              return AddressOfLocked(id);
                            },
                            now, &completions);
      if (raft_.HasReady()) wake_.Signal();
    }
    RunAll(&completions);
    MaybeHandOverStalledLeadership(Clock::now());
    // A tick taken late (the node's lock was held, or the process starved
    // of CPU) delays heartbeats and elections alike.
    if (late >= 4 * period && Clock::now() - last_late_log >= std::chrono::seconds(5)) {
      last_late_log = Clock::now();
      LOG(WARNING) << "member " << options_.id << " ticked "
                   << std::chrono::duration_cast<std::chrono::milliseconds>(late).count()
                   << " ms late (its lock was held that long, or the process got no CPU)";
    }
    if (leaderless_changed) {
      if (leaderless_) {
        LOG(WARNING) << "member " << options_.id << " has heard from no leader for "
                     << without_leader_ms << " ms (cut off, removed, or no quorum)";
      } else {
        LOG(INFO) << "member " << options_.id << " hears from a leader again";
      }
      if (leaderless_observer_) leaderless_observer_(leaderless_, without_leader_ms);
    }
    next += period;
    const auto now = Clock::now();
    if (next < now) next = now + period;  // we fell behind (e.g. SIGSTOP): don't burst
  }
}

void RaftNode::HoldCampaignsWhileStalledLocked() {
  // A member whose store refuses writes would commit as leader but apply and
  // acknowledge nothing: it lets the others elect one (and a leader in that
  // state hands leadership over, below).
  const bool stalled = state_machine_->StoreStalled();
  if (stalled == raft_.campaigns_held()) return;
  raft_.HoldCampaigns(stalled);
  LOG(WARNING) << "member " << options_.id
               << (stalled ? " holds its campaigns while its key-value store refuses writes"
                           : " may campaign again: its key-value store takes writes");
}

void RaftNode::MaybeHandOverStalledLeadership(Clock::time_point now) {
  if (!state_machine_->StoreStalled()) {
    store_stalled_since_ = Clock::time_point();
    stall_handovers_ = 0;
    return;
  }
  if (store_stalled_since_ == Clock::time_point()) store_stalled_since_ = now;
  const auto election_timeout =
      std::chrono::milliseconds(int64_t{options_.core.tick_ms} * options_.core.election_ticks);
  if (now - store_stalled_since_ < election_timeout) return;
  // Again after 4 election timeouts, then 8, ... up to 64, while it lasts.
  if (stall_handovers_ > 0 &&
      now - last_stall_handover_ < (4 << std::min(stall_handovers_ - 1, 4)) * election_timeout) {
    return;
  }
  uint64_t target = 0;
  {
    MutexLock lock(&mu_);
    if (stopping_ || raft_.role() != raft::Role::kLeader) return;
    target = MostUpToDateVoterLocked();
  }
  last_stall_handover_ = now;
  ++stall_handovers_;
  const uint64_t id = options_.id;
  if (target == 0) {
    LOG(WARNING) << "member " << id << " leads, but its key-value store refuses writes and no "
                 << "voter is replicating to take over: it keeps leading and acknowledges nothing";
    return;
  }
  // It commits but cannot apply, so it acknowledges nothing: another voter
  // can serve while this one waits for room.
  LOG(WARNING) << "member " << id << " leads, but its key-value store refuses writes: it hands "
               << "leadership to member " << target;
  TransferLeadership(target, now + election_timeout, [id, target](Outcome out) {
    if (!out.status.ok()) {
      LOG(WARNING) << "member " << id << " could not hand leadership to member " << target
                   << ": " << out.status.message();
    }
  });
}

uint64_t RaftNode::MostUpToDateVoter() const {
  MutexLock lock(&mu_);
  return MostUpToDateVoterLocked();
}

uint64_t RaftNode::MostUpToDateVoterLocked() const {
  if (raft_.role() != raft::Role::kLeader) return 0;
  uint64_t best = 0;
  uint64_t best_match = 0;
  for (const MemberConfig& m : raft_.membership().members()) {
    if (m.id() == options_.id || !m.voter()) continue;
    const raft::Progress* pr = raft_.ProgressOf(m.id());
    if (pr == nullptr || pr->state() != raft::Progress::State::kReplicate) continue;
    if (best == 0 || pr->match() > best_match) {
      best = m.id();
      best_match = pr->match();
    }
  }
  return best;
}

}  // namespace raftkv
