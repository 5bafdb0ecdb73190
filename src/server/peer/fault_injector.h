// FaultInjector: cut network links between members, for fault tests only
// (raftkv-server --enable_test_faults; the chaos runner drives it through the
// Testing.SetFaults RPC). A member with a blocked peer drops every message it
// would send to that peer (the transport reports it unreachable, as a dead
// connection would) and refuses every peer request from it with UNAVAILABLE.
// Each side of a partition is told, so both directions are cut. Client
// traffic is not affected: a partitioned leader still accepts client calls,
// which then cannot commit — exactly what a real partition does.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>

#include "common/mutex.h"

namespace raftkv {

class FaultInjector {
 public:
  void SetBlockedPeers(std::set<uint64_t> peers) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    blocked_ = std::move(peers);
    any_.store(!blocked_.empty(), std::memory_order_release);
  }
  bool IsBlocked(uint64_t peer) const EXCLUDES(mu_) {
    if (!any_.load(std::memory_order_acquire)) return false;
    MutexLock lock(&mu_);
    return blocked_.count(peer) > 0;
  }

 private:
  mutable Mutex mu_;
  std::set<uint64_t> blocked_ GUARDED_BY(mu_);
  std::atomic<bool> any_{false};
};

}  // namespace raftkv
