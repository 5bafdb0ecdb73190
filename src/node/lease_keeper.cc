#include "node/lease_keeper.h"

#include <glog/logging.h>

#include <algorithm>

#include "common/thread_name.h"

namespace raftkv {

LeaseKeeper::LeaseKeeper(const LeaseOptions& options, RaftNode* node) : options_(options), node_(node) {}

LeaseKeeper::~LeaseKeeper() { Stop(); }

void LeaseKeeper::Start() {
  thread_ = std::thread([this] {
    SetThreadName("raftkv-lease");
    Loop();
  });
}

void LeaseKeeper::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  lifeline_.Close();  // a revoke still in flight answers into nothing
}

Status LeaseKeeper::GrantTtl(int64_t requested, int64_t* granted) const {
  if (requested <= 0) {
    return Status(Status::Code::kInvalidArgument,
                        "lease TTL must be > 0 seconds, got " + std::to_string(requested));
  }
  if (requested > options_.max_ttl_s) {
    return Status(Status::Code::kInvalidArgument,
                        "lease TTL " + std::to_string(requested) + "s exceeds the maximum " +
                            std::to_string(options_.max_ttl_s) + "s (--max_lease_ttl_s)");
  }
  *granted = std::max(requested, options_.min_ttl_s);
  return Status::OK();
}

void LeaseKeeper::SyncLocked(Steady::time_point now) {
  const NodeStatus st = node_->GetStatus();
  const bool leader = st.role == raft::Role::kLeader;
  if (!leader) {
    if (leader_term_ != 0) deadlines_.clear();
    leader_term_ = 0;
    revoking_.clear();
    return;
  }
  const uint64_t generation = node_->state_machine().LeaseGeneration();
  const bool promoted = leader_term_ != st.term;
  if (!promoted && synced_ && generation == generation_) return;
  std::map<int64_t, LeaseClock> next;
  for (const LeaseInfo& lease : node_->state_machine().LeaseInfos()) {
    auto it = deadlines_.find(lease.id);
    // The same grant keeps its clock; a new grant of the id starts afresh.
    const bool same = !promoted && it != deadlines_.end() && it->second.granted_index == lease.granted_index;
    next.emplace(lease.id,
                 LeaseClock{lease.granted_index, same ? it->second.deadline : DeadlineAfter(now, lease.ttl)});
    if (!same) revoking_.erase(lease.id);
  }
  if (promoted) {
    LOG(INFO) << "leading term " << st.term << ": " << next.size()
              << " leases get their full TTL from now";
    revoking_.clear();
  }
  deadlines_.swap(next);
  for (auto it = revoking_.begin(); it != revoking_.end();) {
    it = deadlines_.count(it->first) ? std::next(it) : revoking_.erase(it);
  }
  leader_term_ = st.term;
  generation_ = generation;
  synced_ = true;
}

void LeaseKeeper::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    cv_.WaitFor(&mu_, std::chrono::milliseconds(options_.check_interval_ms));
    if (stopping_) break;
    const auto now = Steady::now();
    SyncLocked(now);
    if (leader_term_ == 0) continue;
    std::vector<std::pair<int64_t, uint64_t>> expired;  // (id, granted index)
    for (const auto& [id, clock] : deadlines_) {
      if (clock.deadline > now) continue;
      auto r = revoking_.find(id);
      // A proposal that got no answer (lost leadership, dropped) is made again.
      if (r != revoking_.end() && now - r->second < std::chrono::seconds(2)) continue;
      revoking_[id] = now;
      expired.emplace_back(id, clock.granted_index);
    }
    if (expired.empty()) continue;
    lock.Unlock();
    for (const auto& [id, granted_index] : expired) {
      Command cmd;
      cmd.set_op(Command::LEASE_REVOKE);
      cmd.set_lease(id);
      cmd.set_lease_expired(true);
      // Revokes this grant only: not a later grant of the same id.
      cmd.set_lease_granted_index(granted_index);
      node_->Propose(cmd.SerializeAsString(), Steady::now() + std::chrono::seconds(2),
                     [this, id = id, granted_index = granted_index, line = lifeline_.line()](Outcome out) {
                       line.Run([&] { Revoked(id, granted_index, out.status); });
                     });
    }
    lock.Lock();
  }
}

void LeaseKeeper::Revoked(int64_t id, uint64_t granted_index, const Status& status) {
  MutexLock l(&mu_);
  if (status.ok()) {
    ++expired_total_;
    VLOG(1) << "lease " << std::hex << id << " expired";
  }
  if (status.ok() || status.code() == Status::Code::kNotFound) {
    revoking_.erase(id);
    auto it = deadlines_.find(id);
    if (it != deadlines_.end() && it->second.granted_index == granted_index) deadlines_.erase(it);
  }
}

LeaseKeeper::Steady::time_point LeaseKeeper::DeadlineAfter(Steady::time_point now, int64_t ttl_s) {
  const int64_t ttl = std::min(std::max<int64_t>(ttl_s, 0), LeaseOptions::kMaxTtlS);
  const auto left = Steady::time_point::max() - now;
  const auto want = std::chrono::duration_cast<Steady::duration>(std::chrono::seconds(ttl));
  return want >= left ? Steady::time_point::max() : now + want;
}

void LeaseKeeper::Renew(int64_t id, int64_t* ttl) {
  MutexLock lock(&mu_);
  const auto now = Steady::now();
  SyncLocked(now);
  *ttl = 0;
  int64_t granted = 0;
  if (!node_->state_machine().GetLease(id, &granted, nullptr)) return;
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) {
    // Granted since the last look at the state machine: give it its clock.
    synced_ = false;
    SyncLocked(now);
    it = deadlines_.find(id);
  }
  // Past its deadline (its revoke comes next) or being revoked: gone for
  // its holder, whatever the outcome of the revoke.
  if (it == deadlines_.end() || it->second.deadline <= now || revoking_.count(id) != 0 ||
      client_revoking_.count(id) != 0) {
    return;
  }
  it->second.deadline = DeadlineAfter(now, granted);
  *ttl = granted;
}

void LeaseKeeper::BeginRevoke(int64_t id) {
  MutexLock lock(&mu_);
  ++client_revoking_[id];
}

void LeaseKeeper::EndRevoke(int64_t id) {
  MutexLock lock(&mu_);
  auto it = client_revoking_.find(id);
  if (it != client_revoking_.end() && --it->second == 0) client_revoking_.erase(it);
}

void LeaseKeeper::Remaining(int64_t id, int64_t* remaining, int64_t* granted,
                            std::vector<std::string>* keys) {
  MutexLock lock(&mu_);
  const auto now = Steady::now();
  SyncLocked(now);
  if (!node_->state_machine().GetLease(id, granted, keys)) {
    *remaining = -1;
    *granted = 0;
    return;
  }
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) {
    *remaining = *granted;
    return;
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(it->second.deadline - now).count();
  *remaining = left <= 0 ? 0 : (left + 999) / 1000;
}

uint64_t LeaseKeeper::expired_total() const {
  MutexLock lock(&mu_);
  return expired_total_;
}

}  // namespace raftkv
