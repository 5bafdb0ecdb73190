#include "service/node.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <glog/logging.h>

#include <filesystem>
#include <random>

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

}  // namespace

Status RaftNode::Open(const NodeOptions& options, std::unique_ptr<RaftNode>* node) {
  if (options.id == 0) return Status::InvalidArgument("member id must be positive");
  if (options.cluster.Find(options.id) == nullptr) {
    return Status::InvalidArgument("member id " + std::to_string(options.id) +
                                   " is not listed in the cluster configuration");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) return Status::IOError("cannot create data directory " + options.data_dir + ": " + ec.message());

  const std::string lock_path = options.data_dir + "/LOCK";
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
  if (lock_fd < 0) return Status::IOError("cannot open " + lock_path);
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    return Status::IOError("data directory " + options.data_dir +
                           " is in use by another raftkv-server (" + lock_path + " is locked)");
  }

  auto hard_state_file = std::make_unique<HardStateFile>(options.data_dir + "/hardstate");
  HardState hard_state;
  Status s = hard_state_file->Load(&hard_state);
  if (!s.ok()) {
    ::close(lock_fd);
    return s;
  }
  std::unique_ptr<SegmentedLog> log;
  LogRecovery recovery;
  s = SegmentedLog::Open(options.data_dir + "/log", options.log, &log, &recovery);
  if (!s.ok()) {
    ::close(lock_fd);
    return s;
  }
  if (recovery.truncated_tail) {
    LOG(WARNING) << "log recovery cut a torn or corrupt tail: " << recovery.detail;
  }
  if (!recovery.entries.empty() && recovery.entries.front().index() != 1) {
    ::close(lock_fd);
    return Status::Corruption("log in " + options.data_dir + "/log starts at index " +
                              std::to_string(recovery.entries.front().index()) + ", expected 1");
  }
  if (!recovery.entries.empty() && recovery.entries.back().term() > hard_state.term) {
    ::close(lock_fd);
    return Status::Corruption("log term " + std::to_string(recovery.entries.back().term()) +
                              " is ahead of the saved term " + std::to_string(hard_state.term));
  }
  LOG(INFO) << "member " << options.id << " recovered term " << hard_state.term << ", vote "
            << hard_state.vote << ", " << recovery.entries.size() << " log entries";
  node->reset(new RaftNode(options, std::move(log), std::move(hard_state_file), hard_state,
                           std::move(recovery.entries)));
  (*node)->lock_fd_ = lock_fd;
  return Status::OK();
}

namespace {
raft::Config CoreConfig(const NodeOptions& options) {
  raft::Config config;
  config.id = options.id;
  config.voters = options.cluster.Ids();
  config.election_ticks = options.election_ticks;
  config.heartbeat_ticks = options.heartbeat_ticks;
  config.max_inflight_appends = options.max_inflight_appends;
  config.max_append_entries = options.max_append_entries;
  config.max_append_bytes = options.max_append_bytes;
  config.tick_ms = options.tick_ms;
  config.seed = std::random_device{}();
  return config;
}
}  // namespace

RaftNode::RaftNode(const NodeOptions& options, std::unique_ptr<SegmentedLog> log,
                   std::unique_ptr<HardStateFile> hard_state_file, const HardState& hard_state,
                   std::vector<Entry> entries)
    : options_(options),
      log_(std::move(log)),
      hard_state_file_(std::move(hard_state_file)),
      core_(CoreConfig(options), hard_state, std::move(entries)) {}

RaftNode::~RaftNode() {
  Stop();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void RaftNode::Start(PeerSender* sender) {
  sender_ = sender;
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
    replies.swap(pending_replies_);
  }
  RunAll(&completions);
  for (auto& [id, reply] : replies) reply(nullptr);
}

Outcome RaftNode::NotLeaderLocked() const {
  Outcome out;
  out.leader_id = core_.leader_id();
  const Member* leader = out.leader_id ? options_.cluster.Find(out.leader_id) : nullptr;
  if (leader != nullptr) {
    out.leader_address = leader->address;
    out.status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                              "not leader; the leader is member " + std::to_string(out.leader_id) +
                                  " at " + leader->address);
  } else {
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
        pending_writes_.emplace(r.index, PendingWrite{r.term, deadline, std::move(done)});
        wake_.notify_one();
        return;
      }
      refusal = NotLeaderLocked();
    }
  }
  refusal.not_applied = true;  // never proposed
  done(std::move(refusal));
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
      request.rpc_id = next_rpc_id_++;
      pending_replies_.emplace(request.rpc_id, std::move(reply));
      core_.Step(request);
      wake_.notify_one();
      return;
    }
  }
  reply(nullptr);
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

NodeStatus RaftNode::GetStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  NodeStatus st;
  st.id = options_.id;
  st.address = options_.cluster.Find(options_.id)->address;
  st.role = core_.role();
  st.term = core_.term();
  st.commit_index = core_.commit_index();
  st.applied_index = applied_index_;
  st.leader_id = core_.leader_id();
  if (const Member* leader = options_.cluster.Find(st.leader_id)) st.leader_address = leader->address;
  st.last_log_index = core_.last_index();
  st.durable_index = core_.durable_index();
  st.voters = core_.voters();
  st.sessions = state_machine_.SessionCount();
  return st;
}

void RaftNode::IoLoop() {
  std::vector<std::function<void()>> completions;
  std::vector<std::pair<ReplyCallback, const raft::Message*>> replies;
  for (;;) {
    raft::Ready rd;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || core_.HasReady(); });
      if (stopping_) return;
      rd = core_.GetReady();
    }
    // 1. The leader's AppendEntries go out before its own fsync, so followers
    //    write in parallel with the leader.
    for (raft::Message& m : rd.messages) {
      if (raft::MessagesBeforePersist(m)) sender_->Send(std::move(m));
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
        if (raft::MessagesBeforePersist(m) || !m.IsResponse()) continue;
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
      if (!raft::MessagesBeforePersist(m) && !m.IsResponse()) sender_->Send(std::move(m));
    }
    // 4. Apply and answer clients.
    ApplyCommitted(rd.committed, &completions);
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
        completions.push_back([done = std::move(it->second.done)] {
          done(Failure(grpc::StatusCode::UNAVAILABLE,
                       "leadership was lost before the read was confirmed; retry"));
        });
        pending_reads_.erase(it);
      }
      ReleaseReads(&completions);
    }
    RunAll(&completions);
  }
}

void RaftNode::ApplyCommitted(const std::vector<Entry>& committed,
                              std::vector<std::function<void()>>* completions) {
  if (committed.empty()) return;
  std::vector<ApplyResult> results;
  results.reserve(committed.size());
  for (const Entry& e : committed) results.push_back(state_machine_.Apply(e));
  std::lock_guard<std::mutex> lock(mu_);
  applied_index_ = committed.back().index();
  auto it = pending_writes_.lower_bound(committed.front().index());
  while (it != pending_writes_.end() && it->first <= applied_index_) {
    const Entry& e = committed[it->first - committed.front().index()];
    Outcome out;
    if (e.term() == it->second.term) {
      out.apply = results[it->first - committed.front().index()];
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
    } else {
      // Another leader's entry took this index: the proposal was never committed.
      out.status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "leadership changed before the write committed; it was not "
                                "applied, retry");
      out.not_applied = true;
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
  const auto period = std::chrono::milliseconds(options_.tick_ms);
  auto next = Clock::now() + period;
  std::vector<std::function<void()>> completions;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (!stopping_ && Clock::now() < next) stop_signal_.wait_until(lock, next);
      if (stopping_) return;
      core_.Tick();
      ExpireDeadlines(&completions);
      if (core_.HasReady()) wake_.notify_one();
    }
    RunAll(&completions);
    next += period;
    const auto now = Clock::now();
    if (next < now) next = now + period;  // we fell behind (e.g. SIGSTOP): don't burst
  }
}

}  // namespace raftkv
