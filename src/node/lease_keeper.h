// The leases' clocks. The replicated state (kv/kv_state_machine.h) only
// says which leases exist and their TTL; when one expires is decided here,
// on the leader alone, by its steady clock:
//
//  - when this member becomes leader (a new term), every lease gets its full
//    TTL again from that moment, so a lease never expires earlier than its
//    holder was promised across a leader change (etcd does the same);
//  - a lease granted while it leads starts its TTL when the grant is applied;
//  - a keep-alive restarts the TTL, after a ReadIndex barrier confirmed this
//    member still leads (so a deposed leader cannot renew a lease the new
//    leader will expire first); a lease past its deadline, or with a revoke
//    in flight (its expiry, or a client's LeaseRevoke), is not renewed: the
//    answer is TTL 0, the lease is gone for its holder (as etcd);
//  - once a deadline passes, the leader proposes LEASE_REVOKE (lease_expired)
//    and every replica deletes the lease's keys at that entry's revision;
//  - a clock belongs to one grant (the index of the entry that granted the
//    lease): an id revoked and granted again gets a clock of its own.
//
// A thread ("raftkv-lease") checks every `check_interval_ms`.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>


#include "common/lifeline.h"
#include "common/mutex.h"
#include "node/node.h"

namespace raftkv {

struct LeaseOptions {
  // The longest TTL there is (as etcd's): a deadline that far ahead still
  // fits the steady clock.
  static constexpr int64_t kMaxTtlS = 9000000000;
  int64_t min_ttl_s = 2;          // a shorter TTL is raised to this (as etcd)
  int64_t max_ttl_s = kMaxTtlS;   // a longer one is refused
  int check_interval_ms = 100;
};

class LeaseKeeper {
 public:
  LeaseKeeper(const LeaseOptions& options, RaftNode* node);
  ~LeaseKeeper();
  void Start();
  void Stop() EXCLUDES(mu_);

  const LeaseOptions& options() const { return options_; }
  // Checks a requested TTL: INVALID_ARGUMENT when <= 0 or above the
  // maximum; otherwise the TTL to grant (raised to the minimum).
  Status GrantTtl(int64_t requested, int64_t* granted) const;

  // Leader, after a read barrier: restarts the TTL of lease `id`; *ttl = its
  // TTL, or 0 when there is no such lease, its deadline passed or a revoke
  // of it is in flight.
  void Renew(int64_t id, int64_t* ttl) EXCLUDES(mu_);
  // A client's LeaseRevoke of `id` is proposed / has its outcome: no renewal
  // meanwhile.
  void BeginRevoke(int64_t id) EXCLUDES(mu_);
  void EndRevoke(int64_t id) EXCLUDES(mu_);
  // Leader: seconds left of lease `id` (rounded up), or -1 when it does not
  // exist; *granted its TTL.
  void Remaining(int64_t id, int64_t* remaining, int64_t* granted, std::vector<std::string>* keys)
      EXCLUDES(mu_);

  // Leases revoked because they expired (a metric).
  uint64_t expired_total() const EXCLUDES(mu_);

 private:
  using Steady = std::chrono::steady_clock;
  struct LeaseClock {
    uint64_t granted_index = 0;  // the grant this clock belongs to
    Steady::time_point deadline;
  };
  // now + ttl seconds, saturating.
  static Steady::time_point DeadlineAfter(Steady::time_point now, int64_t ttl_s);
  void Loop() EXCLUDES(mu_);
  // Follows the node's role and the state machine's leases.
  void SyncLocked(Steady::time_point now) REQUIRES(mu_);
  // The answer to the expiry of (id, granted_index) this keeper proposed.
  void Revoked(int64_t id, uint64_t granted_index, const Status& status) EXCLUDES(mu_);

  const LeaseOptions options_;
  RaftNode* const node_;
  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t leader_term_ GUARDED_BY(mu_) = 0;  // the term this member leads (0: not leader)
  uint64_t generation_ GUARDED_BY(mu_) = 0;   // the state machine's lease generation seen
  bool synced_ GUARDED_BY(mu_) = false;
  std::map<int64_t, LeaseClock> deadlines_ GUARDED_BY(mu_);  // leader only
  std::map<int64_t, Steady::time_point> revoking_ GUARDED_BY(mu_);  // expiry proposed at
  std::map<int64_t, int> client_revoking_ GUARDED_BY(mu_);  // LeaseRevoke calls in flight
  uint64_t expired_total_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
  Lifeline lifeline_;  // a proposal's callback may run after Stop()
};

}  // namespace raftkv
