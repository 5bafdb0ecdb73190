#include "kv/lease_table.h"

namespace raftkv {

bool LeaseTable::Contains(int64_t id) const { return leases_.count(id) != 0; }

bool LeaseTable::Grant(int64_t id, int64_t ttl, uint64_t granted_index) {
  if (!leases_.emplace(id, Lease{ttl, granted_index, {}}).second) return false;
  if (tracking_) changes_.leases.insert(id);
  ++generation_;
  return true;
}

std::optional<uint64_t> LeaseTable::GrantedIndex(int64_t id) const {
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  return it->second.granted_index;
}

bool LeaseTable::Revoke(int64_t id, std::set<std::string>* keys) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  *keys = std::move(it->second.keys);
  leases_.erase(it);
  if (tracking_) changes_.leases.insert(id);
  ++generation_;
  return true;
}

bool LeaseTable::Attach(const std::string& key, int64_t id) {
  if (id == 0) return false;  // no lease
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  if (it->second.keys.insert(key).second && tracking_) changes_.keys.emplace(id, key);
  return true;
}

void LeaseTable::Detach(const std::string& key, int64_t id) {
  if (id == 0) return;  // no lease
  auto it = leases_.find(id);
  if (it != leases_.end() && it->second.keys.erase(key) != 0 && tracking_) {
    changes_.keys.emplace(id, key);
  }
}

bool LeaseTable::Attached(int64_t id, const std::string& key) const {
  auto it = leases_.find(id);
  return it != leases_.end() && it->second.keys.count(key) != 0;
}

bool LeaseTable::Get(int64_t id, int64_t* ttl, std::vector<std::string>* keys) const {
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  *ttl = it->second.ttl;
  if (keys != nullptr) keys->assign(it->second.keys.begin(), it->second.keys.end());
  return true;
}

std::vector<std::pair<int64_t, int64_t>> LeaseTable::List() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(leases_.size());
  for (const auto& [id, l] : leases_) out.emplace_back(id, l.ttl);
  return out;
}

std::vector<LeaseInfo> LeaseTable::Infos() const {
  std::vector<LeaseInfo> out;
  out.reserve(leases_.size());
  for (const auto& [id, l] : leases_) out.push_back(LeaseInfo{id, l.ttl, l.granted_index});
  return out;
}

bool LeaseTable::AddRestored(int64_t id, int64_t ttl, uint64_t granted_index) {
  if (!leases_.empty() && id <= leases_.rbegin()->first) return false;
  leases_.emplace_hint(leases_.end(), id, Lease{ttl, granted_index, {}});
  if (tracking_) changes_.leases.insert(id);
  return true;
}

void LeaseTable::Swap(LeaseTable* other) {
  leases_.swap(other->leases_);
  changes_.leases.swap(other->changes_.leases);
  changes_.keys.swap(other->changes_.keys);
  ++generation_;
}

}  // namespace raftkv
