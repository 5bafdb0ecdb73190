// The leases of the state machine: each lease's TTL, the entry that granted
// it, and the keys attached to it. A lease only exists or not here: when it
// expires is the leader's business (node/lease_keeper.h), which proposes its
// LEASE_REVOKE. The generation changes whenever the set of leases does (a
// grant, a revocation, a restore), so the leader's clock knows when to look
// again.
//
// Not thread-safe: the state machine guards it with its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace raftkv {

// A lease as the leader's clock needs it (node/lease_keeper.h).
struct LeaseInfo {
  int64_t id = 0;
  int64_t ttl = 0;             // seconds granted
  uint64_t granted_index = 0;  // the entry that granted it (0: restored from an older file)
};

class LeaseTable {
 public:
  // Whether lease `id` exists.
  bool Contains(int64_t id) const;
  // Creates lease `id` (no keys) with `ttl` seconds, granted by the entry at
  // `granted_index`, and bumps the generation. False, and nothing changes,
  // if it exists already. The caller checks that id and ttl are > 0.
  bool Grant(int64_t id, int64_t ttl, uint64_t granted_index);
  // The index of the entry that granted lease `id`; nullopt if there is no
  // such lease.
  std::optional<uint64_t> GrantedIndex(int64_t id) const;
  // Removes lease `id`, moves its keys into *keys and bumps the generation.
  // False, and nothing changes, if there is no such lease.
  bool Revoke(int64_t id, std::set<std::string>* keys);
  // Attaches `key` to lease `id`. False, and nothing changes, if there is no
  // such lease (id 0 included: a key without a lease).
  bool Attach(const std::string& key, int64_t id);
  // Detaches `key` from lease `id`; nothing if there is no such lease (id 0
  // included) or the key is not attached to it.
  void Detach(const std::string& key, int64_t id);

  // The TTL (seconds) and, with `keys`, the keys of lease `id` in key order;
  // false if there is no such lease.
  bool Get(int64_t id, int64_t* ttl, std::vector<std::string>* keys) const;
  // Every lease as (id, ttl), in id order.
  std::vector<std::pair<int64_t, int64_t>> List() const;
  // Every lease with the entry that granted it, in id order.
  std::vector<LeaseInfo> Infos() const;
  size_t size() const { return leases_.size(); }
  // Bumped by every Grant and Revoke that succeeds and by every Swap.
  uint64_t generation() const { return generation_; }

  // What changed since the last TakeChanges(), recorded only once
  // TrackChanges() was called (a persistent store writes these rows
  // through): the leases granted or revoked (a revoked lease's keys with
  // it), and the keys attached or detached. Look each one up to know which.
  struct Changes {
    std::set<int64_t> leases;
    std::set<std::pair<int64_t, std::string>> keys;  // (lease, key)
  };
  void TrackChanges() { tracking_ = true; }
  Changes TakeChanges() { return std::exchange(changes_, Changes()); }
  // Whether `key` is attached to lease `id`.
  bool Attached(int64_t id, const std::string& key) const;

  // Restore: adds a lease without keys, in increasing id order (Attach its
  // keys afterwards); does not bump the generation. False, and nothing
  // changes, when `id` is not above every id added so far.
  bool AddRestored(int64_t id, int64_t ttl, uint64_t granted_index);
  // Exchanges the leases and the changes recorded (not the generations, nor
  // whether changes are tracked) with `other`'s, then bumps this table's
  // generation: installs a table built by AddRestored.
  void Swap(LeaseTable* other);

 private:
  struct Lease {
    int64_t ttl = 0;
    uint64_t granted_index = 0;
    std::set<std::string> keys;
  };

  std::map<int64_t, Lease> leases_;
  uint64_t generation_ = 0;
  bool tracking_ = false;
  Changes changes_;
};

}  // namespace raftkv
