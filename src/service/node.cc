#include "service/node.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <tuple>

#include "storage/file_util.h"
#include "storage/snapshot_format.h"

namespace raftkv {

namespace {

// Runs the completions collected under the lock, after releasing it.
void RunAll(std::vector<std::function<void()>>* completions) {
  for (auto& fn : *completions) fn();
  completions->clear();
}

Outcome Failure(grpc::StatusCode code, const std::string& message) {
  Outcome out;
  out.status = grpc::Status(code, message);
  return out;
}

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The cluster file as a configuration: every member a voter, in id order.
MembershipConfig BootstrapConfig(const ClusterConfig& cluster) {
  MembershipConfig config;
  std::vector<Member> members = cluster.members;
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.id < b.id; });
  for (const Member& m : members) {
    MemberConfig* mc = config.add_members();
    mc->set_id(m.id);
    mc->set_address(m.address);
    mc->set_voter(true);
  }
  return config;
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += "; ";
    out += item;
  }
  return out;
}

raft::Config CoreConfig(const NodeOptions& options) {
  raft::Config config = options.core;
  config.id = options.id;
  config.bootstrap = BootstrapConfig(options.cluster);
  config.voters = options.cluster.Ids();
  config.seed = std::random_device{}();
  return config;
}


}  // namespace

// ---------------------------------------------------------------------------
// Open: recovery
// ---------------------------------------------------------------------------

Status RaftNode::Open(const NodeOptions& options, std::unique_ptr<RaftNode>* node) {
  if (options.id == 0) return Status::InvalidArgument("member id must be positive");
  if (options.cluster.Find(options.id) == nullptr) {
    if (!options.join) {
      return Status::InvalidArgument("member id " + std::to_string(options.id) +
                                     " is not listed in the cluster configuration (a new member "
                                     "being added must be started with join)");
    }
    if (options.self_address.empty()) {
      return Status::InvalidArgument("member " + std::to_string(options.id) +
                                     " joins the cluster but has no address of its own "
                                     "(self_address)");
    }
  }
  if (options.snapshots_kept < 2) {
    return Status::InvalidArgument("snapshots_kept must be at least 2 (the previous snapshot is the "
                                   "fallback when the newest is damaged), got " +
                                   std::to_string(options.snapshots_kept));
  }
  // Durably: a data directory whose entry in its parent is lost on power
  // loss takes the member's vote and log with it.
  Status ds = file::CreateDirsDurably(options.data_dir);
  if (!ds.ok()) return Status::IOError("cannot create data directory " + options.data_dir + ": " + ds.message());

  const std::string lock_path = options.data_dir + "/LOCK";
  file::FileLock lock;  // handed to the node on success
  bool held_elsewhere = false;
  Status ls = file::FileLock::Acquire(lock_path, &lock, &held_elsewhere);
  if (!ls.ok()) return Status::IOError("cannot lock " + lock_path + ": " + ls.message());
  if (held_elsewhere) {
    return Status::IOError("data directory " + options.data_dir +
                           " is in use by another raftkv-server (" + lock_path + " is locked)");
  }

  Recovered r;
  r.hard_state_file = std::make_unique<HardStateFile>(options.data_dir + "/hardstate");
  Status s = r.hard_state_file->Load(&r.hard_state);
  if (!s.ok()) return s;

  // 1. The newest intact snapshot. LoadNewestValid logs every newer file it
  //    had to skip (ERROR) and lists them in `loaded.rejected`.
  s = SnapshotStore::Open(options.data_dir + "/snap", &r.snapshots);
  if (!s.ok()) return s;
  r.state_machine = std::make_unique<KvStateMachine>();
  SnapshotLoadResult loaded;
  const Clock::time_point load_start = Clock::now();
  s = r.snapshots->LoadNewestValid(r.state_machine.get(), &loaded);
  if (!s.ok()) return s;
  if (loaded.found) {
    r.base.index = loaded.meta.last_index;
    r.base.term = loaded.meta.last_term;
    r.base.cluster_time_ms = loaded.meta.cluster_time_ms;
    if (loaded.meta.config.empty()) {
      // Written without a configuration (only tests do that): the cluster file.
      LOG(WARNING) << loaded.path << " records no configuration; using the cluster file's";
      r.base.config = BootstrapConfig(options.cluster);
    } else if (!r.base.config.ParseFromString(loaded.meta.config)) {
      return Status::Corruption(loaded.path + ": the configuration in the header does not parse");
    } else if (std::string why = raft::CheckMembership(r.base.config); !why.empty()) {
      return Status::Corruption(loaded.path + ": invalid configuration in the header: " + why);
    } else if (r.base.config.members_size() == 0) {
      r.base.config = BootstrapConfig(options.cluster);
    }
    LOG(INFO) << "member " << options.id << " restored snapshot " << loaded.path << " (index "
              << r.base.index << ", term " << r.base.term << ", "
              << r.state_machine->Size() << " keys, " << r.state_machine->SessionCount()
              << " sessions, configuration " << raft::DescribeMembership(r.base.config) << ") in "
              << static_cast<int64_t>(MillisSince(load_start)) << " ms"
              << (loaded.rejected.empty() ? std::string()
                                          : "; skipped newer damaged file(s): " +
                                                JoinList(loaded.rejected));
  } else if (!loaded.rejected.empty()) {
    LOG(ERROR) << "member " << options.id << ": no intact snapshot in " << r.snapshots->dir()
               << "; rejected: " << JoinList(loaded.rejected);
  }

  // 2. The log.
  LogRecovery recovery;
  s = SegmentedLog::Open(options.data_dir + "/log", options.log, &r.log, &recovery);
  if (!s.ok()) return s;
  if (recovery.truncated_tail) {
    LOG(WARNING) << "log recovery cut a torn or corrupt tail: " << recovery.detail;
  }
  const uint64_t log_first = recovery.entries.empty() ? recovery.first_index
                                                      : recovery.entries.front().index();
  const uint64_t log_last = log_first + recovery.entries.size() - 1;  // log_first - 1 when empty
  // The log must continue the snapshot: entries base.index + 1 .. log_first -
  // 1 exist nowhere else on this member. Starting anyway would silently serve
  // an older state than the one this member acknowledged (e.g. the newest
  // snapshot is damaged and the log was compacted up to it), so refuse.
  if (log_first > r.base.index + 1) {
    std::string used = loaded.found ? loaded.path + " (index " + std::to_string(r.base.index) + ")"
                                    : std::string("none");
    return Status::Corruption(
        "data directory " + options.data_dir + ": the log starts at index " +
        std::to_string(log_first) + " but the snapshot in use covers entries up to index " +
        std::to_string(r.base.index) + " only, so entries " + std::to_string(r.base.index + 1) +
        ".." + std::to_string(log_first - 1) + " are missing. Snapshot used: " + used +
        ". Rejected snapshot files: " +
        (loaded.rejected.empty() ? std::string("none") : JoinList(loaded.rejected)) +
        ". Refusing to start from an older state than this member acknowledged: restore the "
        "snapshot files, or remove this member's data directory and add it back to the cluster");
  }
  if (!recovery.entries.empty() && recovery.entries.back().term() > r.hard_state.term) {
    return Status::Corruption("log term " + std::to_string(recovery.entries.back().term()) +
                              " is ahead of the saved term " + std::to_string(r.hard_state.term));
  }

  // 3. What the core gets: the entries after the snapshot. If the log holds
  //    the snapshot's index with the snapshot's term, the entries after it
  //    continue the snapshot (log matching). If it holds a different term
  //    there, or ends before the snapshot, the log is not a continuation of
  //    it: Raft discards the whole log (thesis 5.4.3; this is also where a
  //    crash between installing a leader's snapshot and resetting the log
  //    ends up). Entries at or below the snapshot stay on disk until
  //    compaction.
  if (r.base.index == 0 || log_first == r.base.index + 1) {
    r.entries = std::move(recovery.entries);
  } else {
    std::string discard;
    if (log_last >= r.base.index) {
      const Entry& at = recovery.entries[r.base.index - log_first];
      if (at.term() == r.base.term) {
        r.entries.assign(std::make_move_iterator(recovery.entries.begin() +
                                                 static_cast<ptrdiff_t>(r.base.index - log_first + 1)),
                         std::make_move_iterator(recovery.entries.end()));
      } else {
        discard = "it holds term " + std::to_string(at.term()) + " at the snapshot's index " +
                  std::to_string(r.base.index) + " (the snapshot has term " +
                  std::to_string(r.base.term) + ")";
      }
    } else {
      discard = "it ends at index " + std::to_string(log_last) + ", before the snapshot's index " +
                std::to_string(r.base.index);
    }
    if (!discard.empty()) {
      LOG(WARNING) << "member " << options.id << ": the log (indexes " << log_first << ".."
                   << log_last << ") does not continue snapshot " << r.base.index << "/"
                   << r.base.term << ": " << discard << "; discarding it";
      s = r.log->Reset(r.base.index + 1);
      if (!s.ok()) return s;
    }
  }
  // A snapshot is installed (renamed into place) before the term of the
  // leader that sent it is saved; a crash in between leaves a snapshot whose
  // last term is above the saved term. Raise the term (no vote: none was
  // cast in it) so the core never runs behind its own log.
  if (r.base.term > r.hard_state.term) {
    LOG(WARNING) << "member " << options.id << ": saved term " << r.hard_state.term
                 << " is below snapshot term " << r.base.term << "; raising it";
    r.hard_state = HardState{r.base.term, 0};
    s = r.hard_state_file->Save(r.hard_state);
    if (!s.ok()) return s;
  }
  // The snapshot files newer than the one loaded were all rejected (a newer
  // intact one would have been loaded). Move them aside (kept for
  // inspection, out of the rotation): otherwise pruning would count a
  // damaged file among the snapshots_kept and delete an intact fallback.
  if (!loaded.rejected.empty()) {
    std::vector<SnapshotFileInfo> files;
    s = r.snapshots->List(&files);
    if (!s.ok()) return s;
    bool moved = false;
    for (const SnapshotFileInfo& f : files) {
      if (loaded.found && std::tie(f.last_index, f.last_term) <= std::tie(r.base.index, r.base.term)) {
        continue;
      }
      s = file::Rename(f.path, f.path + ".damaged");
      if (!s.ok()) return s;
      LOG(ERROR) << "member " << options.id << ": moved the unusable snapshot " << f.path
                 << " aside to " << f.path << ".damaged";
      moved = true;
    }
    if (moved) {
      s = file::SyncDir(r.snapshots->dir());
      if (!s.ok()) return s;
    }
  }
  LOG(INFO) << "member " << options.id << " recovered term " << r.hard_state.term << ", vote "
            << r.hard_state.vote << ", snapshot index " << r.base.index << ", "
            << r.entries.size() << " log entries after it";
  node->reset(new RaftNode(options, std::move(r)));
  (*node)->lock_ = std::move(lock);
  return Status::OK();
}

RaftNode::RaftNode(const NodeOptions& options, Recovered r)
    : options_(options),
      log_(std::move(r.log)),
      hard_state_file_(std::move(r.hard_state_file)),
      state_machine_(std::move(r.state_machine)),
      snapshot_dir_(r.snapshots->dir()),
      snapshots_(std::move(r.snapshots)),
      core_(CoreConfig(options), r.hard_state, r.base, std::move(r.entries)) {
  applied_index_ = r.base.index;
  snapshot_index_ = r.base.index;
  snapshot_term_ = r.base.term;
  log_bytes_after_compaction_ = log_->SizeBytes();
  log_->set_sync_observer(&metrics_);
}

RaftNode::~RaftNode() {
  Stop();
  lock_.Unlock();
}

void RaftNode::Start(PeerSender* sender) {
  sender_ = sender;
  MembershipConfig members;
  {
    std::lock_guard<std::mutex> lock(mu_);
    members = core_.membership();
  }
  // The configuration recovered from the snapshot and log may name members
  // the cluster file does not.
  sender_->UpdateMembers(members);
  apply_thread_ = std::thread([this] { ApplyLoop(); });
  io_thread_ = std::thread([this] { IoLoop(); });
  tick_thread_ = std::thread([this] { TickLoop(); });
}

void RaftNode::Stop() {
  std::vector<std::function<void()>> completions;
  std::unordered_map<uint64_t, ReplyCallback> replies;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  stop_signal_.notify_all();
  if (io_thread_.joinable()) io_thread_.join();
  if (tick_thread_.joinable()) tick_thread_.join();
  // After the I/O loop (which may be waiting for it to drain): completions
  // already handed over still run; entries not applied yet are not (their
  // calls are failed below).
  {
    std::lock_guard<std::mutex> lock(apply_mu_);
    apply_stop_ = true;
  }
  apply_cv_.notify_all();
  if (apply_thread_.joinable()) apply_thread_.join();
  // A snapshot being taken finishes its file (it is complete and valid
  // either way); the log is not compacted for it, which is safe.
  if (snapshot_thread_.joinable()) snapshot_thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [index, w] : pending_writes_) {
      completions.push_back([done = std::move(w.done)] {
        done(Failure(grpc::StatusCode::UNAVAILABLE, "server is shutting down; outcome unknown"));
      });
    }
    pending_writes_.clear();
    for (auto& [id, r] : pending_reads_) {
      completions.push_back([done = std::move(r.done)] {
        done(Failure(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      });
    }
    pending_reads_.clear();
    confirmed_reads_.clear();
    for (auto& t : pending_transfers_) {
      completions.push_back([done = std::move(t.done)] {
        done(Failure(grpc::StatusCode::UNAVAILABLE,
                     "server is shutting down; the leadership transfer's outcome is unknown"));
      });
    }
    pending_transfers_.clear();
    for (auto& done : snapshot_waiters_) {
      completions.push_back([done = std::move(done)] {
        done(Status::IOError("server is shutting down; no snapshot was taken"), SnapshotInfo());
      });
    }
    snapshot_waiters_.clear();
    replies.swap(pending_replies_);
  }
  RunAll(&completions);
  for (auto& [id, reply] : replies) reply(nullptr);
}

// ---------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------

std::string RaftNode::AddressOfLocked(uint64_t id) const {
  if (id == 0) return "";
  if (const MemberConfig* m = raft::FindMember(core_.membership(), id); m && !m->address().empty()) {
    return m->address();
  }
  if (const Member* m = options_.cluster.Find(id)) return m->address;
  if (id == options_.id) return options_.self_address;
  return "";
}

std::string RaftNode::AddressOf(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return AddressOfLocked(id);
}

Outcome RaftNode::NotLeaderLocked() const {
  Outcome out;
  out.leader_id = core_.leader_id();
  const std::string address = AddressOfLocked(out.leader_id);
  if (out.leader_id != 0 && !address.empty()) {
    out.leader_address = address;
    out.status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                              "not leader; the leader is member " + std::to_string(out.leader_id) +
                                  " at " + address);
  } else {
    out.leader_id = 0;
    out.status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "no leader yet (member " + std::to_string(options_.id) + " is " +
                                  raft::RoleName(core_.role()) + " in term " +
                                  std::to_string(core_.term()) + "); retry shortly");
  }
  return out;
}

Outcome RaftNode::NotLeader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return NotLeaderLocked();
}

void RaftNode::Propose(std::string command, Clock::time_point deadline, OutcomeCallback done) {
  Outcome refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      refusal = Failure(grpc::StatusCode::UNAVAILABLE, "server is shutting down");
    } else {
      raft::ProposeResult r = core_.Propose(std::move(command));
      if (r.accepted) {
        metrics_.proposals.fetch_add(1, std::memory_order_relaxed);
        pending_writes_.emplace(r.index, PendingWrite{r.term, deadline, std::move(done)});
        wake_.notify_one();
        return;
      }
      if (!r.error.empty() && core_.role() == raft::Role::kLeader) {
        // A leader refusing proposals (a leadership transfer in progress):
        // the new leader will take them shortly; clients retry UNAVAILABLE.
        refusal = Failure(grpc::StatusCode::UNAVAILABLE, r.error + "; retry shortly");
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
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      refusal = Failure(grpc::StatusCode::UNAVAILABLE, "server is shutting down");
    } else {
      raft::ProposeResult r = core_.ProposeMembershipChange(change);
      if (r.accepted) {
        LOG(INFO) << "member " << options_.id << " proposed " << raft::ChangeTypeName(change.type)
                  << " of member " << change.id << " at index " << r.index << " (term " << r.term
                  << ")";
        pending_writes_.emplace(r.index, PendingWrite{r.term, deadline, std::move(done)});
        wake_.notify_one();
        return;
      }
      if (!r.error.empty()) {
        refusal = Failure(grpc::StatusCode::FAILED_PRECONDITION,
                          std::string(raft::ChangeTypeName(change.type)) + " of member " +
                              std::to_string(change.id) + " refused: " + r.error);
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
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      refusal = Failure(grpc::StatusCode::UNAVAILABLE, "server is shutting down");
    } else if (core_.role() != raft::Role::kLeader) {
      refusal = NotLeaderLocked();
    } else {
      const std::string error = core_.TransferLeadership(target);
      if (error.empty()) {
        LOG(INFO) << "member " << options_.id << " transfers leadership of term " << core_.term()
                  << " to member " << target;
        pending_transfers_.push_back(PendingTransfer{target, core_.term(), deadline, std::move(done)});
        if (core_.HasReady()) wake_.notify_one();
        return;
      }
      refusal = Failure(grpc::StatusCode::FAILED_PRECONDITION,
                        "leadership transfer to member " + std::to_string(target) +
                            " refused: " + error);
    }
  }
  done(std::move(refusal));
}

void RaftNode::CheckTransfers(std::vector<std::function<void()>>* completions) {
  const Clock::time_point now = Clock::now();
  for (auto it = pending_transfers_.begin(); it != pending_transfers_.end();) {
    Outcome out;
    bool finished = true;
    const uint64_t leader = core_.leader_id();
    if (leader == it->target && core_.term() > it->term) {
      out.leader_id = leader;
      out.leader_address = AddressOfLocked(leader);
      out.term = core_.term();
    } else if (core_.role() == raft::Role::kLeader && core_.term() == it->term &&
               core_.transfer_target() != it->target) {
      out = Failure(grpc::StatusCode::FAILED_PRECONDITION,
                    "leadership transfer to member " + std::to_string(it->target) +
                        " was given up (it did not catch up and win an election within an "
                        "election timeout); member " +
                        std::to_string(options_.id) + " still leads");
    } else if (core_.term() > it->term && leader != 0 && leader != it->target) {
      out = Failure(grpc::StatusCode::FAILED_PRECONDITION,
                    "member " + std::to_string(leader) + " became leader in term " +
                        std::to_string(core_.term()) + " instead of member " +
                        std::to_string(it->target));
      out.leader_id = leader;
      out.leader_address = AddressOfLocked(leader);
    } else if (it->deadline <= now) {
      out = Failure(grpc::StatusCode::DEADLINE_EXCEEDED,
                    "member " + std::to_string(it->target) +
                        " did not become leader before the deadline");
    } else {
      finished = false;
    }
    if (!finished) {
      ++it;
      continue;
    }
    completions->push_back([done = std::move(it->done), out = std::move(out)]() mutable {
      done(std::move(out));
    });
    it = pending_transfers_.erase(it);
  }
}

void RaftNode::ReadBarrier(Clock::time_point deadline, OutcomeCallback done) {
  Outcome refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      refusal = Failure(grpc::StatusCode::UNAVAILABLE, "server is shutting down");
    } else {
      const uint64_t id = next_read_id_++;
      if (core_.ReadIndex(id)) {
        pending_reads_.emplace(id, PendingRead{deadline, std::move(done), 0});
        wake_.notify_one();
        return;
      }
      refusal = NotLeaderLocked();
    }
  }
  done(std::move(refusal));
}

void RaftNode::StepRequest(raft::Message request, ReplyCallback reply) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      if (request.type == raft::MessageType::kAppend && request.append.entries_size() > 0) {
        metrics_.append_entries_received.Observe(request.append.entries_size());
      }
      request.rpc_id = next_rpc_id_++;
      pending_replies_.emplace(request.rpc_id, std::move(reply));
      core_.Step(request);
      wake_.notify_one();
      return;
    }
  }
  reply(nullptr);
}

void RaftNode::StepOneWay(const raft::Message& request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  core_.Step(request);
  if (core_.HasReady()) wake_.notify_one();
}

void RaftNode::StepResponse(const raft::Message& response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  core_.Step(response);
  if (core_.HasReady()) wake_.notify_one();
}

void RaftNode::ReportUnreachable(uint64_t peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  core_.ReportUnreachable(peer);
  if (core_.HasReady()) wake_.notify_one();
}

Status RaftNode::BeginReceiveSnapshot(uint64_t last_index, uint64_t last_term,
                                      std::unique_ptr<SnapshotReceiver>* out) {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshots_->BeginReceive(last_index, last_term, out);
}

Status RaftNode::OpenSnapshotSource(uint64_t last_index, uint64_t last_term,
                                    std::unique_ptr<SnapshotFileSource>* out) {
  SnapshotFileInfo info;
  info.last_index = last_index;
  info.last_term = last_term;
  info.path = file::JoinPath(snapshot_dir_, SnapshotStore::FileName(last_index, last_term));
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshots_->OpenSource(info, out);
}

void RaftNode::TakeSnapshot(std::function<void(Status, SnapshotInfo)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      // A snapshot already running answers this call too: it was started
      // before the call, but it is at most as old as a snapshot started now
      // would be by the time it could run.
      snapshot_waiters_.push_back(std::move(done));
      if (!snapshot_running_) snapshot_requested_ = true;
      wake_.notify_one();
      return;
    }
  }
  done(Status::IOError("server is shutting down"), SnapshotInfo());
}

NodeStatus RaftNode::GetStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  NodeStatus st;
  st.id = options_.id;
  st.address = AddressOfLocked(options_.id);
  st.role = core_.role();
  st.term = core_.term();
  st.commit_index = core_.commit_index();
  st.applied_index = applied_index_;
  st.leader_id = core_.leader_id();
  st.leader_address = AddressOfLocked(st.leader_id);
  st.last_log_index = core_.last_index();
  st.durable_index = core_.durable_index();
  st.voters = core_.voters();
  st.sessions = state_machine_->SessionCount();
  const bool leader = core_.role() == raft::Role::kLeader;
  for (const MemberConfig& m : core_.membership().members()) {
    MemberInfo info;
    info.id = m.id();
    info.address = m.address().empty() ? AddressOfLocked(m.id()) : m.address();
    info.voter = m.voter();
    if (leader) {
      if (m.id() == options_.id) {
        info.state = "self";
        info.match_index = core_.durable_index();
      } else if (const raft::Progress* pr = core_.ProgressOf(m.id())) {
        info.state = raft::ProgressStateName(pr->state());
        info.match_index = pr->match();
      }
    }
    st.members.push_back(std::move(info));
  }
  st.config_index = core_.membership_index();
  st.config_committed = st.config_index <= core_.commit_index();
  st.snapshot_index = snapshot_index_;
  st.snapshot_term = snapshot_term_;
  st.first_log_index = core_.first_index();
  return st;
}

// ---------------------------------------------------------------------------
// The I/O loop
// ---------------------------------------------------------------------------

void RaftNode::IoLoop() {
  std::vector<std::function<void()>> completions;
  for (;;) {
    raft::Ready rd;
    bool have_ready = false;
    std::optional<SnapshotResult> finished;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto wakeup = [this] {
        return stopping_ || core_.HasReady() || snapshot_result_.has_value() ||
               (snapshot_requested_ && !snapshot_running_);
      };
      wake_.wait(lock, wakeup);
      if (stopping_) return;
      if (snapshot_result_) {
        finished = std::move(*snapshot_result_);
        snapshot_result_.reset();
        snapshot_running_ = false;
        // Compact the core between two Readys (never with one in flight):
        // the file is durable, so the entries up to its index may go from
        // memory; followers that still need them get the snapshot.
        if (finished->status.ok() && finished->written) {
          const uint64_t index = finished->info.last_index;
          if (!core_.Compact(index)) {
            LOG(INFO) << "core not compacted to snapshot " << index << " (its snapshot is at "
                      << core_.snapshot().index << ")";
          }
          if (index > snapshot_index_) {
            snapshot_index_ = index;
            snapshot_term_ = finished->info.last_term;
          }
        }
        if (!finished->status.ok()) snapshot_retry_after_ = Clock::now() + std::chrono::seconds(10);
        for (auto& done : snapshot_waiters_) {
          completions.push_back([done = std::move(done), s = finished->status, info = finished->info] {
            done(s, info);
          });
        }
        snapshot_waiters_.clear();
      }
      if (core_.HasReady()) {
        rd = core_.GetReady();
        have_ready = true;
      }
      if (core_.leader_id() != 0 && core_.leader_id() != last_leader_seen_) {
        last_leader_seen_ = core_.leader_id();
        metrics_.leader_changes.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (finished) FinishSnapshot(std::move(*finished));
    std::vector<Entry> committed;
    if (have_ready) {
      committed = std::move(rd.committed);
      ProcessReady(rd, &completions);
    }
    HandToApply(std::move(committed), &completions);
    MaybeStartSnapshot();
  }
}

void RaftNode::ProcessReady(raft::Ready& rd, std::vector<std::function<void()>>* completions) {
  std::vector<std::pair<ReplyCallback, const raft::Message*>> replies;
  // 0. A new configuration: peers are dialed at their addresses before any
  //    message of this Ready is sent.
  if (rd.config) sender_->UpdateMembers(*rd.config);
  // 0'. A snapshot from the leader replaces the state before anything else.
  if (rd.snapshot) InstallSnapshot(*rd.snapshot, completions);
  // 1. The leader's AppendEntries go out before its own fsync, so followers
  //    write in parallel with the leader (unless this Ready changes the
  //    term: see Ready::SendBeforePersist).
  for (raft::Message& m : rd.messages) {
    if (m.type == raft::MessageType::kAppend && m.append.entries_size() > 0) {
      metrics_.append_entries_sent.Observe(m.append.entries_size());
    } else if (m.type == raft::MessageType::kSnapshot) {
      metrics_.snapshots_sent.fetch_add(1, std::memory_order_relaxed);
    }
    if (rd.SendBeforePersist(m)) sender_->Send(std::move(m));
  }
  // 2. Persist: hard state first (term/vote before any vote is answered),
  //    then the entries with a single fsync for the whole batch.
  if (rd.hard_state) {
    Status s = hard_state_file_->Save(*rd.hard_state);
    LOG_IF(FATAL, !s.ok()) << "cannot persist hard state: " << s.ToString();
  }
  if (!rd.entries.empty()) {
    Status s = log_->Append(rd.entries);
    if (s.ok()) s = log_->Sync();
    LOG_IF(FATAL, !s.ok()) << "cannot persist log entries: " << s.ToString();
  }
  // 3. Everything else reflects durable state and may go now.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const raft::Message& m : rd.messages) {
      if (rd.SendBeforePersist(m) || !m.IsResponse()) continue;
      auto it = pending_replies_.find(m.rpc_id);
      if (it == pending_replies_.end()) continue;
      replies.emplace_back(std::move(it->second), &m);
      pending_replies_.erase(it);
    }
    core_.Advance(rd);
  }
  for (auto& [reply, m] : replies) reply(m);
  replies.clear();
  for (raft::Message& m : rd.messages) {
    if (!rd.SendBeforePersist(m) && !m.IsResponse()) sender_->Send(std::move(m));
  }
  // 4. The committed entries go to the apply thread (IoLoop); reads
  //    confirmed by a quorum wait for it to reach their index.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const raft::ReadState& r : rd.reads) {
      auto it = pending_reads_.find(r.id);
      if (it == pending_reads_.end()) continue;  // expired meanwhile
      it->second.index = r.index;
      confirmed_reads_.emplace(r.index, r.id);
    }
    for (uint64_t id : rd.failed_reads) {
      auto it = pending_reads_.find(id);
      if (it == pending_reads_.end()) continue;
      completions->push_back([done = std::move(it->second.done)] {
        done(Failure(grpc::StatusCode::UNAVAILABLE,
                     "leadership was lost before the read was confirmed; retry"));
      });
      pending_reads_.erase(it);
    }
    ReleaseReads(completions);
  }
}

// Crash safety. The receiver renamed the verified file into the snapshot
// directory (and synced it) before the core saw the message, so from here
// on a restart finds it: if we crash before the log reset below, Open()
// restores this snapshot and discards the log because it does not continue
// it -- the same outcome. The leader learns of the installation only from
// the response, which goes out after this Ready is durable.
void RaftNode::InstallSnapshot(const raft::SnapshotRef& snap,
                               std::vector<std::function<void()>>* completions) {
  const Clock::time_point start = Clock::now();
  const std::string path =
      file::JoinPath(snapshot_dir_, SnapshotStore::FileName(snap.index, snap.term));
  // Committed entries handed to the apply thread are all below the snapshot
  // (the core installs one only beyond its commit index): let it finish
  // them, so the state machine is idle while it is replaced.
  WaitApplied();
  std::unique_ptr<SnapshotReader> reader;
  Status s = SnapshotReader::Open(path, &reader);
  if (s.ok()) s = state_machine_->Restore(reader.get());
  // The file verified end to end when it was received; failing now means the
  // disk lost it since. Nothing was acknowledged for it yet, so stopping is
  // safe: the restart recovers from the newest intact snapshot and the log.
  LOG_IF(FATAL, !s.ok()) << "cannot install snapshot " << path << " from the leader: " << s.ToString();
  LOG_IF(FATAL, state_machine_->AppliedIndex() != snap.index)
      << path << " restored the state at index " << state_machine_->AppliedIndex() << ", expected "
      << snap.index;
  const double restore_ms = MillisSince(start);
  s = log_->Reset(snap.index + 1);
  LOG_IF(FATAL, !s.ok()) << "cannot reset the log after installing snapshot " << path << ": "
                         << s.ToString();
  {
    std::lock_guard<std::mutex> lock(mu_);
    applied_index_ = snap.index;
    if (snap.index > snapshot_index_) {
      snapshot_index_ = snap.index;
      snapshot_term_ = snap.term;
    }
    // Writes waiting at or below the snapshot cannot be matched with their
    // entries any more (only a deposed leader has any): outcome unknown.
    for (auto it = pending_writes_.begin(); it != pending_writes_.end() && it->first <= snap.index;) {
      completions->push_back([done = std::move(it->second.done)] {
        done(Failure(grpc::StatusCode::UNAVAILABLE,
                     "this member installed a snapshot from the leader before the write's entry "
                     "was applied here; its outcome is unknown"));
      });
      it = pending_writes_.erase(it);
    }
    ReleaseReads(completions);
  }
  log_bytes_after_compaction_ = log_->SizeBytes();
  metrics_.snapshots_installed.fetch_add(1, std::memory_order_relaxed);
  LOG(INFO) << "member " << options_.id << " installed the leader's snapshot " << path << " (index "
            << snap.index << ", term " << snap.term << ", " << state_machine_->Size()
            << " keys, configuration " << raft::DescribeMembership(snap.config) << ") in "
            << static_cast<int64_t>(restore_ms) << " ms; the log restarts at index "
            << snap.index + 1;
  // Drop snapshot files beyond snapshots_kept (not if a snapshot is being
  // written right now: the store is busy and the next snapshot prunes).
  PruneAndCompactLog(/*wait=*/false);
}

void RaftNode::HandToApply(std::vector<Entry> entries,
                           std::vector<std::function<void()>>* completions) {
  if (entries.empty() && completions->empty()) return;
  {
    std::lock_guard<std::mutex> lock(apply_mu_);
    for (Entry& e : entries) apply_entries_.push_back(std::move(e));
    for (auto& fn : *completions) apply_completions_.push_back(std::move(fn));
  }
  completions->clear();
  apply_cv_.notify_all();
}

void RaftNode::WaitApplied() {
  std::unique_lock<std::mutex> lock(apply_mu_);
  apply_cv_.wait(lock, [this] { return apply_entries_.empty() || apply_stop_; });
  apply_cv_.wait(lock, [this] { return !applying_; });
}

void RaftNode::ApplyLoop() {
  for (;;) {
    std::deque<Entry> entries;
    std::vector<std::function<void()>> completions;
    {
      std::unique_lock<std::mutex> lock(apply_mu_);
      apply_cv_.wait(lock, [this] {
        return apply_stop_ || !apply_entries_.empty() || !apply_completions_.empty();
      });
      completions.swap(apply_completions_);
      if (!apply_stop_) {
        entries.swap(apply_entries_);
        applying_ = !entries.empty();
      }
    }
    if (!entries.empty()) {
      ApplyEntries(entries, &completions);
      {
        std::lock_guard<std::mutex> lock(apply_mu_);
        applying_ = false;
      }
      apply_cv_.notify_all();
    }
    RunAll(&completions);
    std::lock_guard<std::mutex> lock(apply_mu_);
    if (apply_stop_ && apply_completions_.empty()) return;
  }
}

void RaftNode::ApplyEntries(const std::deque<Entry>& committed,
                            std::vector<std::function<void()>>* completions) {
  std::vector<ApplyResult> results;
  results.reserve(committed.size());
  for (const Entry& e : committed) results.push_back(state_machine_->Apply(e));
  metrics_.applied_entries.fetch_add(results.size(), std::memory_order_relaxed);
  const uint64_t first = committed.front().index();
  std::lock_guard<std::mutex> lock(mu_);
  applied_index_ = committed.back().index();
  auto it = pending_writes_.lower_bound(first);
  while (it != pending_writes_.end() && it->first <= applied_index_) {
    const Entry& e = committed[it->first - first];
    Outcome out;
    if (e.term() != it->second.term) {
      // Another leader's entry took this index: the proposal was never committed.
      out.status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "leadership changed before the write committed; it was not "
                                "applied, retry");
      out.not_applied = true;
    } else if (e.type() == ENTRY_CONFIG) {
      // A membership change: committed (the state machine skips it).
      out.index = e.index();
      out.term = e.term();
    } else {
      out.apply = results[it->first - first];
      // A duplicate answers with where the first application happened.
      out.index = out.apply.index;
      out.term = out.apply.term;
      if (!out.apply.ok) {
        out.status = grpc::Status(grpc::StatusCode::INTERNAL, out.apply.error);
      } else if (out.apply.session_error == ApplyResult::SessionError::kSessionExpired) {
        out.status = grpc::Status(grpc::StatusCode::ABORTED, out.apply.error);
        out.session_expired = true;
      } else if (out.apply.session_error == ApplyResult::SessionError::kStaleSequence) {
        out.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, out.apply.error);
      }
    }
    completions->push_back([done = std::move(it->second.done), out = std::move(out)]() mutable {
      done(std::move(out));
    });
    it = pending_writes_.erase(it);
  }
  ReleaseReads(completions);
}

void RaftNode::ReleaseReads(std::vector<std::function<void()>>* completions) {
  auto it = confirmed_reads_.begin();
  while (it != confirmed_reads_.end() && it->first <= applied_index_) {
    auto read = pending_reads_.find(it->second);
    if (read != pending_reads_.end()) {
      Outcome out;
      out.index = it->first;
      completions->push_back([done = std::move(read->second.done), out = std::move(out)]() mutable {
        done(std::move(out));
      });
      pending_reads_.erase(read);
    }
    it = confirmed_reads_.erase(it);
  }
}

// ---------------------------------------------------------------------------
// Snapshots and compaction
// ---------------------------------------------------------------------------

void RaftNode::MaybeStartSnapshot() {
  // The log size is the I/O loop's to read; take it before the lock.
  const uint64_t log_bytes = options_.snapshot_log_bytes > 0 ? log_->SizeBytes() : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || snapshot_running_ || snapshot_result_) return;
    bool due = snapshot_requested_;
    if (!due && applied_index_ > snapshot_index_ && Clock::now() >= snapshot_retry_after_) {
      if (options_.snapshot_entries > 0 && applied_index_ - snapshot_index_ >= options_.snapshot_entries) {
        due = true;
      } else if (options_.snapshot_log_bytes > 0 && log_bytes >= options_.snapshot_log_bytes &&
                 log_bytes >= log_bytes_after_compaction_ + options_.snapshot_log_bytes / 2) {
        due = true;
      }
    }
    if (!due) return;
    snapshot_requested_ = false;
    snapshot_running_ = true;
  }
  // The previous snapshot thread has posted its result, so it has finished
  // or is about to return.
  if (snapshot_thread_.joinable()) snapshot_thread_.join();
  snapshot_thread_ = std::thread([this] { TakeSnapshotInBackground(); });
}

void RaftNode::TakeSnapshotInBackground() {
  SnapshotResult result;
  const Clock::time_point start = Clock::now();
  // A consistent image under the state machine's shared lock: Apply() waits,
  // reads go on. No file I/O happens under that lock.
  SnapshotWriter writer;
  state_machine_->Snapshot(&writer);
  result.capture_ms = MillisSince(start);
  const uint64_t index = writer.meta().last_index;
  const uint64_t term = writer.meta().last_term;
  result.info.last_index = index;
  result.info.last_term = term;
  if (index == 0) {
    result.status = Status::InvalidArgument("nothing has been applied yet: no snapshot to take");
  } else {
    // snapshot_mu_ is held from the check below to the end of the write, so
    // nothing else uses the store in between.
    std::lock_guard<std::mutex> store_lock(snapshot_mu_);
    bool write = false;
    uint64_t have_index = 0;
    uint64_t have_term = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      have_index = snapshot_index_;
      have_term = snapshot_term_;
      if (index < core_.snapshot().index || index < snapshot_index_) {
        // A follower installed a newer snapshot from its leader while the
        // image was captured: this one is older than the state already
        // saved, and writing it would only add a useless fallback.
      } else if (index == snapshot_index_ && term == snapshot_term_) {
        // Nothing applied since the newest snapshot: that one is the answer.
      } else {
        // The configuration at the snapshot's index: index >= the core's
        // snapshot index (checked above), so the core still knows it.
        writer.meta().config = core_.MembershipAt(index).SerializeAsString();
        write = true;
      }
    }
    if (write) {
      const Clock::time_point write_start = Clock::now();
      SnapshotFileInfo written;
      result.status = snapshots_->Write(writer, &written);
      result.write_ms = MillisSince(write_start);
      result.written = result.status.ok();
      result.info.path = written.path;
    } else {
      result.info.last_index = have_index;
      result.info.last_term = have_term;
      result.info.path = file::JoinPath(snapshot_dir_, SnapshotStore::FileName(have_index, have_term));
    }
  }
  if (result.status.ok()) {
    std::error_code ec;
    result.info.bytes = std::filesystem::file_size(result.info.path, ec);
  }
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_result_ = std::move(result);
  wake_.notify_one();
}

void RaftNode::FinishSnapshot(SnapshotResult result) {
  if (!result.status.ok()) {
    LOG(ERROR) << "member " << options_.id << ": snapshot at index " << result.info.last_index
               << " failed: " << result.status.ToString()
               << " (automatic snapshots retry in 10 s; the log is kept)";
    return;
  }
  if (!result.written) return;
  metrics_.snapshots_taken.fetch_add(1, std::memory_order_relaxed);
  LOG(INFO) << "member " << options_.id << " took snapshot " << result.info.path << ": index "
            << result.info.last_index << ", term " << result.info.last_term << ", "
            << result.info.bytes << " bytes, capture " << static_cast<int64_t>(result.capture_ms)
            << " ms, write " << static_cast<int64_t>(result.write_ms) << " ms";
  PruneAndCompactLog(/*wait=*/true);
}

// Crash safety of compaction. Each step only starts once the previous one is
// durable: (1) the new snapshot file is complete (fsync, rename, directory
// fsync: SnapshotStore::Write); (2) older snapshot files beyond
// snapshots_kept are deleted; (3) log segments wholly at or below the OLDEST
// kept snapshot are deleted. A crash anywhere leaves snapshots whose log
// suffix is complete: every kept snapshot, the fallback included, has the
// log entries after it on disk.
void RaftNode::PruneAndCompactLog(bool wait) {
  std::unique_lock<std::mutex> store_lock(snapshot_mu_, std::defer_lock);
  if (wait) {
    store_lock.lock();
  } else if (!store_lock.try_lock()) {
    return;
  }
  std::vector<SnapshotFileInfo> files;
  Status s = snapshots_->Prune(options_.snapshots_kept);
  if (s.ok()) s = snapshots_->List(&files);
  store_lock.unlock();
  if (!s.ok()) {
    LOG(ERROR) << "cannot prune the snapshot files in " << snapshot_dir_ << ": " << s.ToString()
               << " (the log is not compacted)";
    return;
  }
  if (files.empty()) return;
  const uint64_t keep_after = files.front().last_index;  // the oldest kept snapshot
  const size_t segments_before = log_->SegmentCount();
  s = log_->CompactPrefix(keep_after);
  if (!s.ok()) {
    LOG(ERROR) << "cannot compact the log up to index " << keep_after << ": " << s.ToString();
    return;
  }
  log_bytes_after_compaction_ = log_->SizeBytes();
  const size_t removed = segments_before - std::min(segments_before, log_->SegmentCount());
  LOG(INFO) << "member " << options_.id << ": " << files.size() << " snapshot(s) kept (oldest "
            << keep_after << ", newest " << files.back().last_index << "); log compacted up to index "
            << keep_after << ": " << removed << " segment(s) removed, log now starts at "
            << log_->FirstIndex() << " (" << log_bytes_after_compaction_ << " bytes)";
}

// ---------------------------------------------------------------------------
// Deadlines and the ticker
// ---------------------------------------------------------------------------

void RaftNode::ExpireDeadlines(std::vector<std::function<void()>>* completions) {
  const Clock::time_point now = Clock::now();
  for (auto it = pending_writes_.begin(); it != pending_writes_.end();) {
    if (it->second.deadline <= now) {
      completions->push_back([done = std::move(it->second.done)] {
        done(Failure(grpc::StatusCode::DEADLINE_EXCEEDED,
                     "write not committed before the deadline; its outcome is unknown"));
      });
      it = pending_writes_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = pending_reads_.begin(); it != pending_reads_.end();) {
    if (it->second.deadline <= now) {
      completions->push_back([done = std::move(it->second.done)] {
        done(Failure(grpc::StatusCode::DEADLINE_EXCEEDED,
                     "read not confirmed by a quorum before the deadline"));
      });
      it = pending_reads_.erase(it);
    } else {
      ++it;
    }
  }
}

void RaftNode::TickLoop() {
  const auto period = std::chrono::milliseconds(options_.core.tick_ms);
  auto next = Clock::now() + period;
  std::vector<std::function<void()>> completions;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (!stopping_ && Clock::now() < next) stop_signal_.wait_until(lock, next);
      if (stopping_) return;
      core_.Tick();
      ExpireDeadlines(&completions);
      CheckTransfers(&completions);
      if (core_.HasReady()) wake_.notify_one();
    }
    RunAll(&completions);
    next += period;
    const auto now = Clock::now();
    if (next < now) next = now + period;  // we fell behind (e.g. SIGSTOP): don't burst
  }
}

}  // namespace raftkv
