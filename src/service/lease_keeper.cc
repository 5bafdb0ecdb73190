#include "service/lease_keeper.h"

#include <glog/logging.h>

#include "service/thread_name.h"

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
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

grpc::Status LeaseKeeper::GrantTtl(int64_t requested, int64_t* granted) const {
  if (requested <= 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "lease TTL must be > 0 seconds, got " + std::to_string(requested));
  }
  if (requested > options_.max_ttl_s) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "lease TTL " + std::to_string(requested) + "s exceeds the maximum " +
                            std::to_string(options_.max_ttl_s) + "s (--max_lease_ttl_s)");
  }
  *granted = std::max(requested, options_.min_ttl_s);
  return grpc::Status::OK;
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
  std::map<int64_t, Steady::time_point> next;
  for (const auto& [id, ttl] : node_->state_machine().Leases()) {
    auto it = deadlines_.find(id);
    next.emplace(id, !promoted && it != deadlines_.end() ? it->second : now + std::chrono::seconds(ttl));
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
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.check_interval_ms));
    if (stopping_) break;
    const auto now = Steady::now();
    SyncLocked(now);
    if (leader_term_ == 0) continue;
    std::vector<int64_t> expired;
    for (const auto& [id, deadline] : deadlines_) {
      if (deadline > now) continue;
      auto r = revoking_.find(id);
      // A proposal that got no answer (lost leadership, dropped) is made again.
      if (r != revoking_.end() && now - r->second < std::chrono::seconds(2)) continue;
      revoking_[id] = now;
      expired.push_back(id);
    }
    if (expired.empty()) continue;
    lock.unlock();
    for (int64_t id : expired) {
      Command cmd;
      cmd.set_op(Command::LEASE_REVOKE);
      cmd.set_lease(id);
      cmd.set_lease_expired(true);
      node_->Propose(cmd.SerializeAsString(), Steady::now() + std::chrono::seconds(2),
                     [this, id](Outcome out) {
                       std::lock_guard<std::mutex> l(mu_);
                       if (out.status.ok()) {
                         ++expired_total_;
                         VLOG(1) << "lease " << std::hex << id << " expired";
                       }
                       if (out.status.ok() || out.status.error_code() == grpc::StatusCode::NOT_FOUND) {
                         revoking_.erase(id);
                         deadlines_.erase(id);
                       }
                     });
    }
    lock.lock();
  }
}

void LeaseKeeper::Renew(int64_t id, int64_t* ttl) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Steady::now();
  SyncLocked(now);
  int64_t granted = 0;
  if (!node_->state_machine().GetLease(id, &granted, nullptr)) {
    *ttl = 0;
    return;
  }
  deadlines_[id] = now + std::chrono::seconds(granted);
  *ttl = granted;
}

void LeaseKeeper::Remaining(int64_t id, int64_t* remaining, int64_t* granted,
                            std::vector<std::string>* keys) {
  std::lock_guard<std::mutex> lock(mu_);
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
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(it->second - now).count();
  *remaining = left <= 0 ? 0 : (left + 999) / 1000;
}

uint64_t LeaseKeeper::expired_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expired_total_;
}

}  // namespace raftkv
